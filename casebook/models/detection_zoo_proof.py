"""The detection zoo page's proof for one builder: three exports, parity with eager, bad inputs.

:func:`export_and_compare` is what the page runs for every builder, two builders at a time in
processes of their own (:func:`start_export_process` sets each one up), so everything it returns
is plain data and the programs go to disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..detection_parity import exact_differences
from ..page import hide_noise
from .detection_zoo import (
    build_detector,
    eager,
    example_image,
    example_size,
    export_detector,
    size_range,
)
from .detector_inputs import bad_input_outcomes
from .images import load_image
from .records import record


def parity_images(name: str, low: int, high: int | None) -> list[tuple[str, torch.Tensor]]:
    """Three (label, image) pairs inside [low, high] (high None: no upper bound): the smallest
    accepted square, the export example, and another photo, not square, near the top (at most 352)."""
    top = min(high or 352, 352)
    return [
        (f"astronaut {low}x{low}", load_image("astronaut", (low, low))),
        ("astronaut {}x{}".format(*example_size(name)), example_image(name)),
        (f"coffee {top}x{top - 37}", load_image("coffee", (top, top - 37))),
    ]


def _score_threshold_owner(model: torch.nn.Module) -> torch.nn.Module:
    """The module whose ``score_thresh`` decides what is kept: the R-CNN heads, or the model itself."""
    return model.roi_heads if hasattr(model, "roi_heads") else model


@dataclass(frozen=True)
class ZooResult:
    """What :func:`export_and_compare` found for one builder."""

    row: dict[str, Any]
    """The builder's row of the page's table: export seconds, range, what parity compared."""
    size_range: tuple[int, int | None]
    """(min, max) height and width the dynamic program accepts; max None when unbounded."""
    bad_inputs: dict[str, tuple[str, str, str]]
    """{bad input: what eager, the dynamic program and its CheckedProgram did}, each as expected."""


def export_and_compare(name: str, save_to: Path, *, save_dynamic: bool = False) -> ZooResult:
    """Build one detector, export it three ways, compare each program with eager.

    Exports: static and ``Dim.AUTO`` dynamic (non-strict), and dynamic strict. The range comes
    from the dynamic program (:func:`size_range`); the strict one must derive the same. Parity
    (:func:`casebook.detection_parity.exact_differences`, with the model record's tolerances): the
    dynamic program on the three :func:`parity_images`, the static one on the example, the strict
    one on the last image. Where no image gives zero detections, the model
    with a score threshold of 1.0 (no score exceeds it) is exported statically and compared on the
    example: every output must come back empty, with its shape. Then the eight bad inputs of
    :mod:`casebook.models.detector_inputs`, three ways each. The static program is saved to
    ``save_to`` as ``<name>.static.pt2``, and with ``save_dynamic`` the dynamic one as
    ``<name>.dynamic.pt2``.
    """
    model = build_detector(name)
    example = example_image(name)
    tolerances = record(name).tolerances  # outputs a patch computes with other arithmetic
    static = export_detector(name, model, example, dynamic=False, strict=False)
    dynamic = export_detector(name, model, example, dynamic=True, strict=False)
    strict = export_detector(name, model, example, dynamic=True, strict=True)
    low, high = size_range(dynamic.program)["H"]
    assert size_range(dynamic.program)["W"] == (low, high), f"{name}: height and width ranges differ"
    assert size_range(strict.program)["H"] == (low, high), f"{name}: strict export derived another range"

    images = parity_images(name, low, high)
    dynamic_module = dynamic.program.module()
    detections, reordered, cut, worst, expected = [], 0, 0, {}, []
    for _, image in images:
        expected.append(eager(model, image))
        differences = exact_differences(expected[-1], dynamic_module([image])[0], tolerances)
        reordered += differences.pop("reordered ties")
        cut += differences.pop("tied at the cut")
        for key, value in differences.items():
            worst[key] = max(worst.get(key, 0.0), value)
        detections.append(len(expected[-1]["scores"]))
    exact_differences(
        expected[1], static.program.module()([example])[0], tolerances
    )  # images[1] is the example
    exact_differences(expected[2], strict.program.module()([images[2][1]])[0], tolerances)

    if 0 in detections:
        empty = f"image {detections.index(0) + 1}"
    else:
        owner = _score_threshold_owner(model)
        owner.score_thresh = 1.0
        nothing_kept = export_detector(name, model, example, dynamic=False, strict=False).program
        empty_expected = eager(model, example)
        empty_actual = nothing_kept.module()([example])[0]
        exact_differences(empty_expected, empty_actual, tolerances)
        assert all(value.shape[0] == 0 for value in empty_actual.values()), f"{name}: not empty"
        empty = "threshold 1.0"

    refused = bad_input_outcomes(name, model, dynamic.program, low)
    torch.export.save(static.program, str(Path(save_to) / f"{name}.static.pt2"))
    if save_dynamic:
        torch.export.save(dynamic.program, str(Path(save_to) / f"{name}.dynamic.pt2"))
    row = {
        "static (s)": round(static.seconds, 1),
        "dynamic (s)": round(dynamic.seconds, 1),
        "strict (s)": round(strict.seconds, 1),
        "H and W": f"{low} to {high if high else '∞'}",
        "detections per image": "/".join(map(str, detections)),
        "no detections": empty,
        "max |diff|": ", ".join(f"{key} {value:.0e}" for key, value in worst.items() if value),
        "equal scores: reordered, cut": f"{reordered}, {cut}",
    }
    return ZooResult(row, (low, high), refused)


def start_export_process() -> None:
    """Initializer of the processes that run :func:`export_and_compare` two at a time on two cores:
    one thread each, so they do not compete for the cores, and the notebook's known noise hidden."""
    torch.set_num_threads(1)
    hide_noise()
