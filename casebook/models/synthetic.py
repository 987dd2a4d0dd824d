"""Synthetic detector outputs (boxes, scores, labels), for NMS examples that need no model."""

from __future__ import annotations

import torch


def random_detections(
    num_boxes: int,
    *,
    num_classes: int = 3,
    image_size: float = 640.0,
    max_box_size: float = 96.0,
    score_range: tuple[float, float] = (0.0, 1.0),
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Synthetic detector output: `(boxes, scores, labels)` for `num_boxes` candidates.

    Boxes are float32 `(x1, y1, x2, y2)` inside the image with `0 <= x1 < x2` and `0 <= y1 < y2`
    (the format torchvision's box ops expect), scores are uniform in `score_range`, labels are
    int64 class indices. The same seed gives the same tensors.
    """
    generator = torch.Generator().manual_seed(seed)
    top_left = torch.rand(num_boxes, 2, generator=generator) * (image_size - max_box_size)
    size = 4.0 + torch.rand(num_boxes, 2, generator=generator) * (max_box_size - 4.0)
    boxes = torch.cat([top_left, top_left + size], dim=1)
    low, high = score_range
    scores = low + (high - low) * torch.rand(num_boxes, generator=generator)
    labels = torch.randint(0, num_classes, (num_boxes,), generator=generator)
    return boxes, scores, labels
