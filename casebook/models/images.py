"""Photos for the detectors, from the sample images scikit-image ships (nothing is downloaded)."""

from __future__ import annotations

from typing import Literal

import skimage.data
import torch
import torch.nn.functional as F


def sample_photo(
    name: str, size: tuple[int, int], *, channel_order: Literal["RGB", "BGR"] = "RGB"
) -> torch.Tensor:
    """`skimage.data.<name>()` as a (3, H, W) float tensor with values in 0-255, resized to `size`.

    `size` is (height, width); the resize is bilinear with antialiasing. detectron2's R-CNN configs
    expect ``channel_order="BGR"``, ViTDet's and torchvision's RGB.
    """
    loader = getattr(skimage.data, name, None)
    if loader is None or not callable(loader):
        raise ValueError(
            f"skimage.data has no image {name!r}; try 'astronaut', 'chelsea', 'coffee' or 'rocket'"
        )
    pixels = loader()
    if pixels.ndim != 3 or pixels.shape[-1] != 3:
        raise ValueError(
            f"skimage.data.{name} is not an RGB photo (shape {pixels.shape}); choose a color image"
        )
    if channel_order not in ("RGB", "BGR"):
        raise ValueError(f"channel_order must be 'RGB' or 'BGR', got {channel_order!r}")
    if channel_order == "BGR":
        pixels = pixels[..., ::-1]
    image = torch.from_numpy(pixels.copy()).permute(2, 0, 1).float()
    return F.interpolate(image[None], size=size, mode="bilinear", antialias=True)[0]
