"""Parity for detectors: one image's detections (a dict of boxes, labels, scores, ...) against eager's.

Two policies, for two kinds of candidate:

- :func:`exact_differences`, for a program that runs the same PyTorch kernels as eager (an exported
  program, a patched model): identical outputs, except where NMS leaves the order of equal scores
  unspecified, and the outputs a patch computes with other arithmetic, within a tolerance.
- :func:`matched_differences`, for a compiled detector (AOTInductor, ExecuTorch, ONNX Runtime), which
  fuses and reorders floating-point work, so scores move by about 1e-5 and two detections whose
  scores differ by less than that trade places in the ranking: it pairs each reference detection
  with the nearest box of the other result, then reports how far labels, boxes and scores are apart.
  The Faster R-CNN case study derives it on its page.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

_KEYS = ("boxes", "labels", "scores")

TOLERANCES: dict[str, tuple[float, float]] = {
    "masks": (0.0, 1e-5),  # probabilities from the loop-free paster: float rounding, ~1e-6 seen
    "keypoints_scores": (1e-5, 1e-5),  # heatmap values of order 1 to 10, another bicubic rounding
}
"""(rtol, atol) for the outputs torchvision's RoI-head patches compute with other arithmetic than eager."""


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


def exact_differences(
    expected: Mapping[str, torch.Tensor],
    actual: Mapping[str, torch.Tensor],
    tolerances: Mapping[str, tuple[float, float]] | None = None,
) -> dict[str, float]:
    """Largest |difference| per output, plus two tie counts; AssertionError outside the policy.

    Every output must be identical (boxes, labels, scores, keypoints), except those named in
    ``tolerances``, which must agree within their (rtol, atol); the default, :data:`TOLERANCES`,
    names masks and keypoint scores. ``tolerances={}``: every output identical. The score lists must
    be identical. Two exceptions, both for exactly equal scores, whose order NMS leaves unspecified
    (see :func:`casebook.patches.torchvision.batched_nms`):

    - ``"reordered ties"``: detections with equal scores may come in another order. Each is then
      paired with the same detection (same box and label, same score) and compared with it.
    - ``"tied at the cut"``: when several candidates share the score of the last detection kept
      (the cut to ``detections_per_img``), eager and the program may keep different ones of them.
      Those are left out of the comparison.

    Any other difference fails.
    """
    tolerances = TOLERANCES if tolerances is None else tolerances
    assert expected.keys() == actual.keys(), f"outputs differ: {sorted(expected)} vs {sorted(actual)}"
    for key, want in expected.items():
        got = actual[key]
        assert got.shape == want.shape, f"{key}: shape {tuple(got.shape)}, eager {tuple(want.shape)}"
        assert got.dtype == want.dtype, f"{key}: dtype {got.dtype}, eager {want.dtype}"
    pairing, reordered, cut = _pair_tied_detections(expected, actual)
    kept = pairing >= 0
    differences: dict[str, float] = {}
    for key, want in expected.items():
        want, got = want[kept], actual[key][pairing[kept]]
        differences[key] = 0.0 if want.numel() == 0 else (got.double() - want.double()).abs().max().item()
        if key in tolerances:
            rtol, atol = tolerances[key]
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, msg=lambda m, key=key: f"{key}: {m}")
        else:
            assert torch.equal(got, want), f"{key}: differs from eager by up to {differences[key]:.3g}"
    differences["reordered ties"] = reordered
    differences["tied at the cut"] = cut
    return differences


def _pair_tied_detections(
    expected: Mapping[str, torch.Tensor], actual: Mapping[str, torch.Tensor]
) -> tuple[torch.Tensor, int, int]:
    """For each expected detection, the index of the same detection in ``actual`` (-1: none, a
    different candidate kept at the cut); and how many were reordered among equal scores, and cut."""
    scores = expected["scores"]
    assert torch.equal(actual["scores"], scores), "the scores differ from eager"
    pairing = torch.arange(len(scores))
    differs = torch.zeros(len(scores), dtype=torch.bool)
    for key in ("boxes", "labels"):
        unequal = expected[key] != actual[key]
        differs |= unequal.flatten(1).any(dim=1) if unequal.dim() > 1 else unequal
    reordered = cut = 0
    last = scores[-1] if len(scores) else None
    for row in differs.nonzero().flatten().tolist():
        candidates = [
            other
            for other in (scores == scores[row]).nonzero().flatten().tolist()
            if differs[other]
            and other not in pairing[:row].tolist()
            and torch.equal(actual["boxes"][other], expected["boxes"][row])
            and actual["labels"][other] == expected["labels"][row]
        ]
        if candidates:
            pairing[row] = candidates[0]
            reordered += 1
            continue
        assert scores[row] == last, (
            "detections differ from eager above the last kept score: "
            f"detection {row} of {len(scores)} (score {scores[row].item():.6g}) is not in the program's output"
        )
        pairing[row] = -1
        cut += 1
    return pairing, reordered, cut
