"""Patches of the book's Deformable DETR (beside its model): the position embedding rewritten for
TensorRT's slice converter.

DETR's sine position embedding divides each row (column) index by the last one, read with a slice
that starts at -1: ``y_embed[:, -1:, :]``. Exported with a dynamic height *and* width, that is an
``aten.slice.Tensor`` with a negative start on one axis of a tensor whose other axis is dynamic too.
Torch-TensorRT 2.14's slice converter builds the start of *every* axis from the input's static shape
when the start is negative, and a dynamic axis has -1 there: that axis starts at its size + 1, past
its end, and TensorRT's shape analysis proves its length negative ("has axis 2 with inherently
negative length"). The converter reports it as "Could not get tensor shape." at the next operator.

The replacement reads the last row with an index (``select``), whose converter handles a negative
index on a dynamic axis, and puts the axis back with ``unsqueeze``: the same values, no slice.
``tests/test_deformable_detr_patches.py`` compares it with the original on non-square sizes.
"""

from __future__ import annotations

import math

import torch

from casebook.patches.core import Patch, apply, replace

from . import deformable_detr


def sine_position_embedding(feature: torch.Tensor, num_pos_feats: int, temperature: float = 10000.0):
    """DETR's sine embedding with the last row and column read by index, not by a slice from -1.

    Every line but the two marked is the original's.
    """
    not_mask = torch.ones_like(feature[:, 0])
    y_embed = (
        not_mask.cumsum(1) / (not_mask.cumsum(1)[:, -1].unsqueeze(1) + 1e-6) * 2 * math.pi  # export-safe
    )
    x_embed = (
        not_mask.cumsum(2) / (not_mask.cumsum(2)[:, :, -1].unsqueeze(2) + 1e-6) * 2 * math.pi  # export-safe
    )
    dim_t = torch.arange(num_pos_feats, dtype=torch.float32, device=feature.device)
    dim_t = temperature ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / num_pos_feats)
    pos_x = x_embed[..., None] / dim_t
    pos_y = y_embed[..., None] / dim_t
    pos_x = torch.stack((pos_x[..., 0::2].sin(), pos_x[..., 1::2].cos()), dim=4).flatten(3)
    pos_y = torch.stack((pos_y[..., 0::2].sin(), pos_y[..., 1::2].cos()), dim=4).flatten(3)
    return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)


PATCHES: dict[str, Patch] = {
    "last_row_by_index": Patch(
        "last_row_by_index",
        "casebook.models.deformable_detr.sine_position_embedding",
        "TensorRT: `Slice ... has axis 2 with inherently negative length` (a slice from -1 while "
        "height and width are both dynamic)",
        sine_position_embedding,
        lambda: replace(deformable_detr, "sine_position_embedding", sine_position_embedding),
    )
}


def tensorrt_patches(*names: str):
    """Apply the named patches (all of :data:`PATCHES` if none are named) inside a ``with`` block."""
    return apply(PATCHES, *names)
