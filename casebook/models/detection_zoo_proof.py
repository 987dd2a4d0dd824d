"""The detection zoo page's proof for one builder: three exports, parity with eager, bad inputs.

:func:`export_and_compare` is what the page runs for every builder, two builders at a time in
processes of their own (:func:`start_proofs` starts them all at once, :func:`start_export_process`
sets each process up), so everything it returns is plain data and the programs go to disk.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..detection_parity import exact_differences
from ..noise import hide_noise
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
from .random_weights import check_detector_name
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
    """The builder's row of the page's table: each export's CPU seconds, range, what parity compared."""
    size_range: tuple[int, int | None]
    """(min, max) height and width the dynamic program accepts; max None when unbounded."""
    bad_inputs: dict[str, tuple[str, str, str]]
    """{bad input: what eager, the dynamic program and its CheckedProgram did}, each as expected."""
    export_wall_seconds: float
    """The three exports' wall-clock seconds, together (the row has their CPU seconds)."""


def export_and_compare(
    name: str, save_to: Path, *, save_static: bool = False, save_dynamic: bool = False
) -> ZooResult:
    """Build one detector, export it three ways, compare each program with eager.

    Exports: static and ``Dim.AUTO`` dynamic (non-strict), and dynamic strict. The range comes
    from the dynamic program (:func:`size_range`); the strict one must derive the same. Parity
    (:func:`casebook.detection_parity.exact_differences`, with the model record's tolerances): the
    dynamic program on the three :func:`parity_images`, the static one on the example, the strict
    one on the last image. Where no image gives zero detections, the model
    with a score threshold of 1.0 (no score exceeds it) is exported statically and compared on the
    example: every output must come back empty, with its shape. Then the eight bad inputs of
    :mod:`casebook.models.detector_inputs`, three ways each. With ``save_static`` the static
    program is saved to ``save_to`` as ``<name>.static.pt2``, and with ``save_dynamic`` the dynamic
    one as ``<name>.dynamic.pt2``.
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
    if save_static:
        torch.export.save(static.program, str(Path(save_to) / f"{name}.static.pt2"))
    if save_dynamic:
        torch.export.save(dynamic.program, str(Path(save_to) / f"{name}.dynamic.pt2"))
    row = {
        "static (CPU s)": round(static.cpu_seconds, 1),
        "dynamic (CPU s)": round(dynamic.cpu_seconds, 1),
        "strict (CPU s)": round(strict.cpu_seconds, 1),
        "H and W": f"{low} to {high if high else '∞'}",
        "detections per image": "/".join(map(str, detections)),
        "no detections": empty,
        "max |diff|": ", ".join(f"{key} {value:.0e}" for key, value in worst.items() if value),
        "equal scores: reordered, cut": f"{reordered}, {cut}",
    }
    wall = static.seconds + dynamic.seconds + strict.seconds
    return ZooResult(row, (low, high), refused, wall)


def start_export_process() -> None:
    """Initializer of the processes that run :func:`export_and_compare` two at a time on two cores:
    one thread each, so they do not compete for the cores, and the notebook's known noise hidden."""
    torch.set_num_threads(1)
    hide_noise()


class ProofPool:
    """Builders' proofs running in worker processes, collected by name (see :func:`start_proofs`)."""

    def __init__(self, pool: ProcessPoolExecutor, queued: dict[str, Future]):
        self._pool, self._queued = pool, queued
        self.results: dict[str, ZooResult] = {}

    def wait(self, *names: str) -> None:
        """Wait for these builders' proofs; print a line as each one is done, and the seconds waited.

        A proof that failed raises its exception here."""
        missing = [name for name in names if name not in self._queued]
        if not names or missing:
            raise ValueError(
                f"wait for builders that were started: got {list(names) or 'none'}; "
                f"started: {', '.join(self._queued)}"
            )
        start = time.perf_counter()
        running = {self._queued[name]: name for name in names}
        for future in as_completed(running):
            self.results[running[future]] = future.result()
            print(
                f"[{len(self.results):2}/{len(self._queued)}] {running[future]}: exported and compared",
                flush=True,
            )
        print(f"{len(names)} builder(s) in {time.perf_counter() - start:.0f} s")

    def close(self) -> None:
        """Stop the worker processes (after :meth:`wait`; proofs not yet done are cancelled)."""
        self._pool.shutdown(cancel_futures=True)


def start_proofs(
    names: Iterable[str],
    save_to: Path,
    *,
    save_dynamic: Iterable[str] = (),
    jobs: int = 2,
    prove: Callable[..., Any] = export_and_compare,
) -> ProofPool:
    """Start ``prove(name, save_to, save_dynamic=...)`` (:func:`export_and_compare`) for every builder
    at once, ``jobs`` processes at a time, in the order given, and return without waiting.

    A process that finishes takes the next builder, so both cores stay busy while the page waits for
    a long one; :meth:`ProofPool.wait` collects them by name. Each process has one thread, so the CPU
    seconds it reports for an export are one core's, however many processes share the cores.
    """
    names, save_dynamic = list(names), set(save_dynamic)
    if not names:
        raise ValueError("start_proofs needs at least one builder name, e.g. ['fcos_resnet50_fpn']")
    for name in names:
        check_detector_name(name)
    if len(set(names)) != len(names):
        raise ValueError(f"each builder once: {sorted({n for n in names if names.count(n) > 1})} repeat")
    if not save_dynamic <= set(names):
        raise ValueError(
            f"save_dynamic names builders that are not started: {sorted(save_dynamic - set(names))}"
        )
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    pool = ProcessPoolExecutor(
        jobs, mp_context=multiprocessing.get_context("spawn"), initializer=start_export_process
    )
    queued = {name: pool.submit(prove, name, save_to, save_dynamic=name in save_dynamic) for name in names}
    return ProofPool(pool, queued)
