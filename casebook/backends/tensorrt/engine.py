"""Real TensorRT engines from an ExportedProgram, built on a machine without a GPU: `build_engines`.

`build_engines` runs ``torch_tensorrt.dynamo.compile`` for real, in a subprocess
(`casebook.backends.tensorrt._build_worker`, kept for the next call), and reports every block of the
partition: for each TensorRT block, whether its engine was built (the engine file, its size, the
build's seconds, the engine's layers from TensorRT's build log) or failed (the converter's or the
builder's exception, as type and message), the optimization profile of its inputs (min/opt/max) and
the ops it holds; for each PyTorch block, the ops left to PyTorch; and the build's peak memory.

On a machine without a GPU this takes Torch-TensorRT for RTX (``make install`` installs it there,
``TENSORRT=rtx``): TensorRT for RTX builds engines on the CPU, and a few steps of Torch-TensorRT that
need a GPU are stood in (`casebook.backends.tensorrt.stand_ins` names each and says why). It installs the
same ``torch_tensorrt`` package as the torch-tensorrt the dry runs use, so it lives in a folder of its
own (`rtx_site`, ``.venv/tensorrt-rtx``) that only the build worker puts first on its path. The engines are
real; they cannot be run here. Running one needs an RTX GPU: latency and parity of an engine are not
measured on such a machine.

A plain ``dynamo.compile`` stops at the first block whose build fails. ``keep_going=True`` (the
default here) records that block as failed, leaves it to PyTorch and builds the next ones, so one
call shows every failure; ``keep_going=False`` raises `EngineCompileError` on the first, as a
reader's own call would.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import importlib.util
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ... import REPO_ROOT
from ...build_records import record_engine_build
from ...catalog import classify
from ...env import TENSORRT_RTX_ENV, tensorrt_rtx_site, tensorrt_rtx_versions
from ..cache import cache_key, default_cache_dir
from .coverage import _modules_for, _op_name, _registration_name, _relevant_env, _tail

WORKER_MODULE = "casebook.backends.tensorrt._build_worker"
# A TensorRT builder error in a build log: "IBuilder::buildSerializedNetwork: Error Code 4: Internal Error (...)".
_BUILDER_ERROR = re.compile(r"Error Code \d+: ")
# How Torch-TensorRT names the node a converter failed on.
_WHILE_EXECUTING = re.compile(r"While executing %(?P<node>\w+) : .*?target=(?P<target>[\w.]+)")
RTX_DISTRIBUTION = "torch-tensorrt-rtx"
# Exception types a block's failure is rebuilt as (`Block.as_exception`); any other becomes RuntimeError.
_BUILTIN_ERRORS = {
    kind.__name__: kind for kind in (RuntimeError, AssertionError, NotImplementedError, ValueError, TypeError)
}
_REMOVED_SETTINGS = {
    "enabled_precisions": "precision comes from the model's dtypes (export a .half() model) or from "
    "enable_autocast=True with autocast_low_precision_type=torch.float16",
    "use_explicit_typing": "networks are always strongly typed: precision follows the model's dtypes",
    "dryrun": "a dry run builds nothing: use casebook.backends.tensorrt.coverage.coverage_report",
}
_INSTALL_HINT = (
    "Install Torch-TensorRT for RTX with `make install TENSORRT=rtx` (the default on a machine without "
    f"a GPU) and use the .venv it creates, or point ${TENSORRT_RTX_ENV} at a folder holding it; on a machine "
    "with a CUDA GPU, `make install TENSORRT=full` installs enterprise TensorRT instead."
)


class EngineBuildError(RuntimeError):
    """The build could not be carried out: Torch-TensorRT missing or broken, the worker crashed or
    ran out of time. Not a refusal of the graph (that is `EngineCompileError`)."""

    def __init__(self, message: str, *, stderr_tail: str = ""):
        self.stderr_tail = stderr_tail
        super().__init__(message + (f"\n--- worker stderr (tail) ---\n{stderr_tail}" if stderr_tail else ""))


class TensorRTForRTXMissingError(EngineBuildError):
    """No Torch-TensorRT that can build engines here (none installed, or the GPU-only one)."""


class EngineCompileError(RuntimeError):
    """``torch_tensorrt.dynamo.compile`` raised: Torch-TensorRT or TensorRT refused the graph.

    The exception cannot cross the process boundary, so its type name and message are kept in
    `original_type` and `original_message` (``str()`` starts with both), `traceback` is the worker's
    formatted traceback of it, and `build` holds the blocks recorded before it was raised (the failed
    block last, when a block's build raised).
    """

    def __init__(self, original_type: str, original_message: str, build: EngineBuild, traceback: str = ""):
        self.original_type = original_type
        self.original_message = original_message
        self.build = build
        self.traceback = traceback
        super().__init__(f"torch_tensorrt.dynamo.compile raised {original_type}: {original_message}")


@dataclass(frozen=True)
class Profile:
    """One input's optimization profile: the engine accepts shapes from ``min`` to ``max`` and is tuned
    for ``opt``. Becomes ``torch_tensorrt.Input(min_shape=..., opt_shape=..., max_shape=...)``."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        shapes = {"min": self.min, "opt": self.opt, "max": self.max}
        if len({len(s) for s in shapes.values()}) != 1:
            raise ValueError(f"min, opt and max must have the same rank, got {shapes}")
        for i, (low, opt, high) in enumerate(zip(self.min, self.opt, self.max, strict=True)):
            if not 0 <= low <= opt <= high:
                raise ValueError(
                    f"dimension {i} needs 0 <= min <= opt <= max, got min={low}, opt={opt}, max={high}; "
                    "order the three shapes from smallest to largest"
                )
        if not isinstance(self.dtype, torch.dtype):
            raise TypeError(f"dtype must be a torch.dtype such as torch.float16, got {self.dtype!r}")


@dataclass(frozen=True)
class InputProfile:
    """The profile Torch-TensorRT gave one input of one engine (static inputs: min = opt = max)."""

    name: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]
    dtype: str

    @property
    def static(self) -> bool:
        return self.min == self.opt == self.max

    def __str__(self) -> str:
        if self.static:
            return f"{self.name} {list(self.min)}"
        return f"{self.name} min {list(self.min)} opt {list(self.opt)} max {list(self.max)}"


@dataclass(frozen=True)
class Layer:
    """One layer of a built engine, as TensorRT's build log lists it: after TensorRT's fusions, so a
    layer is often several of the graph's ops (a convolution with its activation, say)."""

    name: str
    type: str
    output_dtypes: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    """One block of the partition, in graph order: a TensorRT block (built or failed) or a PyTorch one."""

    kind: str  # "tensorrt" or "torch"
    name: str
    ops: dict[str, int]
    status: str  # "built", "failed" or "pytorch"
    profile: tuple[InputProfile, ...] = ()
    engine_path: Path | None = None
    engine_bytes: int | None = None
    seconds: float | None = None
    error_type: str | None = None
    error_message: str | None = field(default=None, repr=False)
    layers: tuple[Layer, ...] = field(default=(), repr=False)
    build_log: Path | None = field(default=None, repr=False)

    @property
    def op_count(self) -> int:
        return sum(self.ops.values())

    def layer_dtypes(self) -> dict[str, int]:
        """How many of the engine's layers output each data type ("Float", "Half", "BFloat16", ...)."""
        counts: dict[str, int] = {}
        for layer in self.layers:
            for dtype in layer.output_dtypes:
                counts[dtype] = counts.get(dtype, 0) + 1
        return dict(sorted(counts.items(), key=lambda item: -item[1]))

    @property
    def error(self) -> str:
        """``"Type: first line of the message"``, or "" for a block that did not fail."""
        if self.status != "failed":
            return ""
        first = (self.error_message or "").strip().splitlines()
        return f"{self.error_type}: {first[0] if first else ''}"

    @property
    def failing_node(self) -> tuple[str, str] | None:
        """The node a converter failed on, ``(node name, operator)``, from Torch-TensorRT's "While executing
        %node : ... target=op" line; None when the message names none (a builder failure)."""
        match = _WHILE_EXECUTING.search(self.error_message or "")
        return (match["node"], match["target"].removeprefix("torch.ops.")) if match else None

    def as_exception(self) -> BaseException | None:
        """The block's failure as an exception, for `casebook.catalog.classify`: its type when builtin (else
        RuntimeError), its message followed by TensorRT's builder errors. None for a block that did not fail."""
        if self.status != "failed":
            return None
        kind = _BUILTIN_ERRORS.get(self.error_type or "", RuntimeError)
        return kind("\n".join([self.error_message or "", *self.builder_errors()]).strip())

    def builder_errors(self) -> list[str]:
        """TensorRT's own error lines from this block's build log (``... Error Code N: ...``).

        When the builder refuses a network, Torch-TensorRT raises only "build_serialized_network returned
        None"; the reason is in the log.
        """
        if self.build_log is None:
            return []
        return [
            line.strip()
            for line in self.build_log.read_text(errors="replace").splitlines()
            if _BUILDER_ERROR.search(line)
        ]


@dataclass(frozen=True)
class EngineBuild:
    """What one real ``dynamo.compile`` built, block by block."""

    blocks: tuple[Block, ...]
    versions: dict[str, str]
    stand_ins: tuple[str, ...]
    settings: dict[str, str]
    seconds: float
    peak_rss_mb: float
    engine_dir: Path
    module_path: Path | None = None
    # torch_tensorrt.save per output format asked for: {"ok": True, "path", "bytes"} or
    # {"ok": False, "error_type", "message"}
    saved: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    # "run", or "reused" when the worker's previous build had decomposed the same program with the
    # same table ("" when the compile stopped before that step)
    decompositions: str = ""
    decomposition_seconds: float | None = None  # that step's time (taking the kept program: ~0)
    # "loaded", or "reused" when the worker's previous build had loaded the same saved program
    program_load: str = ""
    # CPU time the build used, all threads: the worker's (with its start-up, on a worker's first build)
    # and this process's saving of the program. What a build takes from other work on a busy machine.
    cpu_seconds: float | None = None

    @property
    def engines(self) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.status == "built")

    @property
    def failed(self) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.status == "failed")

    @property
    def torch_blocks(self) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.kind == "torch")

    @property
    def engine_bytes(self) -> int:
        return sum(b.engine_bytes or 0 for b in self.engines)

    @property
    def ops_in_engines(self) -> float:
        """The share of the partitioned graph's ops that are in built engines (a failed block's ops run
        in PyTorch)."""
        total = sum(b.op_count for b in self.blocks)
        return sum(b.op_count for b in self.engines) / total if total else 0.0

    def ops_in_pytorch(self) -> Counter[str]:
        """How many of each operator run in PyTorch (the PyTorch blocks and the failed blocks), by short
        name: 'torch.ops.torchvision.nms.default' counts as 'nms', '_operator.getitem' as 'getitem'."""
        counts: Counter[str] = Counter()
        for block in self.blocks:
            if block.status != "built":
                for op, count in block.ops.items():
                    parts = op.split(".")
                    counts[parts[-2] if op.startswith("torch.ops.") else parts[-1]] += count
        return counts

    def refusals(self) -> dict[str, int]:
        """How many failed blocks each catalog entry explains, by entry id (`casebook.catalog`);
        "not in the catalog" counts the others."""
        counts: dict[str, int] = {}
        for block in self.failed:
            entry = classify(block.as_exception(), "tensorrt-build")
            key = entry.id if entry is not None else "not in the catalog"
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))

    def to_frame(self):
        """One row per block, in graph order."""
        import pandas as pd

        rows = []
        for block in self.blocks:
            rows.append(
                {
                    "block": block.name,
                    "runs in": "TensorRT" if block.status == "built" else "PyTorch",
                    "status": block.status,
                    "ops": block.op_count,
                    "engine MB": round(block.engine_bytes / 1e6, 2) if block.engine_bytes else None,
                    "build s": round(block.seconds, 1) if block.seconds is not None else None,
                    "input profile": "; ".join(str(p) for p in block.profile),
                    "what": block.error or _op_summary(block.ops),
                }
            )
        return pd.DataFrame(rows).set_index("block")

    def against_dry_run(self, dry_run):
        """Each TensorRT block of this build beside what the dry run (`trt_coverage.coverage_report`)
        said of it: a styled frame that shows each refusal's whole first line."""
        import pandas as pd

        promised = {block.name for block in dry_run.blocks if block.kind == "tensorrt"}
        frame = pd.DataFrame(
            {
                "block": block.name,
                "ops": block.op_count,
                "dry run": "engine" if block.name in promised else "not a block",
                "build": f"engine, {block.engine_bytes / 1e6:.1f} MB"
                if block.status == "built"
                else block.error,
                "failed at": block.failing_node[1] if block.failing_node else "",
            }
            for block in self.blocks
            if block.kind == "tensorrt"
        ).set_index("block")
        return frame.style.set_properties(**{"text-align": "left", "white-space": "normal"})

    def summary(self) -> str:
        trt = [b for b in self.blocks if b.kind == "tensorrt"]
        return (
            f"{len(self.engines)} of {len(trt)} TensorRT blocks built "
            f"({self.engine_bytes / 1e6:.1f} MB of engines), {len(self.failed)} failed, "
            f"{len(self.torch_blocks)} PyTorch blocks; compile {self.seconds:.1f} s"
            f"{' (decompositions reused)' if self.decompositions == 'reused' else ''}, "
            f"peak memory {self.peak_rss_mb / 1024:.2f} GB"
        )

    def __str__(self) -> str:
        lines = [self.summary()]
        for block in self.blocks:
            if block.status == "built":
                what = f"engine {block.engine_bytes / 1e6:.1f} MB in {block.seconds:.1f} s"
            elif block.status == "failed":
                what = f"FAILED {block.error}"
            else:
                what = _op_summary(block.ops)
            lines.append(f"  {block.name:16} {block.op_count:4d} ops  {what}")
        return "\n".join(lines)


def _op_summary(ops: Mapping[str, int], limit: int = 4) -> str:
    names = [
        f"{name.removeprefix('torch.ops.').removesuffix('.default')}" + (f" x{n}" if n > 1 else "")
        for name, n in sorted(ops.items(), key=lambda item: -item[1])
    ]
    return ", ".join(names[:limit]) + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def rtx_site() -> Path:
    """The folder holding Torch-TensorRT for RTX (see `casebook.env.tensorrt_rtx_site`)."""
    return tensorrt_rtx_site()


def installed_distribution() -> str | None:
    """The Torch-TensorRT that builds engines here: ``"torch-tensorrt-rtx 2.14.0"`` from `rtx_site`,
    or on a machine with a GPU the environment's ``"torch-tensorrt 2.14.0"``; None if there is none."""
    rtx = tensorrt_rtx_versions().get(RTX_DISTRIBUTION)
    if rtx is not None:
        return f"{RTX_DISTRIBUTION} {rtx}"
    if torch.cuda.is_available():
        try:
            return f"torch-tensorrt {importlib.metadata.version('torch-tensorrt')}"
        except importlib.metadata.PackageNotFoundError:
            return None
    return None


def worker_path() -> list[str]:
    """What a build worker puts first on its path: `rtx_site` when the build takes Torch-TensorRT for RTX."""
    distribution = installed_distribution()
    return [str(rtx_site())] if distribution and distribution.startswith(RTX_DISTRIBUTION + " ") else []


def _check_install() -> None:
    distribution = installed_distribution()
    if distribution is None:
        raise TensorRTForRTXMissingError(
            f"no Torch-TensorRT that builds engines here: Torch-TensorRT for RTX is not in {rtx_site()} "
            f"and this machine has no CUDA GPU. {_INSTALL_HINT}"
        )


def _check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    for name, hint in _REMOVED_SETTINGS.items():
        if name in settings:
            raise TypeError(f"{name!r} is not a build setting here: {hint}")
    checked = dict(settings)
    if "torch_executed_ops" in checked:
        checked["torch_executed_ops"] = sorted({_op_name(op) for op in checked["torch_executed_ops"]})
    return checked


SAVE_FORMATS = ("exported_program", "torchscript", "aot_inductor", "executorch")


def _check_formats(formats: Sequence[str]) -> list[str]:
    if isinstance(formats, str):
        raise TypeError(f"save_formats takes a list of formats, e.g. [{formats!r}], not a string")
    unknown = [f for f in formats if f not in SAVE_FORMATS]
    if unknown:
        raise ValueError(f"unknown save_formats {unknown}: torch_tensorrt.save writes {list(SAVE_FORMATS)}")
    return list(formats)


def _check_profiles(profiles: Sequence[Profile] | None, args: Sequence[Any]) -> list[dict[str, Any]] | None:
    if profiles is None:
        return None
    profiles = list(profiles)
    if len(profiles) != len(args):
        raise ValueError(
            f"{len(profiles)} profiles for {len(args)} example inputs: give one Profile per input, in order"
        )
    for i, profile in enumerate(profiles):
        if not isinstance(profile, Profile):
            raise TypeError(
                f"profiles[{i}] must be a casebook.backends.tensorrt.engine.Profile, got {profile!r}"
            )
    return [{"min": list(p.min), "opt": list(p.opt), "max": list(p.max), "dtype": p.dtype} for p in profiles]


def build_engines(
    exported_program: torch.export.ExportedProgram,
    example_inputs: Sequence[Any] | torch.Tensor,
    *,
    profiles: Sequence[Profile] | None = None,
    keep_going: bool = True,
    engine_dir: str | os.PathLike[str] | None = None,
    save_module: bool = False,
    save_formats: Sequence[str] = (),
    timeout_s: float = 900,
    import_modules: Sequence[str] = (),
    pytree_registrations: Sequence[str | Callable[[], Any]] = (),
    before_load: Sequence[str | Callable[[], Any]] = (),
    **settings: Any,
) -> EngineBuild:
    """Build the TensorRT engines of ``exported_program`` for real, in a subprocess, and report each block.

    Args:
        exported_program: the program to compile; it is saved and loaded again in the worker.
        example_inputs: example tensors, one per input of the program (a lone tensor is one input).
            Without ``profiles``, Torch-TensorRT takes a dynamic dimension's min and max from the
            program's range and its opt from these tensors (a static program gives static engines).
        profiles: one `Profile` per input (min/opt/max shapes), for dynamic engines. Torch-TensorRT
            refuses a profile wider than the program's range.
        keep_going: record a block whose build fails and build the next ones (True), or raise
            `EngineCompileError` at the first failure, as a plain ``dynamo.compile`` does (False).
        engine_dir: where engine files and build logs go (default: a folder per program and settings
            under the artifact cache). Files there are overwritten.
        save_module: also ``torch.save`` the compiled module (``module.pt``), engines inside.
        save_formats: also try ``torch_tensorrt.save`` in these output formats ("exported_program",
            "torchscript", "aot_inductor", "executorch"); `EngineBuild.saved` says what each did.
        timeout_s: how long the worker may run.
        import_modules, pytree_registrations, before_load: as for `trt_coverage.coverage_report`,
            for programs with custom operators (their fake kernels: ``before_load``) or custom pytree
            types. What ``before_load`` registers stays in the process that ran it, so a build with
            ``before_load`` gets a worker of its own instead of the shared one: a later build without
            it then cannot pass thanks to what an earlier one registered.
        **settings: ``torch_tensorrt.dynamo.compile`` keywords (``min_block_size``,
            ``torch_executed_ops``, ``enable_autocast``, ...), passed through.

    Raises:
        TensorRTForRTXMissingError: no Torch-TensorRT that can build here.
        EngineCompileError: ``dynamo.compile`` raised (with ``keep_going``, only for failures outside
            a block's build, such as the partitioner or a profile outside the program's range).
        EngineBuildError: the worker crashed, could not import Torch-TensorRT, or ran out of time.
    """
    request = _prepare(
        exported_program,
        example_inputs,
        profiles=profiles,
        keep_going=keep_going,
        engine_dir=engine_dir,
        save_module=save_module,
        save_formats=save_formats,
        timeout_s=timeout_s,
        import_modules=import_modules,
        pytree_registrations=pytree_registrations,
        before_load=before_load,
        settings=settings,
    )
    try:
        result, stderr, seconds = _build_in_worker(request)
        return _finish(request, result, stderr, seconds)
    finally:
        request.remove()


# build_engines's own keywords; the others are dynamo.compile settings
_BUILD_KEYWORDS = frozenset(
    {
        "profiles",
        "keep_going",
        "engine_dir",
        "save_module",
        "save_formats",
        "timeout_s",
        "import_modules",
        "pytree_registrations",
        "before_load",
    }
)


@dataclass
class _Request:
    """One build, saved for its worker: the folder holding ``program.pt2`` and ``request.pt``."""

    tmp_dir: Path
    engine_dir: Path
    save_module: bool
    timeout_s: float
    # True when the build registers something (``before_load``) that must not outlive it
    own_worker: bool = False
    # this process's CPU time spent saving the program and the request (0 when another build saved it)
    save_cpu_seconds: float = 0.0

    def remove(self) -> None:
        shutil.rmtree(self.tmp_dir, ignore_errors=True)


def _prepare(
    exported_program: torch.export.ExportedProgram,
    example_inputs: Sequence[Any] | torch.Tensor,
    *,
    profiles: Sequence[Profile] | None = None,
    keep_going: bool = True,
    engine_dir: str | os.PathLike[str] | None = None,
    save_module: bool = False,
    save_formats: Sequence[str] = (),
    timeout_s: float = 900,
    import_modules: Sequence[str] = (),
    pytree_registrations: Sequence[str | Callable[[], Any]] = (),
    before_load: Sequence[str | Callable[[], Any]] = (),
    settings: Mapping[str, Any] | None = None,
    saved_program: Path | None = None,
) -> _Request:
    """Check the arguments and save the program and the request for a worker. ``saved_program``: a
    file `torch.export.save` already wrote for this program, linked instead of saving it again."""
    _check_install()
    if not isinstance(exported_program, torch.export.ExportedProgram):
        raise TypeError(
            f"build_engines takes a torch.export.ExportedProgram, got {type(exported_program).__name__}: "
            "load a saved program with torch.export.load first"
        )
    args = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    checked = _check_settings(settings or {})
    profile_specs = _check_profiles(profiles, args)
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    if engine_dir is None:
        key = cache_key(
            exported_program, args, "tensorrt-rtx-engines", {**checked, "profiles": profile_specs}
        )
        engine_dir = default_cache_dir().parent / "engines" / key[:16]
    engine_dir = Path(engine_dir).resolve()
    request = {
        "inputs": args,
        "profiles": profile_specs,
        "settings": checked,
        "keep_going": bool(keep_going),
        "save_module": bool(save_module),
        "save_formats": _check_formats(save_formats),
        "engine_dir": str(engine_dir),
        "import_modules": _modules_for(exported_program, import_modules),
        # called in the worker before it loads the program, in this order
        "registrations": [_registration_name(r) for r in (*pytree_registrations, *before_load)],
    }
    tmp_dir = Path(tempfile.mkdtemp(prefix="casebook-trt-build-"))
    save_started = time.thread_time()
    try:
        program_path = tmp_dir / "program.pt2"
        if saved_program is not None:
            try:
                os.link(saved_program, program_path)
            except OSError:  # another file system
                shutil.copyfile(saved_program, program_path)
        else:
            torch.export.save(exported_program, str(program_path))
        torch.save(request, tmp_dir / "request.pt")
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return _Request(
        tmp_dir,
        engine_dir,
        bool(save_module),
        timeout_s,
        own_worker=bool(before_load),
        save_cpu_seconds=time.thread_time() - save_started,
    )


def _finish(request: _Request, result: Mapping[str, Any], stderr: str, seconds: float) -> EngineBuild:
    """The worker's result as an `EngineBuild`, recorded for the build report; raises what the build raised."""
    if not result["ok"]:
        hint = f" {_INSTALL_HINT}" if result.get("phase") == "import" else ""
        raise EngineBuildError(
            f"the engine build failed while in phase {result.get('phase')!r}: "
            f"{result['error_type']}: {result['message']}.{hint}",
            stderr_tail=_tail(result.get("traceback", "") + "\n" + stderr),
        )
    build = _build_from(result, request.engine_dir, request.save_module, request.save_cpu_seconds)
    # The build report adds these up: what real builds cost a book build (saving, worker start-up included).
    record_engine_build(
        {
            "seconds": round(seconds, 2),
            "cpu_seconds": round(build.cpu_seconds, 2) if build.cpu_seconds is not None else None,
            "engines": len(build.engines),
            "failed": len(build.failed),
            "peak_rss_mb": round(build.peak_rss_mb),
        }
    )
    error = result.get("compile_error")
    if error is not None:
        raise EngineCompileError(error["error_type"], error["message"], build, error.get("traceback", ""))
    return build


def start_engine_builds(
    builds: Mapping[
        str, tuple[torch.export.ExportedProgram, Sequence[Any] | torch.Tensor, Mapping[str, Any]]
    ],
    *,
    jobs: int = 2,
    engine_root: str | os.PathLike[str] | None = None,
    timeout_s: float = 900,
) -> PendingEngineBuilds:
    """`build_engines` for several programs, ``jobs`` workers at a time, started and not waited for.

    ``builds`` maps a label to (program, example inputs, `build_engines` keywords). Everything that
    touches PyTorch (checking, saving each program once however many builds share it) happens here,
    before this returns; the background threads only wait for worker processes, so this process may go
    on with its own work (export included) meanwhile. Builds of one program object go to one worker,
    one after the other, so that the later ones reuse its decompositions (see `EngineBuild`).
    ``engine_root``: each build's engines go to
    ``engine_root/<n>`` (n: the build's position in ``builds``), unless its keywords name an
    ``engine_dir``. `PendingEngineBuilds.result` waits and returns ``{label: EngineBuild}``.
    """
    if not builds:
        raise ValueError("start_engine_builds needs at least one build, got an empty mapping")
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    requests: dict[str, _Request] = {}
    by_program: dict[int, list[str]] = {}  # id(program) -> its builds' labels, in the order given
    try:
        for number, (label, build) in enumerate(builds.items()):
            if not (isinstance(build, tuple) and len(build) == 3):
                raise TypeError(
                    f"builds[{label!r}] must be (program, example inputs, keywords), e.g. "
                    f"(program, (image,), {{'min_block_size': 5}}); got {type(build).__name__}"
                )
            program, inputs, keywords = build
            keywords = dict(keywords)
            if engine_root is not None:
                keywords.setdefault("engine_dir", Path(engine_root) / str(number))
            keywords.setdefault("timeout_s", timeout_s)
            named = {k: keywords.pop(k) for k in list(keywords) if k in _BUILD_KEYWORDS}
            earlier = by_program.setdefault(id(program), [])
            # a program shared by several builds is saved once, by the first
            saved = requests[earlier[0]].tmp_dir / "program.pt2" if earlier else None
            request = _prepare(program, inputs, **named, settings=keywords, saved_program=saved)
            earlier.append(label)
            requests[label] = request
    except BaseException:
        for request in requests.values():
            request.remove()
        raise
    return PendingEngineBuilds(requests, jobs, groups=list(by_program.values()))


class PendingEngineBuilds:
    """Engine builds under way (`start_engine_builds`): ``jobs`` worker processes, each building one
    request after another (``--serve``), so that importing torch and Torch-TensorRT is paid once per
    worker instead of once per build. ``groups`` are lists of labels one worker builds in a row. A
    worker that crashes or runs past a build's ``timeout_s`` is stopped, that build fails with
    `EngineBuildError`, and a fresh worker takes the next one."""

    def __init__(self, requests: Mapping[str, _Request], jobs: int, groups: Sequence[Sequence[str]]):
        self._requests = dict(requests)
        self._builds: dict[str, EngineBuild] = {}
        self._queue: queue.SimpleQueue[list[str]] = queue.SimpleQueue()
        self._stopping = threading.Event()
        groups = [list(group) for group in groups]
        if sorted(label for group in groups for label in group) != sorted(self._requests):
            raise ValueError("groups must hold every build's label exactly once")
        for group in groups:
            self._queue.put(group)
        self._outcomes: dict[str, Future] = {label: Future() for label in self._requests}
        self._threads = [
            threading.Thread(target=self._serve, name=f"engine-build-{n}", daemon=True)
            for n in range(min(jobs, len(groups)))
        ]
        for thread in self._threads:
            thread.start()

    def _serve(self) -> None:
        """One worker thread: hand the queued builds, one at a time, to a serving worker process."""
        worker: _ServingWorker | None = None
        pending: list[str] = []
        try:
            while True:
                if not pending:
                    try:
                        pending = list(self._queue.get_nowait())
                    except queue.Empty:
                        return
                label = pending.pop(0)
                if self._stopping.is_set():
                    self._outcomes[label].set_exception(_not_started(label))
                    continue
                request = self._requests[label]
                try:
                    if request.own_worker:
                        outcome = _build_in_own_worker(request)
                    else:
                        worker = worker or _ServingWorker()
                        outcome = worker.build(request)
                except EngineBuildError as error:
                    if not request.own_worker:
                        worker = None  # stopped by build(); the next build gets a fresh one
                    self._outcomes[label].set_exception(error)
                else:
                    self._outcomes[label].set_result(outcome)
        finally:
            if worker is not None:
                worker.close()

    def done(self) -> bool:
        """Whether every build has finished; `result` then returns at once."""
        return all(outcome.done() for outcome in self._outcomes.values())

    def result(self, labels: Sequence[str] | None = None) -> dict[str, EngineBuild]:
        """Wait for the builds of ``labels`` (default: every build); ``{label: EngineBuild}`` in that
        order, or the first error met in that order (`EngineCompileError`, `EngineBuildError`), its
        label first in the message. Builds run in the order given (builds of one program together),
        so a page can collect the first ones while the last are still building. Once every build is
        collected, the workers' files are removed; the engines stay."""
        wanted = list(self._requests) if labels is None else list(labels)
        unknown = [label for label in wanted if label not in self._requests]
        if unknown:
            raise KeyError(f"no build labelled {unknown[0]!r}; the labels are {list(self._requests)}")
        try:
            for label in wanted:
                if label in self._builds:
                    continue
                try:
                    result, stderr, seconds = self._outcomes[label].result()
                    self._builds[label] = _finish(self._requests[label], result, stderr, seconds)
                except (EngineCompileError, EngineBuildError) as error:
                    error.args = (f"[{label}] {error.args[0]}", *error.args[1:])
                    self._stop()
                    raise
        finally:
            if len(self._builds) == len(self._requests):
                self._stop()
        return {label: self._builds[label] for label in wanted}

    def _stop(self) -> None:
        """Drop the builds not started yet, wait for the running ones, remove the workers' files."""
        self._stopping.set()
        while True:
            try:
                group = self._queue.get_nowait()
            except queue.Empty:
                break
            for label in group:
                self._outcomes[label].set_exception(_not_started(label))
        for thread in self._threads:
            thread.join()
        for request in self._requests.values():
            request.remove()


def _not_started(label: str) -> EngineBuildError:
    return EngineBuildError(f"not built: the builds were stopped before {label!r} started")


# build_engines's worker, kept between calls (one per process, started on the first build).
_SHARED_WORKER: dict[str, _ServingWorker] = {}
_SHARED_WORKER_LOCK = threading.Lock()


def _build_in_worker(request: _Request) -> tuple[dict[str, Any], str, float]:
    """Build ``request`` in a worker of its own if it asks for one, else in the shared worker."""
    return _build_in_own_worker(request) if request.own_worker else _build_in_shared_worker(request)


def _build_in_own_worker(request: _Request) -> tuple[dict[str, Any], str, float]:
    """Build ``request`` in a worker started for it and stopped after it."""
    worker = _ServingWorker()
    try:
        return worker.build(request)
    finally:
        worker.close()


def _build_in_shared_worker(request: _Request) -> tuple[dict[str, Any], str, float]:
    """Build ``request`` in this process's serving worker, so that a page building one program after
    another pays the worker's start-up (importing torch and Torch-TensorRT, about 8 s) once. A worker
    that crashed or ran out of time is gone; one started with another environment than this call's
    (a variable set since, another Torch-TensorRT) is replaced."""
    with _SHARED_WORKER_LOCK:
        env = _worker_env()
        worker = _SHARED_WORKER.pop("worker", None)
        if worker is not None and not worker.serves(env):
            worker.close()
            worker = None
        worker = worker or _ServingWorker(env)
        outcome = worker.build(request)  # EngineBuildError: the worker is stopped and stays out
        _SHARED_WORKER["worker"] = worker
        return outcome


@atexit.register
def _close_shared_worker() -> None:
    worker = _SHARED_WORKER.pop("worker", None)
    if worker is not None:
        worker.close()


def _worker_env(path: Sequence[str] | None = None) -> dict[str, str]:
    """The environment of a build worker: ``path`` (default `worker_path`) and the repository first on
    its Python path."""
    env = dict(os.environ)
    first = worker_path() if path is None else list(path)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*first, str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


class _ServingWorker:
    """A build worker started with ``--serve``: request folders in on stdin, the same folder back on
    stdout when its ``result.json`` is written. Its stderr goes to a file; each build's part of it is
    kept with that build's result. It exits when its stdin closes, so also when this process ends."""

    def __init__(self, env: Mapping[str, str] | None = None):
        self._env = dict(_worker_env() if env is None else env)
        self._stderr = tempfile.NamedTemporaryFile(
            "w", prefix="casebook-trt-worker-", suffix=".stderr", delete=False
        )
        self._started = time.perf_counter()  # the first build's seconds include the start-up
        self._process = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=self._env,
            text=True,
        )

    def serves(self, env: Mapping[str, str]) -> bool:
        """Still running, and started with ``env`` (but for variables that do not change a build)."""
        return self._process.poll() is None and _relevant_env(self._env) == _relevant_env(env)

    def build(self, request: _Request) -> tuple[dict[str, Any], str, float]:
        """Build one request: (result, its stderr, seconds); raises `EngineBuildError` (the worker is
        then stopped) when the worker crashes or runs past the request's ``timeout_s``."""
        start = min(self._started, time.perf_counter())
        self._started = float("inf")
        offset = Path(self._stderr.name).stat().st_size
        expired = threading.Event()

        def stop() -> None:
            expired.set()
            self._process.kill()

        timer = threading.Timer(request.timeout_s, stop)
        timer.start()
        try:
            self._process.stdin.write(f"{request.tmp_dir}\n")
            self._process.stdin.flush()
            answer = self._process.stdout.readline().strip()
        except OSError:  # the worker is gone (BrokenPipeError)
            answer = ""
        finally:
            timer.cancel()
        with open(self._stderr.name, errors="replace") as log:
            log.seek(offset)
            stderr = log.read()
        result_path = request.tmp_dir / "result.json"
        if answer == str(request.tmp_dir) and result_path.exists():
            return json.loads(result_path.read_text()), stderr, time.perf_counter() - start
        self.close()
        if expired.is_set():
            message = f"the engine build did not finish within {request.timeout_s} s"
        else:
            message = f"the build worker exited with status {self._process.returncode} without a result"
        raise EngineBuildError(message, stderr_tail=_tail(stderr))

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._stderr.close()
        Path(self._stderr.name).unlink(missing_ok=True)


def run_worker(
    module: str, tmp_dir: Path, timeout_s: float, path: Sequence[str] | None = None
) -> tuple[dict[str, Any], str]:
    """Run ``python -m module tmp_dir`` with ``path`` (default `worker_path`) and the repository first on
    its path; its ``result.json`` and stderr."""
    env = _worker_env(path)
    stderr_path = tmp_dir / "worker.stderr"
    with open(stderr_path, "w") as stderr:  # a file, not a pipe: the build log can be long
        try:
            completed = subprocess.run(
                [sys.executable, "-m", module, str(tmp_dir)],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise EngineBuildError(
                f"the engine build did not finish within {timeout_s} s",
                stderr_tail=_tail(stderr_path.read_text(errors="replace")),
            ) from None
    text = stderr_path.read_text(errors="replace")
    result_path = tmp_dir / "result.json"
    if completed.returncode != 0 or not result_path.exists():
        raise EngineBuildError(
            f"the build worker exited with status {completed.returncode} without a result",
            stderr_tail=_tail(text),
        )
    return json.loads(result_path.read_text()), text


def _build_from(
    result: Mapping[str, Any], engine_dir: Path, save_module: bool, save_cpu_seconds: float = 0.0
) -> EngineBuild:
    blocks = []
    for raw in result["blocks"]:
        if raw["kind"] == "torch":
            blocks.append(Block("torch", raw["name"], raw["ops"], "pytorch"))
            continue
        log = engine_dir / f"{raw['name']}.build.log"
        blocks.append(
            Block(
                "tensorrt",
                raw["name"],
                raw["ops"],
                raw.get("status", "failed"),
                profile=tuple(
                    InputProfile(p["name"], tuple(p["min"]), tuple(p["opt"]), tuple(p["max"]), p["dtype"])
                    for p in raw["profile"]
                ),
                engine_path=Path(raw["engine"]) if raw.get("engine") else None,
                engine_bytes=raw.get("engine_bytes"),
                seconds=raw.get("seconds"),
                error_type=raw.get("error_type"),
                error_message=raw.get("message"),
                layers=tuple(
                    Layer(layer["name"], layer["type"], tuple(layer["dtypes"]))
                    for layer in raw.get("layers", ())
                ),
                build_log=log if log.exists() else None,
            )
        )
    module = engine_dir / "module.pt"
    return EngineBuild(
        blocks=tuple(blocks),
        versions=result["versions"],
        stand_ins=tuple(result["stand_ins"]),
        settings=result["settings"],
        seconds=result["seconds"],
        peak_rss_mb=result["peak_rss_mb"],
        engine_dir=engine_dir,
        module_path=module if save_module and module.exists() else None,
        saved=result.get("saved", {}),
        decompositions=result.get("decompositions", ""),
        decomposition_seconds=result.get("decomposition_seconds"),
        program_load=result.get("program_load", ""),
        cpu_seconds=result["cpu_seconds"] + save_cpu_seconds if "cpu_seconds" in result else None,
    )
