"""One exported program down every CPU route of the Shipping part, each loaded back and callable here.

:func:`build_routes` writes each route's artifact from the same ``ExportedProgram``, times the build and
the load, and reads from the artifact what ties it to a version or a machine. Every route's ``run``
returns the outputs as a flat list of tensors, so the routes can be checked against eager and timed
in one process on the same inputs. The C++ route runs in its own process: :func:`cpp_latency`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .aoti_cpp import run_cpp
from .executorch_xnnpack import runtime_threads
from .registry import BACKENDS, flat


@dataclass
class Route:
    """One way to ship the program: its artifact, what building and loading it cost, what it needs."""

    name: str
    run: Callable[..., list[torch.Tensor]] | None  # None: runs in another process
    artifact: Path | None = None
    build_seconds: float | None = None
    load_seconds: float | None = None
    needs: str = ""
    tied_to: str = ""

    @property
    def size_mib(self) -> float | None:
        return self.artifact.stat().st_size / 2**20 if self.artifact else None


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


ROUTES = tuple(name for name, backend in BACKENDS.items() if "cpu" in backend.devices)
"""The backends of the registry that run on the CPU, in its order, which the page compares them in."""


def build_routes(
    model: torch.nn.Module, program: torch.export.ExportedProgram, folder: str | Path, *, threads: int
) -> dict[str, Route]:
    """Write, load and describe every route for ``program`` (exported from ``model``) in ``folder``.

    Each route is a backend of :mod:`casebook.backends.registry`: its ``write`` makes the artifact
    from the program, its ``load`` makes it callable here, and its record says what the machine needs
    and what the file is tied to. ``threads`` is given to ONNX Runtime; PyTorch's count is the
    caller's (``torch.set_num_threads``), and ExecuTorch's pool is sized from the machine's cores:
    the three must agree, or the comparison would not be one.
    """
    if not isinstance(program, torch.export.ExportedProgram):
        raise TypeError(f"build_routes takes a torch.export.ExportedProgram, got {type(program).__name__}")
    counts = {"threads": threads, "PyTorch": torch.get_num_threads(), "ExecuTorch": runtime_threads()}
    if len(set(counts.values())) != 1:
        raise ValueError(
            f"thread counts differ ({counts}): call torch.set_num_threads(runtime_threads()) and pass "
            "threads=runtime_threads(), so every route runs on the same number of threads"
        )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    routes = {"eager": Route("eager", flat(model), needs="Python, torch and the model's own source code")}
    routes["eager"].tied_to = "the model's code and its dependencies"
    built: dict[str, tuple[Path, float, Any]] = {}  # backend -> (artifact, build seconds, loaded)
    cpu, settings = torch.device("cpu"), {"threads": threads}
    for name in ROUTES:
        backend = BACKENDS[name]
        if backend.runs_artifact_of:  # another backend's artifact, run in another process
            artifact, seconds, loaded = built[backend.runs_artifact_of]
            routes[backend.route] = Route(
                backend.route, None, artifact, seconds, None, backend.needs, backend.tied_to(artifact, loaded)
            )
            continue
        artifact = folder / f"program{backend.suffix}"
        _, seconds = _timed(backend.write, program, artifact, None, settings)
        loaded, load_seconds = _timed(backend.load, artifact, cpu, settings)
        built[name] = (artifact, seconds, loaded)
        routes[backend.route] = Route(
            backend.route,
            flat(loaded),
            artifact,
            seconds,
            load_seconds,
            needs=backend.needs,
            tied_to=backend.tied_to(artifact, loaded),
        )
    return routes


@dataclass(frozen=True)
class CppLatency:
    """``run_aoti``'s own timings: load, first run, median and minimum of ``repeat`` more runs (ms)."""

    load_ms: float
    first_run_ms: float
    median_ms: float
    min_ms: float
    outputs: tuple[torch.Tensor, ...]


def cpp_latency(
    package: Path, inputs: Sequence[torch.Tensor], *, threads: int, repeat: int = 20
) -> CppLatency:
    """Run the package with the book's C++ program on ``inputs``; raise with its message if it fails."""
    if not isinstance(repeat, int) or repeat < 1:
        raise ValueError(
            f"repeat must be at least 1 to time the runs after the first, got {repeat!r}; "
            "for outputs alone use casebook.backends.aoti_cpp.run_cpp"
        )
    run = run_cpp(package, list(inputs), threads=threads, repeat=repeat)
    if not run.ok:
        raise RuntimeError(f"run_aoti failed on {Path(package).name}: {run.error}")
    timings = run.timings_ms
    return CppLatency(timings["load"], timings["run"], timings["median"], timings["min"], run.outputs)
