"""torchvision's MViT-V2-S video classifier, built for a clip small enough to export on a CPU."""

from __future__ import annotations

from unittest import mock

import torchvision
import torchvision.models.video.mvit as _mvit_module


def mvit_v2_s_for_clip(
    temporal_size: int = 4, spatial_size: tuple[int, int] = (64, 64), **kwargs
) -> torchvision.models.video.MViT:
    """torchvision's `mvit_v2_s` architecture (random weights) for clips of another size.

    `torchvision.models.video.mvit_v2_s` always builds the model for 16 frames of 224x224 (the
    token grid it reshapes to and its relative position tables are sized for that clip, so other
    clip sizes fail) and does not let `spatial_size` or `temporal_size` through. This builds the very same architecture — same blocks, heads, channels,
    strides — through the same builder, with only the clip size changed. Weights are random
    (`weights=None`); nothing is downloaded. Extra keyword arguments go to `mvit_v2_s`.

    The input is `(batch, 3, temporal_size, *spatial_size)`. Keep the spatial sizes multiples of 32
    and `temporal_size` even, as in the default 16x224x224 clip, so every stage divides evenly.
    """
    real_mvit = _mvit_module.MViT

    def mvit_for_clip(**mvit_kwargs):
        mvit_kwargs.update(spatial_size=tuple(spatial_size), temporal_size=temporal_size)
        return real_mvit(**mvit_kwargs)

    with mock.patch.object(_mvit_module, "MViT", mvit_for_clip):
        return torchvision.models.video.mvit_v2_s(weights=None, **kwargs)
