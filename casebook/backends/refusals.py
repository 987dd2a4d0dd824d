"""What each deploy route does with inputs the program was not exported for: ran, differed or refused.

:func:`image_cases` makes the bad inputs a service meets (wrong dtype, wrong rank, batch sizes
below, at and above the exported range, a wrong fixed size, a non-contiguous and a channels-last
tensor) from an image batch. :func:`probe` runs each case through one route's artifact in a worker
process: a route that checks nothing may read memory it was never given and kill the process, so a
crash is recorded for that case and the next case runs in a new worker. :func:`outcome` compares
what ran with eager PyTorch on the same input (:func:`run_here`); :func:`table` lays them out.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils import _pytree as pytree

from .. import REPO_ROOT
from ._refusal_worker import CASE_MARKER
from .aoti_cpp import CppRun, run_cpp
from .registry import BACKENDS
from .routes import ROUTES as CPU_BACKENDS

IN_PROCESS_LOADERS = tuple(BACKENDS[name].route for name in CPU_BACKENDS if BACKENDS[name].load is not None)
"""The routes :func:`probe` loads in a Python worker (``_refusal_worker.load``): every CPU backend of
the registry that loads in Python."""

CPP_ROUTE = BACKENDS["aoti_cpp"].route  # run with the book's run_aoti, one process per case
ROUTES = (*IN_PROCESS_LOADERS, CPP_ROUTE)
if set(ROUTES) != {BACKENDS[name].route for name in CPU_BACKENDS}:
    raise ValueError(
        "a CPU backend of the registry runs another's artifact in a process of its own, and "
        "refusals.probe has no way to run it: add one next to the C++ route's"
    )


def refusal_columns() -> dict[str, tuple[str, bool]]:
    """The refusal table's columns, in the registry's order: one per CPU route, or one per way its
    runtime can be run with respect to input checks ("AOTInductor (Python), checks on"), each the
    route and whether ``probe`` turns the checks on."""
    found = {}
    for name in CPU_BACKENDS:
        backend = BACKENDS[name]
        for mode, checks in (backend.check_inputs_modes or {"": False}).items():
            found[f"{backend.route}, {mode}" if mode else backend.route] = (backend.route, checks)
    return found


# A runtime's own log line on stderr: ExecuTorch's "[method.cpp:1206] Input 0 has unexpected ...".
_RUNTIME_LOG = re.compile(r"^\[[\w.]+\.cpp:\d+\] (?P<message>.+)$")


def image_cases(example: torch.Tensor, *, batch: tuple[int, int]) -> list[tuple[str, torch.Tensor]]:
    """Named inputs like ``example`` (N, C, H, W), for a program exported with a batch in ``batch``.

    The values are random but seeded, so every route gets the same tensors.
    """
    if not isinstance(example, torch.Tensor) or example.dim() != 4 or not example.is_floating_point():
        got = tuple(example.shape) if isinstance(example, torch.Tensor) else type(example).__name__
        raise ValueError(f"image_cases needs a floating-point (N, C, H, W) example, got {got}")
    low, high = batch
    if not (isinstance(low, int) and isinstance(high, int) and 1 <= low <= high):
        raise ValueError(f"batch must be (min, max) whole numbers with 1 <= min <= max, got {batch!r}")
    _, channels, height, width = example.shape
    generator = torch.Generator().manual_seed(0)

    def images(n: int, h: int = height) -> torch.Tensor:
        return torch.rand(n, channels, h, width, generator=generator, dtype=example.dtype)

    usual = min(max(low, 2), high)  # a batch inside the range, other than 1 where the range allows
    inside = images(usual)
    cases = [
        (f"batch {usual}: inside the range", inside),
        (f"batch {low}: the range's minimum", images(low)),
        (f"batch {high}: the range's maximum", images(high)),
        (f"batch {high + 1}: above the range", images(high + 1)),
        (f"batch {low - 1}: below the range", images(low - 1)),
        (f"height {height + 8}: not the exported {height}", images(usual, height + 8)),
        ("float64, a NumPy array's default", inside.double()),
        ("uint8, a decoded image not yet scaled", (inside * 255).to(torch.uint8)),
        ("3 dimensions: no batch dimension", inside[0]),
        ("not contiguous: a transposed view", transposed_view(inside)),
        ("channels-last memory layout", inside.contiguous(memory_format=torch.channels_last)),
    ]
    return cases


def transposed_view(images: torch.Tensor) -> torch.Tensor:
    """The same values and shape with other strides: a view that swaps H and W back."""
    return images.transpose(-1, -2).contiguous().transpose(-1, -2)


@dataclass(frozen=True)
class Raw:
    """What one case did on a route: its outputs when it ran, else the error's first line or the crash."""

    outputs: list[torch.Tensor] | None = None
    error: str = ""
    log: str = ""  # the runtime's first log line for the case, if it wrote one


def run_here(
    fn: Callable[..., object], cases: Sequence[tuple[str, torch.Tensor | tuple[tuple, dict]]]
) -> list[Raw]:
    """``fn`` on each case in this process: eager PyTorch (the reference), or a checking wrapper.

    Only for callables that cannot crash the process on a bad input; the routes go through
    :func:`probe`.
    """
    results = []
    for _, value in cases:
        args, kwargs = _as_call(value)
        try:
            with torch.no_grad():
                results.append(Raw([t.detach() for t in pytree.tree_leaves(fn(*args, **kwargs))]))
        except (RuntimeError, ValueError, TypeError) as error:  # refusing the input is a result
            results.append(Raw(error=_first_line(error)))
    return results


def table(cases: Sequence[tuple[str, torch.Tensor]], eager: list[Raw], columns: dict[str, list[Raw]]):
    """One row per case, one column per route: each cell an :class:`Outcome` against ``eager``."""
    import pandas as pd

    rows = {"eager": ["ran" if raw.outputs is not None else "refused" for raw in eager]}
    for name, raws in columns.items():
        if len(raws) != len(cases):
            raise ValueError(f"{name}: {len(raws)} results for {len(cases)} cases")
        rows[name] = [outcome(raw, reference) for raw, reference in zip(raws, eager, strict=True)]
    return pd.DataFrame(rows, index=[name for name, _ in cases])


def probe(
    route: str,
    artifact: str | os.PathLike[str],
    cases: Sequence[tuple[str, torch.Tensor | tuple[tuple, dict]]],
    *,
    check_inputs: bool = False,
    timeout_s: float = 300,
) -> list[Raw]:
    """Every case through ``route``'s ``artifact``, in worker processes; a crash is a result.

    Each case is (name, input): one tensor, or ``(args, kwargs)`` for a program of several inputs.
    ``route`` is one of :data:`ROUTES`. ``check_inputs`` sets ``AOTI_RUNTIME_CHECK_INPUTS`` for the
    worker (only AOTInductor reads it). The C++ route runs the book's ``run_aoti``, one process per
    case, on one thread; the Python workers run on one thread too.
    """
    if route not in ROUTES:
        raise ValueError(f"unknown route {route!r}: use one of {list(ROUTES)}")
    if not Path(artifact).is_file():
        raise FileNotFoundError(f"no {route} artifact at {artifact}: build it first (routes.build_routes)")
    calls = [(name, *_as_call(value)) for name, value in cases]
    if route == CPP_ROUTE:
        runs = [
            run_cpp(artifact, (args, kwargs), check_inputs=check_inputs, threads=1, timeout_s=timeout_s)
            for _, args, kwargs in calls
        ]
        return [Raw(list(run.outputs)) if run.ok else Raw(error=_cpp_error(run)) for run in runs]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    env["AOTI_RUNTIME_CHECK_INPUTS"] = "1" if check_inputs else "0"
    results: dict[int, Raw] = {}
    with tempfile.TemporaryDirectory(prefix="refusals-") as folder:
        out = Path(folder)
        torch.save(calls, out / "cases.pt")
        start = 0
        while start < len(cases):
            command = [sys.executable, "-m", "casebook.backends._refusal_worker", route, str(artifact)]
            command += [str(out / "cases.pt"), folder, str(start)]
            completed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout_s)
            logs = _logs_by_case(completed.stderr)
            for index in range(start, len(cases)):
                if (out / f"{index}.json").is_file():
                    results[index] = _read(out, index, logs.get(index, ""))
            if completed.returncode == 0:
                break
            if not (out / "started").is_file():
                raise RuntimeError(
                    f"the {route} worker failed before its first case (exit code {completed.returncode}):\n"
                    + completed.stderr[-2000:]
                )
            crashed = int((out / "started").read_text())
            results[crashed] = Raw(error=_crash(completed.returncode), log=logs.get(crashed, ""))
            (out / "started").unlink()
            start = crashed + 1
    return [results[index] for index in range(len(cases))]


def _as_call(value: torch.Tensor | tuple[tuple, dict]) -> tuple[tuple, dict]:
    if isinstance(value, torch.Tensor):
        return (value,), {}
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], tuple)
        and isinstance(value[1], dict)
    ):
        return value
    raise TypeError(f"a case's input must be a tensor or (args, kwargs), got {type(value).__name__}")


def _logs_by_case(stderr: str) -> dict[int, str]:
    """The first runtime log line written after each case's marker (cpuinfo's lines left out)."""
    logs: dict[int, str] = {}
    case = None
    for line in stderr.splitlines():
        if line.startswith(CASE_MARKER):
            case = int(line.removeprefix(CASE_MARKER))
        elif case is not None and case not in logs and (match := _RUNTIME_LOG.match(line)):
            if not line.startswith("[cpuinfo"):
                logs[case] = match["message"]
    return logs


def _read(folder: Path, index: int, log: str) -> Raw:
    result = json.loads((folder / f"{index}.json").read_text())
    if result["ran"]:
        return Raw(outputs=torch.load(folder / f"{index}.pt"), log=log)
    return Raw(error=result["error"], log=log)


def _crash(returncode: int) -> str:
    if returncode < 0:
        return f"crashed: {signal.Signals(-returncode).name}"
    return f"crashed: exit code {returncode}"


def _cpp_error(run: CppRun) -> str:
    if run.returncode < 0:
        return _crash(run.returncode)
    first = (run.error.splitlines() or [""])[0]
    return first.removeprefix("run_aoti: ").removeprefix("the model refused the inputs: ")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


@dataclass(frozen=True)
class Outcome:
    """One cell: ``matched``, ``differed``, ``ran, eager refused``, ``refused`` or ``crashed``, and why."""

    kind: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail else self.kind


def outcome(raw: Raw, eager: Raw, *, relative_tolerance: float = 1e-4) -> Outcome:
    """``raw`` against eager's result on the same input; differences relative to eager's largest output."""
    if raw.outputs is None:
        kind = "crashed" if raw.error.startswith("crashed: ") else "refused"
        return Outcome(kind, raw.error.removeprefix("crashed: "))
    if eager.outputs is None:
        return Outcome("ran, eager refused")
    got, want = [tuple(t.shape) for t in raw.outputs], [tuple(t.shape) for t in eager.outputs]
    if got != want:
        return Outcome("differed", f"shapes {got}, eager's {want}")
    filled = [(a, b) for a, b in zip(raw.outputs, eager.outputs, strict=True) if b.numel()]
    if not filled:
        return Outcome("matched")
    scale = max(b.abs().max().item() for _, b in filled) or 1.0
    worst = max((a.double() - b.double()).abs().max().item() for a, b in filled)
    if worst <= relative_tolerance * scale:
        return Outcome("matched")
    return Outcome("differed", f"{worst / scale:.1e} of the largest output")
