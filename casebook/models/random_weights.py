"""Making a random-weight model usable for parity checks (the build machines cannot download weights).

In a randomly initialised network in eval mode, BatchNorm layers normalize with their initial
statistics (mean 0, variance 1), which are far from the statistics of real activations. In a deep
backbone the activations then shrink layer by layer, and a detector's heads give (nearly) the same
score to every box, so a comparison of detections between eager and an exported program would be
trivially true. Re-estimating the statistics on a batch of inputs fixes that.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torchvision
from torch import nn

from .images import CALIBRATION_PHOTOS, load_image


def reestimate_batchnorm(model: nn.Module, batch: torch.Tensor, forward: Callable | None = None) -> int:
    """Replace the running statistics of every BatchNorm layer of `model` by those of `batch`.

    `forward` runs the part of the model that contains the BatchNorm layers on `batch` (default:
    `model` itself; for a torchvision detector pass `model.backbone`, which takes a batched tensor).
    The statistics are a plain average over this one batch (``momentum=None``). The layers are left
    in eval mode. Returns how many layers were re-estimated; raises ValueError when there are none.
    """
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        raise ValueError(
            f"{type(model).__name__} has no BatchNorm layer to re-estimate (FrozenBatchNorm2d, used by "
            "detectron2 and some torchvision backbones, has no running statistics to update)"
        )
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # cumulative average over the batch
        norm.train()
    with torch.no_grad():
        (forward or model)(batch)
    for norm in norms:
        norm.eval()
    return len(norms)


DETECTORS: tuple[str, ...] = tuple(torchvision.models.list_models(module=torchvision.models.detection))
"""Every detection builder of the installed torchvision (12 on 0.29.1)."""


def check_detector_name(name: str) -> None:
    """Raise ValueError, listing the builders, unless ``name`` is one of `DETECTORS`."""
    if name not in DETECTORS:
        raise ValueError(
            f"{name!r} is not a detection builder of torchvision {torchvision.__version__}; "
            f"choose one of: {', '.join(DETECTORS)}"
        )


def has_batchnorm(model: nn.Module) -> bool:
    """Whether ``model`` has a BatchNorm layer with running statistics (SSD300's VGG has none)."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def calibrate_detector(model: nn.Module) -> int:
    """Re-estimate the BatchNorm statistics of a torchvision detector's backbone on the book's four
    calibration photos (`CALIBRATION_PHOTOS`) at 256 x 256, normalized by the model's own transform.
    Returns how many layers were re-estimated."""
    photos = torch.stack([model.transform.normalize(load_image(name, 256)) for name in CALIBRATION_PHOTOS])
    return reestimate_batchnorm(model, photos, forward=model.backbone)


def random_detector(name: str, seed: int = 0) -> nn.Module:
    """``torchvision.models.get_model(name)`` with random weights drawn after ``torch.manual_seed(seed)``,
    in eval mode, its backbone calibrated (`calibrate_detector`) where it has BatchNorm. The model
    responds to its input; it is not a detector."""
    check_detector_name(name)
    torch.manual_seed(seed)
    model = torchvision.models.get_model(name, weights=None, weights_backbone=None).eval()
    if has_batchnorm(model):
        calibrate_detector(model)
    return model
