"""Photos for the book's models, from the sample images scikit-image ships (nothing is downloaded).

Two loaders, for the two pixel conventions the book's models expect:

* `load_image`: values in [0, 1], torchvision's convention (its detectors and classifiers normalize
  inside or after); resized with scikit-image.
* `sample_photo`: values in 0-255, detectron2's convention (its models subtract a pixel mean given in
  0-255), in RGB or BGR order; resized with PyTorch.

Both refuse a name scikit-image does not have and a photo that is not in color. The two resizes
differ slightly in their pixels; each page's numbers come from the one it calls.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import skimage.data
import skimage.transform
import torch
import torch.nn.functional as F

CALIBRATION_PHOTOS = ("astronaut", "chelsea", "coffee", "rocket")
"""The color photos the book re-estimates random-weight BatchNorm statistics on."""


def _rgb_pixels(name: str) -> np.ndarray:
    """``skimage.data.<name>()``, checked to be a color photo: (H, W, 3) uint8."""
    loader = getattr(skimage.data, name, None)
    if loader is None or not callable(loader):
        raise ValueError(f"skimage.data has no image {name!r}; try one of {CALIBRATION_PHOTOS}")
    pixels = loader()
    if pixels.ndim != 3 or pixels.shape[-1] != 3:
        raise ValueError(
            f"skimage.data.{name} is not an RGB photo (shape {pixels.shape}); choose a color image"
        )
    return pixels


def load_image(name: str, size: int | tuple[int, int]) -> torch.Tensor:
    """``skimage.data.<name>()`` as a float (3, H, W) tensor in [0, 1], resized to ``size`` (h, w)."""
    size = (size, size) if isinstance(size, int) else tuple(size)
    pixels = skimage.transform.resize(_rgb_pixels(name), size, anti_aliasing=True)
    return torch.from_numpy(pixels).permute(2, 0, 1).float().contiguous()


def sample_photo(
    name: str, size: tuple[int, int], *, channel_order: Literal["RGB", "BGR"] = "RGB"
) -> torch.Tensor:
    """`skimage.data.<name>()` as a (3, H, W) float tensor with values in 0-255, resized to `size`.

    `size` is (height, width); the resize is bilinear with antialiasing. detectron2's R-CNN configs
    expect ``channel_order="BGR"``, ViTDet's and torchvision's RGB.
    """
    if channel_order not in ("RGB", "BGR"):
        raise ValueError(f"channel_order must be 'RGB' or 'BGR', got {channel_order!r}")
    pixels = _rgb_pixels(name)
    if channel_order == "BGR":
        pixels = pixels[..., ::-1]
    image = torch.from_numpy(pixels.copy()).permute(2, 0, 1).float()
    return F.interpolate(image[None], size=size, mode="bilinear", antialias=True)[0]
