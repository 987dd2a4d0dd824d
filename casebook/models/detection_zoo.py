"""Every detector builder in ``torchvision.models.detection``, built, exported and compared the same way.

The list is torchvision's own (``torchvision.models.list_models``), so a release that adds a builder
adds a row. Each model gets random weights (seed 0) with BatchNorm statistics re-estimated on four
photos where it has BatchNorm, the resize taken out of its transform (``_skip_resize``, as in the
Faster R-CNN case study: height and width can then stay symbolic), and one eager run before export
(it caches the RoI pooler's scales). Exports run under every patch of
:mod:`casebook.patches.torchvision`.

The accepted image size is read from the program: export with ``Dim.AUTO`` for height and width,
then :func:`size_range` returns the range export derived (a lower bound from the smallest feature
map, an upper bound where the architecture has one).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch.export import Dim

from ..checked_program import CheckedProgram, input_contract
from ..introspect import symbol_range
from ..patches.torchvision import export_patches
from .images import load_image
from .random_weights import DETECTORS as DETECTORS  # the zoo's builders: pages read zoo.DETECTORS
from .random_weights import check_detector_name, random_detector

EXAMPLE_SIZES: dict[str, tuple[int, int]] = {
    "ssd300_vgg16": (304, 288),  # SSD300's extra layers need about 300 pixels a side
    "ssdlite320_mobilenet_v3_large": (320, 288),
}
"""(height, width) of the export example where the default does not fit; not square, on purpose."""

DEFAULT_EXAMPLE_SIZE = (320, 256)

EXACT_KEYS = ("boxes", "labels", "scores", "keypoints")
"""Outputs compared bit for bit: the program runs the same kernels as eager on them."""

TOLERANCES: dict[str, tuple[float, float]] = {
    "masks": (0.0, 1e-5),  # probabilities from the loop-free paster: float rounding, ~1e-6 seen
    "keypoints_scores": (1e-5, 1e-5),  # heatmap values of order 1 to 10, another bicubic rounding
}
"""(rtol, atol) for the outputs the RoI-head patches compute with other arithmetic than eager."""


def example_size(name: str) -> tuple[int, int]:
    """The (height, width) a detector is exported and compared at."""
    check_detector_name(name)
    return EXAMPLE_SIZES.get(name, DEFAULT_EXAMPLE_SIZE)


def build_detector(name: str, seed: int = 0) -> torch.nn.Module:
    """`random_detector(name, seed)` (random weights, the backbone's BatchNorm statistics re-estimated
    on the calibration photos where it has BatchNorm), resize off, warmed up. Takes images at their
    own size; its boxes are in that image's coordinates.
    """
    model = random_detector(name, seed)  # checks the name
    model.transform._skip_resize = True
    eager(model, example_image(name))  # caches the RoI pooler's scales, which would pin H and W
    return model


def example_image(name: str, photo: str = "astronaut") -> torch.Tensor:
    """The photo at the detector's example size, a float (3, H, W) tensor in [0, 1]."""
    return load_image(photo, example_size(name))


def eager(model: torch.nn.Module, image: torch.Tensor) -> dict[str, torch.Tensor]:
    """The model's detections for one image, with its resize off (the patch that honours ``_skip_resize``)."""
    with torch.inference_mode(), export_patches("skip_resize_in_eval"):
        return model([image])[0]


@dataclass(frozen=True)
class ExportRun:
    """One export of one detector: the program and how long ``torch.export.export`` took."""

    program: torch.export.ExportedProgram
    seconds: float
    dynamic: bool
    strict: bool


def export_detector(model: torch.nn.Module, image: torch.Tensor, *, dynamic: bool, strict: bool) -> ExportRun:
    """Export under every patch; ``dynamic`` makes height and width ``Dim.AUTO``."""
    shapes = ([{1: Dim.AUTO, 2: Dim.AUTO}],) if dynamic else None
    start = time.perf_counter()
    with export_patches():
        program = torch.export.export(model, ([image],), dynamic_shapes=shapes, strict=strict)
    return ExportRun(program, time.perf_counter() - start, dynamic, strict)


def size_range(program: torch.export.ExportedProgram) -> dict[str, tuple[int, int | None]]:
    """{"H": (min, max), "W": (min, max)} the program accepts; max None when export found no upper bound.

    A static dimension gives (size, size). Read from the program's range constraints, the bounds
    export derived while tracing (see :func:`casebook.checked_program.input_contract`).
    """
    _, contracts = input_contract(program)
    image = next(c for c in contracts if c is not None and c.name == "images[0]")
    return {
        label: (dim.size, dim.size) if dim.size is not None else (dim.low, dim.high)
        for label, dim in zip(("H", "W"), image.dims[1:], strict=True)
    }


def keypoint_canvas(program: torch.export.ExportedProgram) -> tuple[tuple, dict[str, tuple[int, int | None]]]:
    """The keypoint decoder's canvas in a program: its shape, (detections, 17, height, width), and
    {"H": (min, max), "W": (min, max)} of its height and width, max None when unbounded.

    The canvas is the decoder's one 4-D ``masked_fill`` (see
    :func:`casebook.patches.torchvision_heads.heatmaps_to_keypoints`); its height and width are read
    from data, so their bounds are the program's range constraints on those unbacked sizes.
    """
    shape = next(
        (
            node.meta["val"].shape
            for node in program.graph.nodes
            if node.target == torch.ops.aten.masked_fill.Scalar and node.meta["val"].dim() == 4
        ),
        None,
    )
    if shape is None:
        raise ValueError(
            "the program has no keypoint decoding canvas (a 4-D masked_fill): export Keypoint R-CNN, "
            "or a module that calls heatmaps_to_keypoints, under the patch heatmaps_to_keypoints_without_loop"
        )
    return tuple(shape), {
        label: symbol_range(program, size) for label, size in zip(("H", "W"), shape[2:], strict=True)
    }


INPUT_ADVICE = "A torchvision detector takes a list of float32 images of shape (3, H, W), values in [0, 1]."


def checked_detector(program: torch.export.ExportedProgram) -> CheckedProgram:
    """The exported detector behind a `CheckedProgram`: a bad image is refused with a readable error.

    The exported program runs a ``uint8`` image that eager torchvision refuses, and refuses an empty
    list, a second image or a size outside its range with errors that name no cause; the wrapper
    refuses each with what was wrong and what the program accepts, before anything runs.
    """
    return CheckedProgram(program, what_to_do=INPUT_ADVICE)


def parity(expected: Mapping[str, torch.Tensor], actual: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """Largest |difference| per output, plus two tie counts; AssertionError outside the policy.

    Boxes, labels, scores and keypoints must be identical; masks and keypoint scores within
    :data:`TOLERANCES`. The score lists must be identical. Two exceptions, both for exactly equal
    scores, whose order NMS leaves unspecified (see :func:`casebook.patches.torchvision.batched_nms`):

    - ``"reordered ties"``: detections with equal scores may come in another order. Each is then
      paired with the same detection (same box and label, same score) and compared with it.
    - ``"tied at the cut"``: when several candidates share the score of the last detection kept
      (the cut to ``detections_per_img``), eager and the program may keep different ones of them.
      Those are left out of the comparison.

    Any other difference fails.
    """
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
        if key in TOLERANCES:
            rtol, atol = TOLERANCES[key]
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
