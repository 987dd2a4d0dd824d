"""One exported program down every CPU route of the Shipping part, each loaded back and callable here.

:func:`build_routes` writes each route's artifact from the same ``ExportedProgram``, times the build and
the load, and reads from the artifact what ties it to a version or a machine. Every route's ``run``
returns the outputs as a flat list of tensors, so the routes can be checked against eager and timed
in one process on the same inputs. The C++ route runs in its own process: :func:`cpp_latency`.
"""

from __future__ import annotations

import importlib.metadata
import json
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import torch
from torch.utils import _pytree as pytree

from .aoti_cpp import run_cpp
from .executorch_xnnpack import ExecuTorchProgram, lower_to_xnnpack, runtime_threads
from .onnx_runtime import OnnxRuntimeProgram, opsets


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


def flat(fn: Callable[..., Any]) -> Callable[..., list[torch.Tensor]]:
    """``fn`` returning its outputs' tensors as one list, in pytree order."""

    def run(*args: torch.Tensor) -> list[torch.Tensor]:
        return pytree.tree_leaves(fn(*args))

    return run


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def build_routes(
    model: torch.nn.Module, program: torch.export.ExportedProgram, folder: str | Path, *, threads: int
) -> dict[str, Route]:
    """Write, load and describe every route for ``program`` (exported from ``model``) in ``folder``.

    ``threads`` is given to ONNX Runtime; PyTorch's count is the caller's (``torch.set_num_threads``),
    and ExecuTorch's pool is sized from the machine's cores: the three must agree, or the comparison
    would not be one.
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

    exported = folder / "program.pt2"
    _, seconds = _timed(lambda: torch.export.save(program, exported))
    loaded, load_seconds = _timed(lambda: torch.export.load(exported).module())
    routes["ExportedProgram"] = Route(
        "ExportedProgram",
        flat(loaded),
        exported,
        seconds,
        load_seconds,
        needs="Python and torch; not the model's source (custom operators: their library)",
        tied_to=f"export schema {_schema_version(exported)}: a newer torch loads it",
    )

    package = folder / "program_aoti.pt2"
    with torch.no_grad():  # Inductor freezes, if asked to, only with gradients off
        _, seconds = _timed(
            lambda: torch._inductor.aoti_compile_and_package(program, package_path=str(package))
        )
    compiled, load_seconds = _timed(lambda: torch._inductor.aoti_load_package(str(package)))
    metadata = compiled.get_metadata()
    tied = (
        f"torch {torch.__version__.split('+')[0]}, {metadata['AOTI_MACHINE']} with {metadata['AOTI_CPU_ISA']}"
    )
    routes["AOTInductor (Python)"] = Route(
        "AOTInductor (Python)",
        flat(compiled),
        package,
        seconds,
        load_seconds,
        needs="Python and torch, the version that compiled it",
        tied_to=tied,
    )
    routes["AOTInductor (C++)"] = Route(
        "AOTInductor (C++)",
        None,  # another process: see cpp_latency
        package,
        seconds,
        None,
        needs="libtorch's shared libraries (no Python), the version that compiled it",
        tied_to=tied,
    )

    pte = folder / "program.pte"
    lowering, seconds = _timed(lambda: lower_to_xnnpack(program))
    lowering.save(pte)
    on_executorch, load_seconds = _timed(lambda: ExecuTorchProgram(pte))
    routes["ExecuTorch + XNNPACK"] = Route(
        "ExecuTorch + XNNPACK",
        flat(on_executorch),
        pte,
        seconds,
        load_seconds,
        needs="the ExecuTorch runtime built with the XNNPACK delegate (C++, no libtorch)",
        tied_to=f"file format {pte.read_bytes()[4:8].decode()}, read by executorch {importlib.metadata.version('executorch')}",
    )

    onnx_file = folder / "program.onnx"
    _, seconds = _timed(lambda: torch.onnx.export(program, dynamo=True, verbose=False).save(str(onnx_file)))
    session, load_seconds = _timed(lambda: OnnxRuntimeProgram(onnx_file, threads=threads))
    ir_version = onnx.load(str(onnx_file), load_external_data=False).ir_version
    routes["ONNX Runtime"] = Route(
        "ONNX Runtime",
        flat(session),
        onnx_file,
        seconds,
        load_seconds,
        needs="ONNX Runtime (C, C++, Python, Java, C# bindings; no libtorch)",
        tied_to=f"opset {opsets(onnx_file)['ai.onnx']}, IR version {ir_version}: a runtime that supports both",
    )
    return routes


def _schema_version(archive: Path) -> str:
    """The serialization schema version ``torch.export.save`` wrote into the archive's model.json."""
    with zipfile.ZipFile(archive) as contents:
        names = [n for n in contents.namelist() if n.endswith("models/model.json")]
        if not names:
            raise ValueError(f"{archive.name} has no models/model.json: not written by torch.export.save")
        version = json.loads(contents.read(names[0]))["schema_version"]
    return f"{version['major']}.{version['minor']}"


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
