"""Subprocess entry point for `casebook.backends.tensorrt.coverage`: Torch-TensorRT dry runs.

Run as ``python -m casebook.backends.tensorrt._dryrun_worker REQUEST_DIR``. ``REQUEST_DIR`` holds
``program_N.pt2`` (from `torch.export.save`) and ``inputs_N.pt`` (its example inputs) for one or more
programs, and ``request.json`` (one or more variants of the compile settings, each naming its program
by ``N``, the modules to import and the pytree registrations to run before loading the programs); the worker writes ``result.json`` there and exits 0
even when a compile raised, so the parent can tell "torch_tensorrt refused this graph" (a run with
``ok: false, phase: compile``) from "the analysis could not run" (top-level ``ok: false``).

Why a separate process: on a machine without TensorRT and a GPU, `import torch_tensorrt` fails, so
this worker may install stand-ins first (see `_install_stand_ins`). Stand-ins change `sys.modules`,
`torch.cuda` and one `torch_tensorrt` method for the life of the process; running them here keeps the
notebook's own process untouched. Where ``import tensorrt`` and CUDA both work, nothing is stood in
and the real modules run.

What the dry run is: ``torch_tensorrt.dynamo.compile(..., dryrun=True)`` lowers the graph, asks the
converter registry which nodes have a TensorRT converter, partitions the graph into TensorRT blocks
and Torch fallback blocks, then stops before building any engine. All of that is Python: the
stand-ins only have to get `torch_tensorrt` imported and keep the partitioner off the GPU.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import io
import json
import operator
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

STAND_IN_ANALYSIS = "stand-in (no GPU: engines were not built)"
REAL_ANALYSIS = "tensorrt"

# Compute capability the CUDA stand-in reports. torch_tensorrt only compares it with Jetson/Thor
# values (which drop one lowering pass and the TRT-LLM plugins); this is a desktop/datacenter GPU.
_STAND_IN_CAPABILITY = (9, 0)


class _StandInType(type):
    """Metaclass of the stand-in's TensorRT names (``tensorrt.DataType``, ``tensorrt.ILogger``, ...).

    Each name is a real class, so `torch_tensorrt` can subclass it (``class _TRTLogger(trt.ILogger)``),
    call it at import time (``trt.init_libnvinfer_plugins(logger, "")``) and use its members as dict
    keys (``trt.DataType.FLOAT``). A member is created on first access, is an instance of its class
    and keeps its identity, so equality and hashing behave like an enum. Nothing else works: an
    attribute of an instance raises `AttributeError`, which is what we want if anything tried to
    build a network.
    """

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        member = cls.__new__(cls)
        object.__setattr__(member, "_stand_in_name", f"{cls.__name__}.{name}")
        type.__setattr__(cls, name, member)
        cls._stand_in_module.__casebook_touched__.append(f"{cls.__name__}.{name}")
        return member

    def __repr__(cls) -> str:
        return f"<stand-in tensorrt.{cls.__name__}>"


def _stand_in_init(self: Any, *args: Any, **kwargs: Any) -> None:
    object.__setattr__(self, "_stand_in_name", f"{type(self).__name__}(...)")


def _stand_in_repr(self: Any) -> str:
    return f"<stand-in tensorrt.{self._stand_in_name}>"


def make_tensorrt_stand_in(tensorrt_version: str) -> ModuleType:
    """A module named ``tensorrt`` that has TensorRT's names and none of its behaviour.

    `torch_tensorrt` touches about forty TensorRT names while importing and dry-running (enum
    members in lookup tables, base classes for its logger and allocator, dtype constants). Listing
    them by hand would tie this file to one Torch-TensorRT release, so any public name is created on
    first use and recorded in ``__casebook_touched__``; the report lists them.

    ``__version__`` is the TensorRT version this `torch_tensorrt` was built against with a ``+standin``
    local label: `torch_tensorrt` registers some converters only above a TensorRT version, so the
    coverage must be computed as for that release, and the label keeps the value honest.
    """
    mod = ModuleType("tensorrt", doc="Casebook stand-in for the TensorRT Python module (no libnvinfer).")
    mod.__casebook_stand_in__ = True
    mod.__casebook_touched__ = []
    mod.__version__ = f"{tensorrt_version}+standin"
    mod.__file__ = "<casebook stand-in for tensorrt>"
    # A package with no submodules: find_spec("tensorrt.plugin") is None, so QDP plugins stay off.
    mod.__path__ = []
    mod.__spec__ = importlib.machinery.ModuleSpec("tensorrt", loader=None, is_package=True)
    # In the real wheel, tensorrt.tensorrt is the compiled bindings module torch_tensorrt reads from.
    mod.tensorrt = mod

    def __getattr__(name: str) -> Any:
        if name.startswith("_") or name in {"tensorrt_rtx", "plugin"}:
            raise AttributeError(f"module 'tensorrt' (casebook stand-in) has no attribute {name!r}")
        cls = _StandInType(
            name,
            (),
            {
                "__module__": "tensorrt",
                "__init__": _stand_in_init,
                "__repr__": _stand_in_repr,
                "_stand_in_module": mod,
            },
        )
        setattr(mod, name, cls)
        mod.__casebook_touched__.append(name)
        return cls

    mod.__getattr__ = __getattr__
    return mod


def _make_dllist_stand_in() -> ModuleType:
    """`torch_tensorrt` imports dllist only to look for a Windows cross-compilation library."""
    mod = ModuleType("dllist", doc="Casebook stand-in for dllist: reports no loaded libraries.")
    mod.__casebook_stand_in__ = True
    mod.dllist = lambda: []
    return mod


def _can_import_real_tensorrt() -> bool:
    try:
        importlib.import_module("tensorrt")
    except Exception:  # ImportError, or OSError from a missing libnvinfer
        sys.modules.pop("tensorrt", None)
        return False
    return True


@contextlib.contextmanager
def _hide_cpp_runtime(lib_dir: str):
    """Make torch_tensorrt see no ``lib/libtorchtrt*.so`` while it imports.

    Those libraries link libnvinfer and libcudart, so loading them fails without TensorRT. With them
    hidden, torch_tensorrt sets up as a Python-only install (its TorchScript frontend and C++
    runtime off), which is all a dry run uses.
    """
    real_isfile = os.path.isfile

    def isfile(path: Any) -> bool:
        if os.path.dirname(os.path.abspath(os.fspath(path))) == lib_dir:
            return False
        return real_isfile(path)

    os.path.isfile = isfile
    try:
        yield
    finally:
        os.path.isfile = real_isfile


def _install_stand_ins() -> tuple[list[str], ModuleType | None]:
    """Install only the stand-ins this machine needs; return their descriptions and the TRT module."""
    import torch

    notes: list[str] = []
    trt_stand_in = None
    need_cuda = not torch.cuda.is_available()

    if not _can_import_real_tensorrt():
        spec = importlib.util.find_spec("torch_tensorrt")
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError("torch_tensorrt is not installed in this environment")
        # torch_tensorrt._version on its own: importing it normally would run the failing __init__.
        version_file = os.path.join(os.path.dirname(spec.origin), "_version.py")
        version_spec = importlib.util.spec_from_file_location(
            "_casebook_torch_tensorrt_version", version_file
        )
        version = importlib.util.module_from_spec(version_spec)
        version_spec.loader.exec_module(version)
        trt_stand_in = make_tensorrt_stand_in(version.__tensorrt_version__)
        sys.modules["tensorrt"] = trt_stand_in
        notes.append(f"tensorrt: stand-in module, version {trt_stand_in.__version__} (no libnvinfer)")
        notes.append("torch_tensorrt C++ runtime (lib/libtorchtrt*.so) hidden: it links libnvinfer")
    if importlib.util.find_spec("dllist") is None:
        sys.modules["dllist"] = _make_dllist_stand_in()
        notes.append("dllist: stand-in returning no loaded libraries")
    if need_cuda:
        torch.cuda.current_device = lambda: 0
        torch.cuda.get_device_capability = lambda device=None: _STAND_IN_CAPABILITY
        notes.append("torch.cuda.current_device() -> 0 (no GPU)")
        notes.append(f"torch.cuda.get_device_capability() -> {_STAND_IN_CAPABILITY} (no GPU)")
    return notes, trt_stand_in


def _import_torch_tensorrt(trt_stand_in: ModuleType | None) -> ModuleType:
    if trt_stand_in is None:
        return importlib.import_module("torch_tensorrt")
    spec = importlib.util.find_spec("torch_tensorrt")
    lib_dir = os.path.join(os.path.dirname(spec.origin), "lib")
    with _hide_cpp_runtime(lib_dir):
        return importlib.import_module("torch_tensorrt")


def _patch_device_to_cpu(notes: list[str]) -> None:
    """Without a GPU, torch_tensorrt's target device means the CPU.

    It turns its `Device` into a `torch.device` to move Torch fallback blocks there during
    partitioning and to allocate tensors in a few decompositions; "cuda:0" would fail.
    """
    import torch
    from torch_tensorrt._Device import Device

    real_to = Device.to

    def to(self: Any, t: type) -> Any:
        if t is torch.device:
            return torch.device("cpu")
        return real_to(self, t)

    Device.to = to
    notes.append("torch_tensorrt.Device.to(torch.device) -> cpu (Torch fallback blocks stay on CPU)")


def _op_support(gm: Any, torch_executed_ops: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Per-op node counts from the same classifier `get_graph_converter_support` uses."""
    from torch_tensorrt.dynamo.partitioning._global_partitioner import TorchTensorRTOperatorSupport

    support = TorchTensorRTOperatorSupport(torch_executed_ops=torch_executed_ops)
    modules = dict(gm.named_modules())
    for node in gm.graph.nodes:
        if node.op == "call_function":
            support.is_node_supported(modules, node)
    return dict(support.supported_operators), dict(support.unsupported_operators)


# What `_set_up` prepared: the stand-ins' notes, the TensorRT stand-in (None when the real one
# imports), torch_tensorrt, and what every result reports. Set once per process; a request that
# `serve` answers runs in a child forked after it, so the child finds it set.
_READY: dict[str, Any] = {}


def _set_up() -> dict[str, Any]:
    """Install the stand-ins this machine needs and import torch_tensorrt, once per process."""
    if _READY:
        return _READY
    import torch

    notes, trt_stand_in = _install_stand_ins()
    stood_in = trt_stand_in is not None or not torch.cuda.is_available()
    torch_tensorrt = _import_torch_tensorrt(trt_stand_in)
    if not torch.cuda.is_available():
        _patch_device_to_cpu(notes)
    import tensorrt

    _READY.update(
        notes=notes,
        trt_stand_in=trt_stand_in,
        torch_tensorrt=torch_tensorrt,
        analysis=STAND_IN_ANALYSIS if stood_in else REAL_ANALYSIS,
        versions={
            "torch": torch.__version__,
            "torch_tensorrt": torch_tensorrt.__version__,
            "tensorrt": tensorrt.__version__,
        },
    )
    return _READY


def run(request_dir: Path, state: dict[str, Any]) -> dict[str, Any]:
    """Set up (once per process), then dry-run every requested variant of the settings on a fresh load.

    ``state`` carries the phase and what is known so far to `main` if setup fails. A variant that
    makes ``compile`` raise is recorded (``ok: false``) and the next variant still runs.
    """
    request = json.loads((request_dir / "request.json").read_text())

    import torch

    ready = _set_up()
    notes, trt_stand_in, torch_tensorrt = list(ready["notes"]), ready["trt_stand_in"], ready["torch_tensorrt"]
    state["stand_ins"] = notes
    state["analysis"] = ready["analysis"]
    state["versions"] = ready["versions"]
    state["phase"] = "import"
    for name in request.get("import_modules", []):
        importlib.import_module(name)  # registers custom ops the saved program refers to
    state["phase"] = "pytree_registrations"
    for target in request.get("pytree_registrations", []):
        # The saved program's input/output specs name custom pytree node types (detectron2-style
        # Instances, say) that torch.export.load can only rebuild once they are registered here too.
        _import_callable(target)()
    from torch.utils import _pytree as pytree

    # Lets the parent name the types a failed load was missing, without reading the error's text.
    state["pytree_types"] = sorted(pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE)
    from torch_tensorrt.dynamo import _compiler, partitioning
    from torch_tensorrt.dynamo.conversion._ConverterRegistry import ConverterRegistry

    # Capture the DryRunTracker itself, rather than parsing the printed summary.
    captured: dict[str, Any] = {}
    real_display = _compiler.dryrun_stats_display
    real_support = partitioning.get_graph_converter_support

    def dryrun_stats_display(tracker: Any, dryrun_enabled: Any) -> None:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            real_display(tracker, dryrun_enabled)
        captured["tracker"] = tracker
        captured["text"] = buf.getvalue().strip("\n")

    def get_graph_converter_support(gm: Any, torch_executed_ops: Any = None) -> Any:
        supported, total = real_support(gm, torch_executed_ops)
        captured["support"] = (supported, total, *_op_support(gm, torch_executed_ops or set()))
        captured["targets"] = {
            ConverterRegistry.qualified_name_or_str(n.target)
            for n in gm.graph.nodes
            if n.op == "call_function"
        }
        return supported, total

    _compiler.dryrun_stats_display = dryrun_stats_display
    partitioning.get_graph_converter_support = get_graph_converter_support

    state["phase"] = "load"
    inputs_by_program: dict[int, Any] = {}
    runs = []
    for variant in request["variants"]:
        captured.clear()
        state["phase"] = "load"
        index = variant["program"]  # several programs can share one worker (and its start-up)
        if index not in inputs_by_program:
            inputs_by_program[index] = torch.load(request_dir / f"inputs_{index}.pt", weights_only=True)
        inputs = inputs_by_program[index]
        # compile() rewrites the program it is given, so every variant starts from the saved one.
        program = torch.export.load(str(request_dir / f"program_{index}.pt2"))
        try:
            partitioned, log = _dry_run(torch_tensorrt, program, inputs, variant)
        except Exception as exc:  # Torch-TensorRT refused the graph: recorded, the next variant runs
            runs.append(_error("compile", exc))
            continue
        # Reading the result is this worker's job: a failure there is the analysis failing.
        state["phase"] = "summarize"
        runs.append(_summarize(partitioned, log, variant, captured))
    if trt_stand_in is not None:
        touched = ", ".join(sorted(set(trt_stand_in.__casebook_touched__)))
        notes.append(f"tensorrt names torch_tensorrt used through the stand-in: {touched}")
    return dict(state, ok=True, phase="done", runs=runs)


def _dry_run(torch_tensorrt: Any, program: Any, inputs: Any, variant: dict[str, Any]) -> tuple[Any, str]:
    """``torch_tensorrt.dynamo.compile(..., dryrun=True)``: the partitioned module and what it printed."""
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        partitioned = torch_tensorrt.dynamo.compile(
            program,
            list(inputs),
            dryrun=True,
            min_block_size=variant["min_block_size"],
            torch_executed_ops=set(variant["torch_executed_ops"]),
            require_full_compilation=variant["require_full_compilation"],
            # Nothing is built in a dry run, so the weights need not go to the GPU (and
            # torch.cuda.mem_get_info, which the default path calls, needs one).
            offload_module_to_cpu=True,
        )
    return partitioned, log.getvalue()


def _summarize(
    partitioned: Any, log: str, variant: dict[str, Any], captured: dict[str, Any]
) -> dict[str, Any]:
    """The run's result for the parent, from the tracker and the support counts captured during it."""
    torch_executed_ops = set(variant["torch_executed_ops"])
    supported, total, per_op_supported, per_op_unsupported = captured["support"]
    tracker = captured.get("tracker")
    result = dict(
        ok=True,
        total_ops=total,
        supported_ops=supported,
        supported_op_counts=per_op_supported,
        torch_executed_ops=sorted(torch_executed_ops),
        # torch_tensorrt matches entries against "torch.ops.aten.relu.default"-style names (or the
        # OpOverload itself) of the lowered graph and silently ignores anything else.
        unmatched_torch_executed_ops=sorted(torch_executed_ops - captured["targets"]),
    )
    if tracker is None:
        # compile_module returns the graph untouched, without a summary, when no op is supported.
        result.update(
            unsupported_ops=per_op_unsupported,
            to_run_in_torch=[],
            trt_blocks=[],
            blocks=None,
            torch_node_names=[],
            trt_engine_count=0,
            torch_block_count=None,
            text=(
                f"No Dry-Run summary: {supported} of {total} operators are supported, so "
                "torch_tensorrt returned the graph unchanged.\n" + log
            ).strip(),
        )
        return result
    fallback_blocks = [name for name, _ in partitioned.named_children() if name.startswith("_run_on_gpu")]
    blocks = _partition_blocks(partitioned, tracker)
    result.update(
        total_ops=tracker.total_ops_in_graph,
        supported_ops=tracker.supported_ops_in_graph,
        unsupported_ops=dict(tracker.unsupported_ops),
        to_run_in_torch=list(tracker.to_run_in_torch),
        trt_blocks=[
            {"name": s.subgraph_name, "op_count": s.subgraph_op_count} for s in tracker.per_subgraph_data
        ],
        trt_engine_count=tracker.tensorrt_graph_count,
        # The fast partitioner wraps each fallback block in a _run_on_gpu_N submodule; the global one
        # (its fallback when the fast one fails) leaves fallback nodes inline: no count to report.
        torch_block_count=len(fallback_blocks) if tracker.compilation_settings.use_fast_partitioner else None,
        blocks=blocks,
        torch_node_names=(
            [name for block in blocks for name in block["nodes"]]
            if blocks is not None
            else _torch_node_names(partitioned)  # the global partitioner leaves them inline
        ),
        text=captured["text"],
    )
    return result


def _import_callable(target: str) -> Any:
    """The function named by ``"package.module:function"`` (the parent checked that it resolves)."""
    module_name, _, qualname = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _partition_blocks(partitioned: Any, tracker: Any) -> list[dict[str, Any]] | None:
    """The TensorRT and Torch blocks of the fast partitioner's result, in graph order.

    The fast partitioner puts each block in a submodule, ``_run_on_acc_N`` (TensorRT) or
    ``_run_on_gpu_N`` (Torch), called from the top-level graph in execution order. A TensorRT block's
    op count is Torch-TensorRT's own (from the tracker); a Torch block lists its nodes as the dry
    run's summary does (``call_function``/``call_method``, ``getitem`` excluded). None for the global
    partitioner, which leaves Torch nodes inline, so it has no Torch blocks to put in order.
    """
    if not tracker.compilation_settings.use_fast_partitioner:
        return None
    engine_ops = {s.subgraph_name: s.subgraph_op_count for s in tracker.per_subgraph_data}
    blocks = []
    for node in partitioned.graph.nodes:
        if node.op != "call_module":
            continue
        if node.target.startswith("_run_on_acc"):
            blocks.append(
                {"kind": "tensorrt", "name": node.target, "op_count": engine_ops[node.target], "nodes": []}
            )
        elif node.target.startswith("_run_on_gpu"):
            nodes = _torch_node_names(getattr(partitioned, node.target))
            blocks.append({"kind": "torch", "name": node.target, "op_count": len(nodes), "nodes": nodes})
        else:
            raise ValueError(
                f"the partitioned graph calls submodule {node.target!r}, neither _run_on_acc_N nor "
                "_run_on_gpu_N: Torch-TensorRT's partitioner names its blocks differently now; update "
                "casebook.backends.tensorrt._dryrun_worker._partition_blocks"
            )
    return blocks


def _torch_node_names(graph_module: Any) -> list[str]:
    """Names of the nodes left to Torch in ``graph_module``, chosen as Torch-TensorRT's
    ``parse_non_trt_nodes`` chooses them for the dry run's node list."""
    return [
        node.name
        for node in graph_module.graph.nodes
        if node.op in ("call_function", "call_method") and node.target is not operator.getitem
    ]


def _error(phase: str, exc: BaseException) -> dict[str, Any]:
    return {
        "ok": False,
        "phase": phase,
        "error_type": f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins."),
        "message": str(exc),
        "traceback": traceback.format_exc(),
    }


def main(argv: list[str]) -> int:
    if argv[1:] == ["--serve"]:
        return serve()
    request_dir = Path(argv[1])
    state: dict[str, Any] = {"phase": "import"}
    try:
        result = run(request_dir, state)
    except BaseException as exc:  # reported to the parent, which raises
        result = {**state, **_error(state["phase"], exc)}
    (request_dir / "result.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


def serve() -> int:
    """Serve dry runs from a process set up once: each request runs in a child forked from it.

    Importing torch, torchvision and torch_tensorrt with its stand-ins takes about eight CPU seconds,
    most of a small dry run; a client pays them once instead of once per dry run. A forked child
    starts from the set-up state and nothing more (no earlier request's imports or registrations),
    as a fresh worker would, and exits when its request is done.

    Protocol, one line each way: ``ready`` once set up (or ``failed <error>``, then exit). Then, for
    each request folder read from stdin, ``started <pid>`` (the child, which the client stops when
    its time is up) and ``done <exit code>`` (negative: the signal that ended it). Stdin closed:
    exit. The child writes ``result.json`` as `main` does, and its stderr to ``worker.stderr`` in
    the request folder.
    """
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing else may write into the protocol's pipe
    try:
        import torchvision  # noqa: F401  (its operators: most programs sent here have them)

        _set_up()
    except BaseException as exc:
        protocol.write(f"failed {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}\n")
        return 1
    protocol.write("ready\n")
    for line in sys.stdin:
        request_dir = line.rstrip("\n")
        pid = os.fork()
        if pid == 0:  # the child: this request, then exit without the parent's clean-up
            code = 1
            try:
                stderr = os.open(
                    os.path.join(request_dir, "worker.stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                )
                os.dup2(stderr, 2)
                code = main([sys.argv[0], request_dir])
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        protocol.write(f"started {pid}\n")
        _, status = os.waitpid(pid, 0)
        protocol.write(f"done {os.waitstatus_to_exitcode(status)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
