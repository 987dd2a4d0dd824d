"""How much of an exported program TensorRT could take, measured by Torch-TensorRT itself.

`coverage_report` runs ``torch_tensorrt.dynamo.compile(..., dryrun=True)``: Torch-TensorRT lowers the
graph, checks every node against its converter registry, partitions the graph into TensorRT blocks
and Torch fallback blocks exactly as a real compile would, and stops before building any engine.
The numbers are therefore Torch-TensorRT's own, not a re-implementation of its rules.

The dry run happens in a subprocess (`casebook.backends.tensorrt._dryrun_worker`) because on a
machine without a GPU `import torch_tensorrt` fails: it needs TensorRT's libnvinfer and asks CUDA
about the device. There the worker installs clearly labelled stand-ins (a ``tensorrt`` module with
names but no behaviour, and answers for two CUDA queries) before importing it, and
`CoverageReport.analysis` says so. The stand-ins never reach the notebook's own process. On a machine
where TensorRT and CUDA work, nothing is stood in and ``analysis == "tensorrt"``. Setting that up
(importing torch, torchvision and torch_tensorrt) costs about eight CPU seconds, more than the dry run
of a small program, so the first dry run of a process starts a server that pays it once
(`_dryrun_worker.serve`), and every later one runs in a child forked from it: a fresh process in all
that matters (no earlier dry run's imports or registrations), for the cost of a fork. A dry run that
comes while another is under way gets a fresh worker of its own.

The worker loads the *saved* program, so a program whose inputs or outputs are custom pytree classes
(detectron2-style ``Instances``) loads there only once those classes are registered in the worker
too: name the function that registers them in ``pytree_registrations``. Loaded, such a program
still has to get through Torch-TensorRT: its constant-folding pass rebuilds the outputs from
placeholder objects, so an output class whose constructor checks its fields (``Boxes``,
``Instances``) makes the compile raise (`TensorRTCompileError`), a dry run as much as a real one.

What a stand-in run cannot tell you: whether TensorRT would then build each engine (a converter can
still reject a node's arguments while building, which Torch-TensorRT reports then, not in a dry run).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils import _pytree as pytree

from ... import REPO_ROOT

WORKER_MODULE = "casebook.backends.tensorrt._dryrun_worker"
# A guard against a hung worker, not a performance goal. The book executes two pages at a time, and
# the detection zoo's fourteen-program dry run took over 600 s beside another page on the 2-core
# CI machine (2026-11-25), so the guard allows half an hour.
DRY_RUN_TIMEOUT_S = 1800
# Op namespaces whose Python package must be imported before `torch.export.load` can resolve them.
_NAMESPACE_MODULES = {"torchvision": "torchvision"}
_DEFAULTS: dict[str, Any] = {"min_block_size": 5, "torch_executed_ops": (), "require_full_compilation": False}


class CoverageAnalysisError(RuntimeError):
    """The dry run could not be carried out (worker crashed, timed out, or could not import).

    When the worker reported what went wrong (``result``: the phase, the exception and its message), the
    message says it and the worker's traceback and log stay in `stderr_tail`, out of the message: a
    reader needs the error and its cause, not the worker's log. When it reported nothing (it crashed or
    ran out of time), that tail is the only evidence, and the message ends with it.
    """

    def __init__(self, message: str, *, stderr_tail: str = "", result: dict[str, Any] | None = None):
        self.stderr_tail = stderr_tail
        self.result = result or {}
        if stderr_tail and result:
            message += f"\n(the worker's traceback and log: the exception's `stderr_tail`, {len(stderr_tail.splitlines())} lines)"
        elif stderr_tail:
            message += f"\n--- worker stderr (tail) ---\n{stderr_tail}"
        super().__init__(message)


class TorchTensorRTNotInstalledError(CoverageAnalysisError):
    """torch_tensorrt is missing from this environment."""


class TensorRTCompileError(CoverageAnalysisError):
    """``torch_tensorrt.dynamo.compile`` itself raised during the dry run.

    This is Torch-TensorRT refusing the graph, not the analysis failing: for example
    ``require_full_compilation=True`` on a graph with an unsupported op makes its partitioner raise
    ``AssertionError("require_full_compilation=True was specified, but model is not fully
    supported")``. The original exception cannot cross the process boundary, so its type name and
    message are kept in `original_type` and `original_message`, and `str()` starts with both.
    """

    def __init__(self, original_type: str, original_message: str, *, where: str = "", **kwargs: Any):
        self.original_type = original_type
        self.original_message = original_message
        super().__init__(
            f"torch_tensorrt.dynamo.compile raised {original_type}: {original_message}{where}", **kwargs
        )


@dataclass(frozen=True)
class PartitionBlock:
    """One block of the partitioned graph: a TensorRT engine or a block left to run in Torch.

    ``name`` is the submodule Torch-TensorRT's fast partitioner made of it: ``_run_on_acc_N`` for a
    TensorRT block, ``_run_on_gpu_N`` for a Torch one. ``op_count`` is Torch-TensorRT's operator count
    for an engine and the number of ``nodes`` for a Torch block, whose ``nodes`` are the names of its
    nodes in the graph Torch-TensorRT partitioned (``getitem`` excluded), such as ``nms``.
    """

    kind: str  # "tensorrt" or "torch"
    name: str
    op_count: int
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class CoverageReport:
    """Torch-TensorRT's dry-run verdict on one exported program, with the settings it was run with.

    Counts are Torch-TensorRT's: ``call_function`` nodes (``operator.getitem`` included) of the
    graph it sees after its own lowering (decompositions, constant folding), so they differ from a
    count over ``ep.graph``. ``unsupported_ops`` are the ops with no converter or forced to Torch by
    ``torch_executed_ops``; supported ops in blocks smaller than ``min_block_size`` also run in Torch
    and appear only in ``to_run_in_torch`` (the dry run's node list) and ``trt_block_sizes``.

    ``blocks`` are the TensorRT and Torch blocks in graph order, or None where the partition has no
    Torch blocks to order (the global partitioner, which leaves Torch nodes inline, or no supported
    op); ``torch_node_names`` are the names of the nodes left to Torch, in graph order.
    """

    analysis: str
    total_ops: int
    supported_ops: int
    coverage: float
    unsupported_ops: dict[str, int]
    torch_executed_ops: tuple[str, ...]
    trt_engine_count: int
    trt_block_sizes: list[int]
    torch_block_count: int | None
    min_block_size: int
    suggested_min_block_size: int | None
    text: str = field(repr=False)
    supported_op_counts: dict[str, int] = field(default_factory=dict, repr=False)
    to_run_in_torch: tuple[str, ...] = field(default=(), repr=False)
    stand_ins: tuple[str, ...] = field(default=(), repr=False)
    versions: dict[str, str] = field(default_factory=dict)
    blocks: tuple[PartitionBlock, ...] | None = field(default=None, repr=False)
    torch_node_names: tuple[str, ...] = field(default=(), repr=False)

    @property
    def fully_convertible(self) -> bool:
        """Every op has a converter and the partition is a single TensorRT engine."""
        return (
            not self.unsupported_ops and self.supported_ops == self.total_ops and self.trt_engine_count == 1
        )

    def to_frame(self):
        """One row per op, ops TensorRT cannot take first: how many nodes use it, and its support.

        ``support`` is "converter" (TensorRT has one; the node still runs in Torch if its block is
        under ``min_block_size``), "no converter", or "torch_executed_ops" (forced to Torch).
        """
        import pandas as pd

        forced = set(self.torch_executed_ops)
        rows = [(op, n, "converter") for op, n in self.supported_op_counts.items()]
        rows += [
            (op, n, "torch_executed_ops" if op in forced else "no converter")
            for op, n in self.unsupported_ops.items()
        ]
        frame = pd.DataFrame(rows, columns=["op", "nodes", "support"])
        frame["_order"] = frame["support"].map({"no converter": 0, "torch_executed_ops": 1, "converter": 2})
        frame = frame.sort_values(["_order", "nodes", "op"], ascending=[True, False, True])
        return frame.drop(columns="_order").reset_index(drop=True)

    table = to_frame

    def summary(self) -> dict[str, Any]:
        """The headline numbers as a flat dict (one row of a comparison table)."""
        return {
            "analysis": self.analysis,
            "ops": self.total_ops,
            "supported": self.supported_ops,
            "coverage": round(self.coverage, 4),
            "TensorRT engines": self.trt_engine_count,
            "ops per engine": self.trt_block_sizes,
            "Torch blocks": self.torch_block_count,
            "min_block_size": self.min_block_size,
        }

    def __str__(self) -> str:
        unsupported = ", ".join(f"{op} x{n}" for op, n in self.unsupported_ops.items()) or "none"
        return (
            f"TensorRT coverage ({self.analysis}): {self.supported_ops}/{self.total_ops} ops "
            f"({self.coverage:.1%}), {self.trt_engine_count} engine(s) {self.trt_block_sizes}, "
            f"unsupported: {unsupported}"
        )


def _op_name(op: Any) -> str:
    """The key torch_tensorrt matches ``torch_executed_ops`` against: ``torch.ops.aten.relu.default``."""
    if isinstance(op, str):
        return op
    if isinstance(op, torch._ops.OpOverloadPacket):
        raise TypeError(f"torch_executed_ops needs an overload such as {op}.default, not the packet {op}")
    from torch.fx.node import _get_qualified_name

    return _get_qualified_name(op)


def _modules_for(program: torch.export.ExportedProgram, extra: Iterable[str]) -> list[str]:
    names = list(extra)
    for node in program.graph.nodes:
        ns = getattr(node.target, "namespace", None)
        if ns in _NAMESPACE_MODULES and _NAMESPACE_MODULES[ns] not in names:
            names.append(_NAMESPACE_MODULES[ns])
    return names


def _custom_pytree_types(program: torch.export.ExportedProgram) -> list[str]:
    """Serialized names of the pytree node types in the program's input and output specs that a
    fresh process does not know: every type registered outside torch and the standard library."""
    found: list[str] = []
    pending = [spec for spec in (program.call_spec.in_spec, program.call_spec.out_spec) if spec is not None]
    while pending:
        spec = pending.pop()
        pending.extend(spec.children())
        node_def = pytree.SUPPORTED_SERIALIZED_TYPES.get(spec.type)
        module = getattr(spec.type, "__module__", "") or ""
        if node_def is None or module == "builtins" or module.split(".")[0] in {"torch", "collections"}:
            continue
        if node_def.serialized_type_name not in found:
            found.append(node_def.serialized_type_name)
    return sorted(found)


def _registration_name(registration: str | Callable[[], Any]) -> str:
    """``"package.module:function"`` for a registration function, checked to resolve to a callable.

    The worker is a fresh process: it can only call a function it can import by name, so a lambda,
    a nested function or one defined in a notebook (module ``__main__``) is refused here.
    """
    if callable(registration):
        name = f"{getattr(registration, '__module__', None)}:{getattr(registration, '__qualname__', '<unnamed>')}"
    elif isinstance(registration, str):
        name = registration
    else:
        raise TypeError(
            f"pytree_registrations and before_load entries are functions or 'package.module:function' strings, not {registration!r}"
        )
    module_name, colon, qualname = name.partition(":")
    # "<" marks a lambda or a nested function ("f.<locals>.g"); "__main__" is this process's script.
    if not colon or module_name in ("", "None", "__main__") or not qualname or "<" in qualname:
        raise ValueError(
            f"registration {name!r} cannot be imported by name in the worker process: pass a "
            "module-level function of an importable module, or 'package.module:function' "
            "(e.g. 'casebook.models.stand_ins:register_pytree_nodes')"
        )
    try:
        resolved: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(
            f"registration {name!r}: module {module_name!r} does not import here ({exc}); the worker "
            "imports it with the repository and $PYTHONPATH on its path, so name a module found there"
        ) from exc
    for part in qualname.split("."):
        if not hasattr(resolved, part):
            raise ValueError(
                f"registration {name!r}: module {module_name!r} has no attribute {qualname!r}; "
                "name a function that registers what the program needs (pytree node types, fake kernels)"
            )
        resolved = getattr(resolved, part)
    if not callable(resolved) or (callable(registration) and resolved is not registration):
        raise ValueError(
            f"registration {name!r} does not resolve to the function given (or to a callable): "
            "pass a module-level function, or its 'package.module:function' name"
        )
    return name


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def coverage_report(
    exported_program: torch.export.ExportedProgram,
    example_inputs: Sequence[Any] | torch.Tensor,
    *,
    min_block_size: int = 5,
    torch_executed_ops: Collection[Any] = (),
    require_full_compilation: bool = False,
    timeout_s: float = DRY_RUN_TIMEOUT_S,
    import_modules: Sequence[str] = (),
    pytree_registrations: Sequence[str | Callable[[], Any]] = (),
    before_load: Sequence[str | Callable[[], Any]] = (),
) -> CoverageReport:
    """Run Torch-TensorRT's dry run on ``exported_program`` in a subprocess and report its partition.

    ``min_block_size``, ``torch_executed_ops`` and ``require_full_compilation`` are passed to
    ``torch_tensorrt.dynamo.compile`` unchanged. ``torch_executed_ops`` takes OpOverloads
    (``torch.ops.aten.relu.default``) or their names (``"torch.ops.aten.relu.default"``); names in
    any other form are ignored by Torch-TensorRT, so a warning lists those that matched no node.
    ``import_modules`` are imported by the worker before loading the program, for custom ops
    (torchvision's are detected automatically). ``pytree_registrations`` are functions the worker
    calls before loading the program, to register the custom pytree classes of its inputs and
    outputs there too: module-level functions, or their names as ``"package.module:function"``
    (e.g. ``casebook.models.stand_ins.register_pytree_nodes``). ``before_load`` takes functions of
    the same form that the worker also calls before loading, for anything else the program needs
    registered there, such as the fake kernels of its custom operators: Torch-TensorRT traces the
    program again, so a dry run needs them as much as `torch.export` did.

    Raises `TensorRTCompileError` if Torch-TensorRT itself raises (e.g. ``require_full_compilation``
    on a graph with an unsupported op), `TorchTensorRTNotInstalledError` if it is not installed, and
    `CoverageAnalysisError` if the worker fails otherwise.
    """
    variant = {
        "min_block_size": min_block_size,
        "torch_executed_ops": torch_executed_ops,
        "require_full_compilation": require_full_compilation,
    }
    (report,) = _reports(
        [(exported_program, example_inputs, variant)],
        timeout_s,
        import_modules,
        (*pytree_registrations, *before_load),
        stacklevel=3,
    )
    return report


def coverage_reports(
    exported_program: torch.export.ExportedProgram,
    example_inputs: Sequence[Any] | torch.Tensor,
    variants: Sequence[Mapping[str, Any]],
    *,
    timeout_s: float = DRY_RUN_TIMEOUT_S,
    import_modules: Sequence[str] = (),
    pytree_registrations: Sequence[str | Callable[[], Any]] = (),
    before_load: Sequence[str | Callable[[], Any]] = (),
) -> list[CoverageReport]:
    """`coverage_report` for several settings at once, sharing one worker process.

    Each variant is a dict of `coverage_report`'s settings (``min_block_size``,
    ``torch_executed_ops``, ``require_full_compilation``; missing keys take its defaults). Starting
    the worker costs a fork once the process's dry-run server is set up (the first dry run of a
    process, about ten seconds), the dry run of a ResNet about one; one worker also loads each
    program once for all its settings.
    If any variant makes Torch-TensorRT raise, `TensorRTCompileError` is raised for the first one.
    """
    return _reports(
        [(exported_program, example_inputs, variant) for variant in variants],
        timeout_s,
        import_modules,
        (*pytree_registrations, *before_load),
        stacklevel=3,
    )


def coverage_reports_by_program(
    programs: Mapping[
        str, tuple[torch.export.ExportedProgram | str | os.PathLike, Sequence[Any] | torch.Tensor]
    ],
    *,
    min_block_size: int = 5,
    torch_executed_ops: Collection[Any] = (),
    require_full_compilation: bool = False,
    timeout_s: float = DRY_RUN_TIMEOUT_S,
    import_modules: Sequence[str] = (),
    pytree_registrations: Sequence[str | Callable[[], Any]] = (),
    before_load: Sequence[str | Callable[[], Any]] = (),
) -> dict[str, CoverageReport]:
    """`coverage_report` for several programs, one setting, in one worker process: {name: report}.

    ``programs`` maps a name to ``(exported_program, example_inputs)``; a program may also be the
    path of a file written by ``torch.export.save``, which the worker then loads as it is. The worker starts once (about
    ten seconds), so a dozen programs cost that once, not a dozen times. ``timeout_s`` covers them
    all. If Torch-TensorRT raises on one, `TensorRTCompileError` is raised for the first such
    program, named in its message. `start_coverage_reports_by_program` does the same without waiting.
    """
    return start_coverage_reports_by_program(
        programs,
        min_block_size=min_block_size,
        torch_executed_ops=torch_executed_ops,
        require_full_compilation=require_full_compilation,
        timeout_s=timeout_s,
        import_modules=import_modules,
        pytree_registrations=pytree_registrations,
        before_load=before_load,
    )._collect(stacklevel=4)


def start_coverage_reports_by_program(
    programs: Mapping[
        str, tuple[torch.export.ExportedProgram | str | os.PathLike, Sequence[Any] | torch.Tensor]
    ],
    *,
    min_block_size: int = 5,
    torch_executed_ops: Collection[Any] = (),
    require_full_compilation: bool = False,
    timeout_s: float = DRY_RUN_TIMEOUT_S,
    import_modules: Sequence[str] = (),
    pytree_registrations: Sequence[str | Callable[[], Any]] = (),
    before_load: Sequence[str | Callable[[], Any]] = (),
) -> PendingCoverageReports:
    """`coverage_reports_by_program`, started and not waited for: the worker runs in its own process.

    The programs are saved before this returns, so they may be deleted or changed afterwards.
    ``.result()`` waits for the worker and returns ``{name: report}`` (or raises what
    `coverage_reports_by_program` raises); ``timeout_s`` counts from the start. On a machine with two
    cores, the dry run then takes the other core while this process goes on with its own work.
    """
    if not programs:
        raise ValueError("coverage_reports_by_program needs at least one program, got an empty mapping")
    variant = {
        "min_block_size": min_block_size,
        "torch_executed_ops": torch_executed_ops,
        "require_full_compilation": require_full_compilation,
    }
    run = _start_reports(
        [(program, inputs, variant) for program, inputs in programs.values()],
        timeout_s,
        import_modules,
        (*pytree_registrations, *before_load),
        labels=list(programs),
    )
    return PendingCoverageReports(run, list(programs))


class PendingCoverageReports:
    """A Torch-TensorRT dry run under way in its worker process (`start_coverage_reports_by_program`).

    A run that is never collected is stopped, and its files removed, when this object is deleted.
    """

    def __init__(self, run: _WorkerRun, names: Sequence[str]):
        self._run = run
        self._names = list(names)

    def done(self) -> bool:
        """Whether the worker has finished (successfully or not); `result` then returns at once."""
        return self._run.process.poll() is not None

    def result(self) -> dict[str, CoverageReport]:
        """Wait for the worker; {name: report}, or the error the dry run ended with."""
        return self._collect(stacklevel=4)

    def _collect(self, stacklevel: int) -> dict[str, CoverageReport]:
        return dict(zip(self._names, self._run.reports(stacklevel=stacklevel), strict=True))


def _reports(
    jobs: Sequence[tuple[torch.export.ExportedProgram, Sequence[Any] | torch.Tensor, Mapping[str, Any]]],
    timeout_s: float,
    import_modules: Sequence[str],
    pytree_registrations: Sequence[str | Callable[[], Any]],
    stacklevel: int,
) -> list[CoverageReport]:
    """Dry-run each (program, example inputs, settings) job in one worker and wait for it."""
    run = _start_reports(jobs, timeout_s, import_modules, pytree_registrations)
    return run.reports(stacklevel=stacklevel + 1)


def _start_reports(
    jobs: Sequence[tuple[torch.export.ExportedProgram, Sequence[Any] | torch.Tensor, Mapping[str, Any]]],
    timeout_s: float,
    import_modules: Sequence[str],
    pytree_registrations: Sequence[str | Callable[[], Any]],
    labels: Sequence[str] | None = None,
) -> _WorkerRun:
    """Save each (program, example inputs, settings) job for one worker and start it; a program
    shared by several jobs is saved once."""
    if importlib.util.find_spec("torch_tensorrt") is None:
        raise TorchTensorRTNotInstalledError(
            "torch_tensorrt is not installed in this environment. Run `make build` (it installs "
            "torch-tensorrt, analysis-only on a machine without a GPU) and use the .venv it creates."
        )
    unknown = {key for _, _, variant in jobs for key in variant} - set(_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown coverage_report settings: {sorted(unknown)}")
    programs: list[tuple[torch.export.ExportedProgram | Path, tuple[Any, ...]]] = []
    program_index: list[int] = []
    for program, inputs, _ in jobs:
        if isinstance(program, str | os.PathLike):
            program = Path(program)
            if not program.is_file():
                raise FileNotFoundError(
                    f"no saved program at {program}: pass an ExportedProgram or the path of a file "
                    "written by torch.export.save"
                )
        known = next((i for i, (p, _) in enumerate(programs) if p is program or p == program), None)
        if known is None:
            programs.append((program, (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)))
            known = len(programs) - 1
        program_index.append(known)
    variants = [{**_DEFAULTS, **variant} for _, _, variant in jobs]
    modules = list(import_modules)
    for program, _ in programs:
        if isinstance(program, Path):  # not loaded here: import every package whose operators we know
            modules += [module for module in _NAMESPACE_MODULES.values() if module not in modules]
        else:
            modules = _modules_for(program, modules)
    request = {
        "import_modules": modules,
        "pytree_registrations": [_registration_name(r) for r in pytree_registrations],
        "variants": [
            {
                "program": index,
                "min_block_size": int(v["min_block_size"]),
                "torch_executed_ops": sorted({_op_name(op) for op in v["torch_executed_ops"]}),
                "require_full_compilation": bool(v["require_full_compilation"]),
            }
            for index, v in zip(program_index, variants, strict=True)
        ],
    }
    return _WorkerRun(programs, request, timeout_s, labels)


class _WorkerRun:
    """One dry-run worker process, started on saved programs; `reports` waits for it and reads its result."""

    def __init__(
        self,
        programs: Sequence[tuple[torch.export.ExportedProgram | Path, tuple[Any, ...]]],
        request: dict[str, Any],
        timeout_s: float,
        labels: Sequence[str] | None,
    ):
        # What a failed load would need, worked out now: the run does not keep the programs alive.
        self.needed_pytree_types = sorted(
            {
                name
                for program, _ in programs
                if not isinstance(program, Path)
                for name in _custom_pytree_types(program)
            }
        )
        self.request = request
        self.labels = labels
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.tmp = tempfile.TemporaryDirectory(prefix="casebook-trt-dryrun-")
        tmp_dir = Path(self.tmp.name)
        for index, (program, example_inputs) in enumerate(programs):
            if isinstance(program, Path):
                shutil.copyfile(program, tmp_dir / f"program_{index}.pt2")
            else:
                torch.export.save(program, str(tmp_dir / f"program_{index}.pt2"))
            torch.save(example_inputs, tmp_dir / f"inputs_{index}.pt")
        (tmp_dir / "request.json").write_text(json.dumps(request))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self.stderr_path = tmp_dir / "worker.stderr"
        self.process = _start_worker(tmp_dir, env, self.stderr_path)
        # Deleted before it is collected: stop the worker, then remove its files.
        weakref.finalize(self, _stop_worker, self.process, self.tmp)

    def _wait(self) -> tuple[dict[str, Any], str]:
        """The worker's result and stderr, once it has exited."""
        try:
            self.process.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise CoverageAnalysisError(
                f"the Torch-TensorRT dry run did not finish within {self.timeout_s} s",
                stderr_tail=_tail(self.stderr_path.read_text(errors="replace")),
            ) from None
        stderr = self.stderr_path.read_text(errors="replace")
        result_path = Path(self.tmp.name) / "result.json"
        if self.process.returncode != 0 or not result_path.exists():
            raise CoverageAnalysisError(
                f"the dry-run worker exited with status {self.process.returncode} without a result",
                stderr_tail=_tail(stderr),
            )
        return json.loads(result_path.read_text()), stderr

    def reports(self, stacklevel: int) -> list[CoverageReport]:
        """Wait for the worker; one report per job, or the error the dry run ended with."""
        try:
            result, stderr = self._wait()
        finally:
            self.tmp.cleanup()

        if not result["ok"]:
            cause = _cause_in_log(stderr)
            raise CoverageAnalysisError(
                f"the dry run failed while in phase {result.get('phase')!r}: "
                f"{result['error_type']}: {result['message']}"
                + (
                    f"\ncause, from the worker's log: {cause}"
                    if cause and cause not in result["message"]
                    else ""
                )
                + _load_hint(result, self.needed_pytree_types, self.request["pytree_registrations"]),
                stderr_tail=_tail(result.get("traceback", "") + "\n" + stderr),
                result=result,
            )
        reports = []
        for index, (variant, run) in enumerate(zip(self.request["variants"], result["runs"], strict=True)):
            if not run["ok"]:
                settings = {key: value for key, value in variant.items() if key != "program"}
                if self.labels is not None:
                    where = f" (program {self.labels[index]!r})"
                else:
                    where = f" (variant {index}: {settings})" if len(self.request["variants"]) > 1 else ""
                raise TensorRTCompileError(
                    run["error_type"],
                    run["message"],
                    where=where,
                    stderr_tail=_tail(run["traceback"]),
                    result=run,
                )
            if run["unmatched_torch_executed_ops"]:
                warnings.warn(
                    "torch_executed_ops entries matched no node of the lowered graph and had no effect: "
                    f"{run['unmatched_torch_executed_ops']} (expected names like 'torch.ops.aten.relu.default')",
                    stacklevel=stacklevel,
                )
            sizes = [block["op_count"] for block in run["trt_blocks"]]
            total = run["total_ops"]
            reports.append(
                CoverageReport(
                    analysis=result["analysis"],
                    total_ops=total,
                    supported_ops=run["supported_ops"],
                    coverage=run["supported_ops"] / total if total else 1.0,
                    unsupported_ops=run["unsupported_ops"],
                    torch_executed_ops=tuple(run["torch_executed_ops"]),
                    trt_engine_count=run["trt_engine_count"],
                    trt_block_sizes=sizes,
                    torch_block_count=run["torch_block_count"],
                    min_block_size=variant["min_block_size"],
                    # The dry run's "minimal graph segmentation" recommendation: the largest block's size.
                    suggested_min_block_size=max(sizes) if sizes else None,
                    text=run["text"],
                    supported_op_counts=run["supported_op_counts"],
                    to_run_in_torch=tuple(run["to_run_in_torch"]),
                    stand_ins=tuple(result["stand_ins"]),
                    versions=result["versions"],
                    blocks=None
                    if run["blocks"] is None
                    else tuple(
                        PartitionBlock(b["kind"], b["name"], b["op_count"], tuple(b["nodes"]))
                        for b in run["blocks"]
                    ),
                    torch_node_names=tuple(run["torch_node_names"]),
                )
            )
        return reports


class _ServedRun:
    """A dry run in a child of the shared dry-run server (`_dryrun_worker.serve`), with the part of
    `subprocess.Popen`'s interface that `_WorkerRun` uses: `poll`, `wait`, `kill`, `returncode`."""

    def __init__(self, server: _DryRunServer, pid: int):
        self._server, self.pid, self.returncode = server, pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(timeout_s=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._read(timeout_s=timeout):
            raise subprocess.TimeoutExpired("dry run", timeout)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile: `done` is on its way
                os.kill(self.pid, signal.SIGKILL)

    def _read(self, timeout_s: float | None) -> bool:
        line = self._server.read_line(timeout_s)
        if line is None:
            return False
        if not line.startswith("done "):  # the server died: report it as this worker ending
            self._server.broken = True
            self.returncode = -signal.SIGKILL
        else:
            self.returncode = int(line.split()[1])
        self._server.busy = False
        return True


class _DryRunServer:
    """`_dryrun_worker.serve`, started once per process and environment: a dry run costs a fork
    instead of a fresh Python that imports torch and Torch-TensorRT (about eight CPU seconds).

    One dry run at a time; `_start_worker` starts a fresh worker for a dry run that comes while
    another is under way, or when the server could not start.
    """

    def __init__(self, env: Mapping[str, str]):
        self.env = _relevant_env(env)
        self.owner = os.getpid()
        self.busy = self.broken = False
        self._buffer = b""
        self.process = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(env),
        )
        ready = self.read_line(SERVER_START_TIMEOUT_S)
        if ready != "ready":
            self.broken = True
            self.close()

    def serves(self, env: Mapping[str, str]) -> bool:
        return (
            not self.broken
            and self.owner == os.getpid()  # a forked child must not share its parent's pipes
            and self.process.poll() is None
            and self.env == _relevant_env(env)
        )

    def start(self, request_dir: Path) -> _ServedRun | None:
        """Send one request; None if the server no longer answers."""
        try:
            self.process.stdin.write(f"{request_dir}\n".encode())
            self.process.stdin.flush()
        except OSError:
            self.broken = True
            return None
        line = self.read_line(SERVER_START_TIMEOUT_S)
        if line is None or not line.startswith("started "):
            self.broken = True
            return None
        self.busy = True
        return _ServedRun(self, int(line.split()[1]))

    def read_line(self, timeout_s: float | None) -> str | None:
        """The server's next line, or None when it has none within ``timeout_s`` (or has exited)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:  # exited
                self.broken = True
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()  # the server exits when its input ends
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# Started on the first dry run that needs it, kept for the next; closed when the process exits.
_SERVER: dict[str, _DryRunServer] = {}
_SERVER_LOCK = threading.Lock()
# The environment in which the server last failed to start: fresh workers only, there.
_SERVER_FAILED: dict[str, dict[str, str]] = {}
# The server imports torch and Torch-TensorRT before it answers: far less than this on a busy machine.
SERVER_START_TIMEOUT_S = 300
# pytest sets it anew for each test; it names the test, it changes no dry run or engine build.
_IRRELEVANT_ENV = frozenset({"PYTEST_CURRENT_TEST"})


def _relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key not in _IRRELEVANT_ENV}


def _start_worker(tmp_dir: Path, env: Mapping[str, str], stderr_path: Path):
    """The dry run of the request in ``tmp_dir``, started: in a child of this process's dry-run server
    when it is free, else in a fresh worker process (`subprocess.Popen`)."""
    # There before the worker starts, as for a fresh worker: a run stopped before its child opened
    # the file still has a (then empty) log to read.
    stderr_path.touch()
    with _SERVER_LOCK:
        run = _start_served(tmp_dir, env)
    if run is not None:
        return run
    with open(stderr_path, "w") as stderr:  # a file, not a pipe: a full pipe would block the worker
        return subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, str(tmp_dir)],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
            env=dict(env),
        )


def _start_served(tmp_dir: Path, env: Mapping[str, str]) -> _ServedRun | None:
    """The request started in the dry-run server (started or replaced as needed), or None: the server
    is busy with another dry run, could not start, or belongs to the process this one was forked from."""
    server = _SERVER.get("server")
    if server is not None and server.owner != os.getpid():
        return None  # its pipes are the parent's
    if server is not None and not server.busy and not server.serves(env):
        server.close()
        del _SERVER["server"]
        server = None
    if server is None:
        if _SERVER_FAILED.get("env") == _relevant_env(env):
            return None  # it failed to start in this environment: do not pay for that each time
        server = _DryRunServer(env)
        if server.broken:
            _SERVER_FAILED["env"] = _relevant_env(env)
            return None
        _SERVER["server"] = server
    if server.busy:
        return None
    return server.start(tmp_dir)


@atexit.register
def _close_server() -> None:
    server = _SERVER.pop("server", None)
    if server is not None:
        server.close()


def _stop_worker(process: subprocess.Popen, tmp: tempfile.TemporaryDirectory) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()
    tmp.cleanup()


# A line of a log record ("W1128 17:33:44.811000 923 path.py:403] text") and an exception's last line in it.
_LOG_PREFIX = re.compile(r"^[WIEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ +\d+ \S+\] ?")
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): \S")


def _cause_in_log(stderr: str) -> str | None:
    """The last exception line ("NotImplementedError: ... is not registered") in the worker's stderr.

    `torch.export.load` logs the error that stopped it as a warning, with its traceback, and raises
    "We ran into an error when deserializing the saved file. Please check the warnings above": the
    cause is only in the log.
    """
    found = None
    for line in stderr.splitlines():
        text = _LOG_PREFIX.sub("", line)
        if _EXCEPTION_LINE.match(text):
            found = text.strip()
    return found


def _load_hint(result: Mapping[str, Any], needed_types: Sequence[str], registrations: Sequence[str]) -> str:
    """What to pass when the worker could not load a program for want of its custom pytree types."""
    if result.get("phase") != "load":
        return ""
    missing = sorted(set(needed_types) - set(result.get("pytree_types", ())))
    if not missing:
        return ""
    ran = f" The registrations it ran, {list(registrations)}, did not register them." if registrations else ""
    return (
        "\nThe program's inputs/outputs use pytree node types that this process registered but the "
        f"dry-run worker, a fresh process, did not: {missing}.{ran} Pass the function that registers "
        "them as coverage_report(..., pytree_registrations=['package.module:function']); for casebook's "
        "Boxes and Instances that is 'casebook.models.stand_ins:register_pytree_nodes'."
    )
