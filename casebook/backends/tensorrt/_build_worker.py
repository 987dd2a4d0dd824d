"""Subprocess entry point for `casebook.backends.tensorrt.engine`: real TensorRT engine builds.

Run as ``python -m casebook.backends.tensorrt._build_worker REQUEST_DIR``, or with ``--serve`` to build one
request after another in one process: it reads a request folder per line on stdin and writes the
folder back on stdout when its result is written (worker start-up, importing torch and Torch-TensorRT,
is then paid once). ``REQUEST_DIR`` holds
``program.pt2`` (from `torch.export.save`) and ``request.pt`` (example inputs, optional input
profiles, the `dynamo.compile` settings, where to write engines); the worker writes ``result.json``
there and exits 0 also when the compile raised, so the parent can tell "Torch-TensorRT or TensorRT
refused this graph" (``ok: true`` with ``compile_error``) from "the build could not run" (``ok: false``).

Why a separate process: without a GPU, `import torch_tensorrt` needs stand-ins
(`casebook.backends.tensorrt.stand_ins`) that change `torch.cuda` and Torch-TensorRT for the life of the
process; a build also holds a gigabyte or more that is returned to the system when the process ends.

How each TensorRT block is observed: Torch-TensorRT's ``compile_module`` partitions the graph and calls
``convert_module`` once per TensorRT block. The worker wraps that function to record the block's ops,
its input profile (min/opt/max shapes), the build's time, its engine bytes and its build log, or the
exception that ended it. A plain `dynamo.compile` stops at the first block that fails; with
``keep_going`` the failed block is recorded and left in PyTorch, so the next blocks are built too.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import operator
import os
import re
import resource
import sys
import time
import traceback
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from casebook.backends.tensorrt._dryrun_worker import _import_callable

# Torch-TensorRT forwards TensorRT's log to this logger (VERBOSE as DEBUG).
_TRT_LOG = "torch_tensorrt [TensorRT Conversion Context]"
# TensorRT's engine layer list, printed after a build at VERBOSE with detailed profiling verbosity.
_LAYER_LINE = re.compile(
    r"^Name: (?P<name>.*?), LayerType: (?P<type>[^,]*),.*?Outputs: \[(?P<outputs>.*?)\], TacticName",
    re.MULTILINE,
)
_DATATYPE = re.compile(r"Datatype: (\w+)")


def _qualified(target: Any) -> str:
    from torch.fx.node import _get_qualified_name

    return target if isinstance(target, str) else _get_qualified_name(target)


def _op_counts(graph_module: Any) -> dict[str, int]:
    """``{op name: node count}`` of a block's graph (``getitem`` excluded, as in the dry run)."""
    return dict(
        Counter(
            _qualified(node.target)
            for node in graph_module.graph.nodes
            if node.op == "call_function" and node.target is not operator.getitem
        )
    )


def _profile(module_inputs: Any, graph_module: Any) -> list[dict[str, Any]]:
    """Each block input's optimization profile, as Torch-TensorRT gives it to TensorRT."""
    names = [node.name for node in graph_module.graph.nodes if node.op == "placeholder"]
    rows = []
    for name, spec in zip(names, module_inputs, strict=False):
        shape = spec.shape
        if isinstance(shape, dict):
            low, opt, high = (list(shape[key]) for key in ("min_shape", "opt_shape", "max_shape"))
        else:
            low = opt = high = list(shape)
        rows.append({"name": name, "min": low, "opt": opt, "max": high, "dtype": str(spec.dtype)})
    return rows


def _layers(log_lines: list[str]) -> list[dict[str, str]]:
    """The engine's layers (name, type, its outputs' data types) from the build log's ``Layers:`` section."""
    # One log record can hold many lines: the whole list comes as one message.
    text = "\n".join(log_lines)
    return [
        {"name": m["name"], "type": m["type"], "dtypes": sorted(set(_DATATYPE.findall(m["outputs"])))}
        for m in _LAYER_LINE.finditer(text)
    ]


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _error(exc: BaseException) -> dict[str, str]:
    return {
        "error_type": f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins."),
        "message": str(exc),
        "traceback": traceback.format_exc(),
    }


# What a serving worker did once and must not do again: wrap Torch-TensorRT, register pytree types.
_ONCE: dict[str, Any] = {"torch_tensorrt": None, "stand_ins": [], "versions": {}, "registered": set()}
# The request being built: the wrappers of _watch_blocks read it.
_CURRENT: dict[str, Any] = {}
# The last program's decomposed form: {"key": ..., "program": ExportedProgram} (see _reuse_decompositions).
_LAST_DECOMPOSED: dict[str, Any] = {}
# The last program loaded: {"key": ..., "program": ExportedProgram} (see _load_program).
_LAST_LOADED: dict[str, Any] = {}


def _import_torch_tensorrt(state: dict[str, Any]) -> Any:
    if _ONCE["torch_tensorrt"] is None:
        _ONCE["torch_tensorrt"] = _first_import_torch_tensorrt(_ONCE)
    state["stand_ins"] = list(_ONCE["stand_ins"])
    state["versions"] = dict(_ONCE["versions"])
    return _ONCE["torch_tensorrt"]


def _first_import_torch_tensorrt(state: dict[str, Any]) -> Any:
    import importlib

    import torch

    from casebook.backends.tensorrt import stand_ins as trt_stand_ins

    stood_in = []
    if not torch.cuda.is_available():
        for stand_in in trt_stand_ins.BEFORE_IMPORT:
            stand_in.install()
            stood_in.append(stand_in.name)
    state["stand_ins"] = stood_in
    torch_tensorrt = importlib.import_module("torch_tensorrt")
    if not torch.cuda.is_available():
        if not torch_tensorrt.ENABLED_FEATURES.tensorrt_rtx:
            raise RuntimeError(
                "this torch_tensorrt is built for enterprise TensorRT, whose builder needs a GPU; "
                "without one, engines are built with Torch-TensorRT for RTX"
            )
        for stand_in in trt_stand_ins.AFTER_IMPORT:
            stand_in.install()
            stood_in.append(stand_in.name)
    import tensorrt

    state["versions"] = {
        "torch": torch.__version__,
        "torch_tensorrt": torch_tensorrt.__version__,
        "tensorrt": tensorrt.__version__,
        "tensorrt_package": getattr(tensorrt, "_package_name", "") or "tensorrt",
    }
    return torch_tensorrt


def _watch_blocks(keep_going: bool, engine_dir: Path, blocks: list[dict[str, Any]]) -> None:
    """Wrap ``convert_module`` (one call per TensorRT block) and the builder config (layer list), once
    per process; each request sets what the wrappers record into."""
    _CURRENT.update(keep_going=keep_going, engine_dir=engine_dir, blocks=blocks)
    if _ONCE.get("watching"):
        return
    _ONCE["watching"] = True
    import tensorrt
    from torch_tensorrt.dynamo import _compiler
    from torch_tensorrt.dynamo.conversion import _TRTInterpreter

    real_config = _TRTInterpreter.TRTInterpreter._populate_trt_builder_config

    def detailed_config(self: Any, *args: Any, **kwargs: Any) -> Any:
        config = real_config(self, *args, **kwargs)
        # Torch-TensorRT asks for DETAILED only under its debugger; the layer list needs it.
        config.profiling_verbosity = tensorrt.ProfilingVerbosity.DETAILED
        return config

    _TRTInterpreter.TRTInterpreter._populate_trt_builder_config = detailed_config
    real_convert = _compiler.convert_module
    trt_log = logging.getLogger(_TRT_LOG)
    trt_log.setLevel(logging.DEBUG)
    trt_log.propagate = False

    def convert_module(module: Any, inputs: Any, *args: Any, name: str = "", **kwargs: Any) -> Any:
        engine_dir = _CURRENT["engine_dir"]
        block = {"name": name, "ops": _op_counts(module), "profile": _profile(inputs, module)}
        _CURRENT["blocks"].append(block)
        collect = _Collect()
        trt_log.addHandler(collect)
        start = time.perf_counter()
        try:
            converted = real_convert(module, inputs, *args, name=name, **kwargs)
        except Exception as exc:
            block.update(status="failed", seconds=time.perf_counter() - start, **_error(exc))
            if not _CURRENT["keep_going"]:
                raise
            # Recorded above and reported per block; the block's graph stays PyTorch, so the next
            # blocks are still built (a plain dynamo.compile would stop here).
            return _left_in_pytorch(module)
        finally:
            trt_log.removeHandler(collect)
            block["log_lines"] = len(collect.lines)
            (engine_dir / f"{name}.build.log").write_text("\n".join(collect.lines))
        block["seconds"] = time.perf_counter() - start
        engine = bytes(converted.serialized_engine)
        path = engine_dir / f"{name}.engine"
        path.write_bytes(engine)
        block.update(
            status="built", engine=str(path), engine_bytes=len(engine), layers=_layers(collect.lines)
        )
        return converted

    _compiler.convert_module = convert_module


def _program_digest(path: Path) -> str:
    """What a saved program holds, independent of the archive's name and time stamps: each member's
    name (less the archive's top folder, named after the file), size and CRC-32 (read from the zip
    directory, so no data is read)."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(path) as archive:
        for member in archive.infolist():
            name = member.filename.partition("/")[2]
            digest.update(f"{name}\0{member.file_size}\0{member.CRC}\n".encode())
    return digest.hexdigest()


# compile's settings that change the program it partitions: its lowering before the decompositions
# reads the autocast ones, and these choose the decomposition table
_DECOMPOSITION_SETTINGS = (
    "enable_experimental_decompositions",
    "decompose_attention",
    "use_distributed_mode_trace",
    "use_fp32_acc",
)


def _autocast_settings(settings: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """compile's autocast settings, as a key: its pre-lowering inserts casts by them."""
    return tuple(sorted((k, repr(v)) for k, v in settings.items() if "autocast" in k))


def _decomposition_key(program_digest: str, settings: dict[str, Any], table: Any) -> tuple[Any, ...]:
    """What the decomposed program depends on: the saved program, the settings above, and which ops
    the table decomposes (its functions are made anew for each compile, so they are not compared)."""
    chosen = _autocast_settings(settings) + tuple(
        sorted((k, repr(v)) for k, v in settings.items() if k in _DECOMPOSITION_SETTINGS)
    )
    return (program_digest, chosen, tuple(sorted(str(op) for op in (table or {}))))


def _load_program(path: Path, program_digest: str, settings: dict[str, Any], state: dict[str, Any]) -> Any:
    """The saved program, or the previous build's when that build loaded the same one with the same
    autocast settings.

    ``torch.export.load`` takes about 2 s for a torchvision detector on the 2-core machine, and pages
    build one program several times in a row. ``compile`` changes the program it is given in one way
    before it decomposes a copy (which `_reuse_decompositions` keeps): its pre-lowering passes drop
    ``detach`` and assert nodes, which a second run leaves as they are, and, with autocast on, insert
    casts. So the object is reused only under the same autocast settings. Only the last program is held.
    """
    import torch

    key = (program_digest, _autocast_settings(settings))
    if _LAST_LOADED.get("key") == key:
        state["program_load"] = "reused"
        return _LAST_LOADED["program"]
    _LAST_LOADED.clear()  # free the previous program before loading the next
    program = torch.export.load(str(path))
    _LAST_LOADED.update(key=key, program=program)
    state["program_load"] = "loaded"
    return program


@contextlib.contextmanager
def _reuse_decompositions(program: Any, program_digest: str, settings: dict[str, Any], state: dict[str, Any]):
    """Let ``program.run_decompositions`` return the previous build's result when that build
    decomposed the same saved program with the same table and settings.

    Torch-TensorRT's ``compile`` retraces every program with its decomposition table before it
    partitions it: for torchvision's Faster R-CNN ResNet-50 (static), about 6 of the 11 s its compile
    takes on a quiet 2-core machine. Pages build one program several times (default settings, then
    with ops moved to PyTorch); the partitioning settings act after this step, so its result is the
    same each time. Only the last program is kept, so a serving worker holds at most one extra
    program. ``compile`` leaves the decomposed
    program as it was (``.module()`` copies its graph), which the tests check.
    """
    from torch.export import ExportedProgram

    real = ExportedProgram.run_decompositions

    def run_decompositions(self: Any, decomp_table: Any = None, *args: Any, **kwargs: Any) -> Any:
        if self is not program or args or kwargs:
            return real(self, decomp_table, *args, **kwargs)
        key = _decomposition_key(program_digest, settings, decomp_table)
        start = time.perf_counter()
        if _LAST_DECOMPOSED.get("key") == key:
            state["decompositions"] = "reused"
            decomposed = _LAST_DECOMPOSED["program"]
        else:
            _LAST_DECOMPOSED.clear()  # free the previous program before making the next
            decomposed = real(self, decomp_table)
            _LAST_DECOMPOSED.update(key=key, program=decomposed)
            state["decompositions"] = "run"
        state["decomposition_seconds"] = time.perf_counter() - start
        return decomposed

    ExportedProgram.run_decompositions = run_decompositions
    try:
        yield
    finally:
        ExportedProgram.run_decompositions = real


def _left_in_pytorch(module: Any) -> Any:
    """The failed block's graph, with the two methods compile_module calls on an engine module."""
    module.setup_engine = lambda: None
    module.set_output_tensors_as_unowned = lambda enabled: None
    return module


def _partition(partitioned: Any, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every block in graph order: TensorRT blocks (built or failed) and PyTorch blocks."""
    by_name = {block["name"]: block for block in blocks}
    order = []
    for node in partitioned.graph.nodes:
        if node.op != "call_module":
            continue
        if node.target in by_name:
            order.append({"kind": "tensorrt", **by_name[node.target]})
        else:
            submodule = getattr(partitioned, node.target)
            order.append({"kind": "torch", "name": node.target, "ops": _op_counts(submodule)})
    inline = Counter(
        _qualified(node.target)
        for node in partitioned.graph.nodes
        if node.op == "call_function" and node.target is not operator.getitem
    )
    if inline:  # the global partitioner leaves PyTorch nodes in the top-level graph
        order.append({"kind": "torch", "name": "(top-level graph)", "ops": dict(inline)})
    return order


@contextlib.contextmanager
def _collections_skip_what_was_loaded() -> Iterator[None]:
    """Let the garbage collector skip the objects that exist before the compile (``gc.freeze``).

    Torch-TensorRT calls ``gc.collect()`` after each block to give GPU memory back; a full collection
    walks every object the process holds (torch, the loaded program, its fake tensors), about 0.3 s
    each here, twice per block: a third of a detector's build. Frozen objects are not walked and not
    freed; the worker holds them for the whole build anyway. What the compile creates is still
    collected. Unfrozen afterwards, so that a serving worker frees one build's objects before the next.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run(request_dir: Path, state: dict[str, Any]) -> dict[str, Any]:
    import importlib

    import torch

    request = torch.load(request_dir / "request.pt", weights_only=False)
    for name in request["import_modules"]:
        importlib.import_module(name)  # registers custom ops the saved program refers to
    state["phase"] = "import"
    torch_tensorrt = _import_torch_tensorrt(state)
    # After the import: a registration may use Torch-TensorRT (a plugin for a custom operator).
    state["phase"] = "registrations"
    for target in request["registrations"]:
        if target not in _ONCE["registered"]:  # a serving worker registers each type once
            _import_callable(target)()
            _ONCE["registered"].add(target)
    settings = dict(request["settings"])
    if not torch.cuda.is_available():
        from casebook.backends.tensorrt.stand_ins import CPU_ONLY_SETTINGS

        settings = {**CPU_ONLY_SETTINGS, **settings}
    state["phase"] = "load"
    program_digest = _program_digest(request_dir / "program.pt2")
    program = _load_program(request_dir / "program.pt2", program_digest, settings, state)
    engine_dir = Path(request["engine_dir"])
    engine_dir.mkdir(parents=True, exist_ok=True)
    if request["profiles"] is None:
        arg_inputs = list(request["inputs"])
    else:
        arg_inputs = [
            torch_tensorrt.Input(min_shape=p["min"], opt_shape=p["opt"], max_shape=p["max"], dtype=p["dtype"])
            for p in request["profiles"]
        ]
    state["settings"] = {key: repr(value) for key, value in settings.items()}
    blocks: list[dict[str, Any]] = []
    _watch_blocks(request["keep_going"], engine_dir, blocks)
    state["phase"] = "compile"
    start = time.perf_counter()
    try:
        with (
            _reuse_decompositions(program, program_digest, settings, state),
            _collections_skip_what_was_loaded(),
        ):
            partitioned = torch_tensorrt.dynamo.compile(program, arg_inputs=arg_inputs, **settings)
    except Exception as exc:  # Torch-TensorRT or TensorRT refused the graph: the parent raises it
        return dict(
            state,
            ok=True,
            compile_error=_error(exc),
            blocks=[{"kind": "tensorrt", **block} for block in blocks],
            seconds=time.perf_counter() - start,
            peak_rss_mb=_peak_rss_mb(),
        )
    seconds = time.perf_counter() - start
    if request["save_module"]:
        torch.save(partitioned, engine_dir / "module.pt")
    return dict(
        state,
        ok=True,
        compile_error=None,
        saved=_save_formats(torch_tensorrt, partitioned, request, engine_dir),
        blocks=_partition(partitioned, blocks),
        seconds=seconds,
        peak_rss_mb=_peak_rss_mb(),
    )


_SUFFIXES = {
    "exported_program": ".ep.pt2",
    "torchscript": ".ts",
    "aot_inductor": ".aoti.pt2",
    "executorch": ".pte",
}


def _save_formats(
    torch_tensorrt: Any, module: Any, request: dict[str, Any], engine_dir: Path
) -> dict[str, Any]:
    """``torch_tensorrt.save`` in each format asked for: the file written, or the exception it raised."""
    saved: dict[str, Any] = {}
    for output_format in request["save_formats"]:
        path = engine_dir / f"module{_SUFFIXES.get(output_format, '.' + output_format)}"
        try:
            # The example tensors: the torchscript format traces the module with them.
            torch_tensorrt.save(
                module,
                str(path),
                output_format=output_format,
                arg_inputs=list(request["inputs"]),
                retrace=False,
            )
        except Exception as exc:  # the point of asking: each format's outcome is reported per format
            saved[output_format] = {"ok": False, **_error(exc)}
        else:
            saved[output_format] = {"ok": True, "path": str(path), "bytes": path.stat().st_size}
    return saved


def _peak_rss_mb() -> float:
    """This process's peak resident memory. Linux's ``ru_maxrss`` is not it: it carries over across
    ``exec`` the parent's size at ``fork`` (a notebook kernel holding a detector made every build
    "peak" at the kernel's 1.7 GB); ``VmHWM``, the high-water mark of this process's own memory, is."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # no /proc: the best there is


def _reset_peak_rss() -> None:
    """Start this process's memory high-water mark (VmHWM) again from its current size, so that a
    serving worker reports each build's own peak (Linux: "5" to /proc/self/clear_refs)."""
    clear_refs = Path("/proc/self/clear_refs")
    if clear_refs.exists():
        clear_refs.write_text("5")


def _cpu_seconds() -> float:
    """The CPU time this process has used so far, all its threads, user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def build_one(request_dir: Path) -> None:
    state: dict[str, Any] = {"phase": "start"}
    try:
        result = run(request_dir, state)
    except BaseException as exc:  # reported to the parent, which raises
        result = {**state, "ok": False, **_error(exc)}
    # CPU since the last answer, so the first build of a worker carries its start-up (the imports)
    # and a worker's builds add up to all it used: what the builds take from the rest of a book build.
    used = _cpu_seconds()
    result["cpu_seconds"] = used - _ONCE.get("cpu_answered", 0.0)
    _ONCE["cpu_answered"] = used
    (request_dir / "result.json").write_text(json.dumps(result, indent=1, default=str))


def main(argv: list[str]) -> int:
    if argv[1:] != ["--serve"]:
        build_one(Path(argv[1]))
        return 0
    # The parent reads answers from stdout: whatever else a build writes there (Python or C) goes to stderr.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for number, line in enumerate(sys.stdin):
        if number:
            _reset_peak_rss()
        build_one(Path(line.strip()))
        print(line.strip(), file=answers, flush=True)  # the parent waits for this line
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
