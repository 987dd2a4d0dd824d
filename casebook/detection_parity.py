"""Parity for detectors, where position-by-position comparison is the wrong test.

A compiled detector fuses and reorders floating-point work, so scores move by about 1e-5, and two
detections whose scores differ by less than that trade places in the ranking. :func:`matched_differences`
pairs each reference detection with the nearest box of the other result instead, then reports how far
labels, boxes and scores are apart. The Faster R-CNN case study derives it on its page.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

_KEYS = ("boxes", "labels", "scores")


def matched_differences(expected: Mapping[str, torch.Tensor], actual: Mapping[str, torch.Tensor]) -> dict:
    """Pair each expected detection with the nearest actual box of the same label (L-inf distance);
    the worst differences.

    Same label, because a single-stage detector can return one box several times, once per class.
    Raises AssertionError when the two results cannot be the same detections: a different count, two
    detections paired with one box, or a detection with no box of its label on the other side.
    """
    for name, result in (("expected", expected), ("actual", actual)):
        missing = [key for key in _KEYS if key not in result]
        if missing:
            raise KeyError(f"the {name} result has no {', '.join(missing)}: pass one image's detections dict")
    count, other = len(expected["scores"]), len(actual["scores"])
    assert count == other, f"different number of detections: {count} expected, {other} actual"
    if count == 0:
        return {"detections": 0, "ranks swapped": 0, "max |box diff| px": 0.0, "max |score diff|": 0.0}
    distance = torch.cdist(expected["boxes"].double(), actual["boxes"].double(), p=float("inf"))
    distance[expected["labels"][:, None] != actual["labels"][None, :]] = float("inf")
    pairing = distance.argmin(dim=1)
    assert distance.min(dim=1).values.isfinite().all(), (
        "a detection has no counterpart with its label: the other result has another label there"
    )
    assert len(set(pairing.tolist())) == count, "two detections paired with the same box"
    return {
        "detections": count,
        "ranks swapped": int((pairing != torch.arange(count)).sum()),
        "max |box diff| px": distance.min(dim=1).values.max().item(),
        "max |score diff|": (expected["scores"] - actual["scores"][pairing]).abs().max().item(),
    }
