"""The classifier the shipping pages carry to every runtime: MobileNetV3-Small with random weights.

Its BatchNorm statistics are re-estimated on the four calibration photos, so its outputs depend on
its input (see :mod:`casebook.models.random_weights`). Inputs are ImageNet-normalised 224 x 224 RGB
batches built from ``skimage.data`` photos: nothing is downloaded.
"""

from __future__ import annotations

import torch
import torchvision

from .images import CALIBRATION_PHOTOS, load_image
from .random_weights import reestimate_batchnorm

IMAGE_SIZE = 224
_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
_STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


def photo_batch(names: tuple[str, ...] | list[str] = CALIBRATION_PHOTOS) -> torch.Tensor:
    """The named ``skimage.data`` photos as one normalised (N, 3, 224, 224) float batch."""
    if isinstance(names, str) or not names:
        raise ValueError(
            f"give a non-empty list of photo names, such as {list(CALIBRATION_PHOTOS)}; got {names!r}"
        )
    return torch.stack([(load_image(name, IMAGE_SIZE) - _MEAN) / _STD for name in names])


def mobilenet_v3_small_calibrated(seed: int = 0) -> torch.nn.Module:
    """``torchvision.models.mobilenet_v3_small(weights=None)``, BatchNorm re-estimated, eval mode.

    The weights depend on ``seed`` only; the caller's global random state is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = torchvision.models.mobilenet_v3_small(weights=None).eval()
    reestimate_batchnorm(model, photo_batch())
    return model
