"""ExecuTorch with the XNNPACK delegate on CPU: lower an ``ExportedProgram``, report what was delegated,
write the ``.pte`` and run it with the ExecuTorch runtime.

The lesson's calls (``to_edge_transform_and_lower``, ``to_executorch``, ``Runtime.load_program``) are
one line each; this module gathers them with the plumbing around them: the delegation report as a
table, timing and sizes, a callable wrapper around a loaded method, and a module that stands in for a
detector's backbone so the rest of the detector keeps running in PyTorch.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.metadata
import importlib.util
import io
import logging
import operator
import os
import re
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from .partition import Segment


@contextlib.contextmanager
def _quiet(*logger_names: str, level: int = logging.ERROR) -> Iterator[None]:
    """Raise these loggers to ``level`` inside the block (what they say is about the library, not the model)."""
    loggers = [logging.getLogger(name) for name in logger_names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(level)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@functools.cache
def _executorch() -> SimpleNamespace:
    """ExecuTorch's entry points, imported on first use: the import takes seconds, and pages and
    tests that import this module only for its types should not pay for it."""
    # Importing executorch registers an Enum as a pytree constant, which torch 2.14 warns about once.
    with _quiet("torch.utils._pytree"):
        from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.devtools.backend_debug import get_delegation_info
        from executorch.exir import to_edge_transform_and_lower
        from executorch.exir.backend.utils import WhyNoPartition
        from executorch.extension.pybindings.portable_lib import _threadpool_get_thread_count
        from executorch.runtime import Runtime
    return SimpleNamespace(
        ALL_PARTITIONER_CONFIGS=ALL_PARTITIONER_CONFIGS,
        XnnpackPartitioner=XnnpackPartitioner,
        get_delegation_info=get_delegation_info,
        to_edge_transform_and_lower=to_edge_transform_and_lower,
        WhyNoPartition=WhyNoPartition,
        threadpool_get_thread_count=_threadpool_get_thread_count,
        Runtime=Runtime,
    )


# The runtime's CPU detection logs these five lines when it loads its first program, on any x86 machine (it looks for
# ARM identification files); they say nothing about the program.
_CPUINFO_NOISE = re.compile(
    r"^\[cpuinfo_utils\.cpp:\d+\] (Reading file /sys/|Failed to open midr file|CPU info and manual query)"
)


_LIBC = ctypes.CDLL(None)


@contextlib.contextmanager
def _without_cpuinfo_lines() -> Iterator[None]:
    """Collect what the block writes to stdout and stderr; pass on all but the cpuinfo lines.

    The runtime logs through C's stdio in a plain process, and through Python's ``sys.stdout`` and
    ``sys.stderr`` in a Jupyter kernel, a piece at a time; both are collected, whole lines filtered.
    """
    sys.stdout.flush(), sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    captured = {fd: tempfile.TemporaryFile() for fd in (1, 2)}
    python_streams = {1: io.StringIO(), 2: io.StringIO()}
    try:
        for fd, file in captured.items():
            os.dup2(file.fileno(), fd)
        with contextlib.redirect_stdout(python_streams[1]), contextlib.redirect_stderr(python_streams[2]):
            yield
    finally:
        _LIBC.fflush(None)  # native code writes through C's buffered stdio
        for fd, file in captured.items():
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
            file.seek(0)
            text = file.read().decode(errors="replace") + python_streams[fd].getvalue()
            file.close()
            kept = "".join(line for line in text.splitlines(keepends=True) if not _CPUINFO_NOISE.match(line))
            if kept:
                (sys.stdout if fd == 1 else sys.stderr).write(kept)


@dataclass
class XnnpackLowering:
    """A program lowered for ExecuTorch with XNNPACK: the ``.pte`` bytes and what was delegated."""

    pte: bytes = field(repr=False)
    seconds: float
    delegated_subgraphs: int
    delegated_nodes: int
    other_nodes: int
    operators: Any = field(repr=False)  # pandas DataFrame: operator, delegated, not delegated
    segments: tuple[Segment, ...] = field(repr=False, default=())  # the partition, in graph order
    portable_nodes: Any = field(repr=False, default=None)  # pandas DataFrame, see portable_node_table

    def save(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        if path.suffix != ".pte":
            raise ValueError(f"an ExecuTorch program file ends in .pte, got {path.name!r}")
        path.write_bytes(self.pte)
        return path

    def __str__(self) -> str:
        return (
            f"lowered in {self.seconds:.1f} s: {self.delegated_subgraphs} XNNPACK subgraph(s) with "
            f"{self.delegated_nodes} nodes, {self.other_nodes} nodes left to ExecuTorch's portable "
            f"operators; .pte {len(self.pte) / 2**20:.1f} MiB"
        )


def lower_to_xnnpack(program: torch.export.ExportedProgram) -> XnnpackLowering:
    """``to_edge_transform_and_lower`` with the XNNPACK partitioner, then ``to_executorch``."""
    if not isinstance(program, torch.export.ExportedProgram):
        raise TypeError(
            f"lower_to_xnnpack takes a torch.export.ExportedProgram, got {type(program).__name__}"
        )
    start = time.perf_counter()
    # A failed decomposition is logged with its whole traceback before the same error is raised.
    with _quiet("torch._subclasses.fake_tensor", level=logging.CRITICAL), _partitioner_reasons() as reasons:
        et = _executorch()
        edge = et.to_edge_transform_and_lower(program, partitioner=[et.XnnpackPartitioner()])
    graph_module = edge.exported_program().graph_module
    info = et.get_delegation_info(graph_module)
    segments = delegation_segments(graph_module)
    portable = portable_node_table(graph_module, reasons)  # before to_executorch rewrites the graph
    delegated = [s.op_count for s in segments if s.kind == "xnnpack"]
    if (len(delegated), sum(delegated)) != (info.num_delegated_subgraphs, info.num_delegated_nodes):
        raise ValueError(
            f"the partition read from the graph ({len(delegated)} XNNPACK subgraph(s), {sum(delegated)} "
            f"nodes) disagrees with ExecuTorch's delegation report ({info.num_delegated_subgraphs}, "
            f"{info.num_delegated_nodes}): has executorch changed how it records delegates? "
            "Check casebook.backends.executorch_xnnpack.delegation_segments."
        )
    pte = edge.to_executorch().buffer
    table = info.get_operator_delegation_dataframe()
    table = table[table["op_type"] != "Total"].rename(
        columns={
            "op_type": "operator",
            "occurrences_in_delegated_graphs": "in XNNPACK",
            "occurrences_in_non_delegated_graphs": "outside",
        }
    )
    return XnnpackLowering(
        pte=pte,
        seconds=time.perf_counter() - start,
        delegated_subgraphs=info.num_delegated_subgraphs,
        delegated_nodes=info.num_delegated_nodes,
        other_nodes=info.num_non_delegated_nodes,
        operators=table.reset_index(drop=True),
        segments=tuple(segments),
        portable_nodes=portable,
    )


def delegation_segments(graph_module: torch.fx.GraphModule) -> list[Segment]:
    """The XNNPACK subgraphs and the portable-operator blocks between them, in graph order.

    A lowered graph calls each delegated subgraph through ``executorch_call_delegate`` on a
    ``lowered_module_N`` attribute, which keeps the subgraph it replaced (``original_module``); every
    other operator node runs on ExecuTorch's portable operators.
    """
    segments: list[Segment] = []
    pending: list[str] = []

    def close_pending() -> None:
        if pending:
            segments.append(Segment("portable", len(segments), len(pending), tuple(pending)))
            pending.clear()

    for node in graph_module.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        if getattr(node.target, "__name__", "") == "executorch_call_delegate":
            close_pending()
            lowered = getattr(graph_module, node.args[0].target)
            if lowered.backend_id != "XnnpackBackend":
                raise ValueError(f"{node.args[0].target} is delegated to {lowered.backend_id}, not XNNPACK")
            count = sum(n.op == "call_function" for n in lowered.original_module.graph.nodes)
            segments.append(Segment("xnnpack", len(segments), count))
        else:
            pending.append(_operator_name(node.target))
    close_pending()
    return segments


@contextlib.contextmanager
def _partitioner_reasons() -> Iterator[dict[str, str]]:
    """Collect why the XNNPACK partitioner turned nodes down: node name -> its first reason.

    Its operator configs call ``WhyNoPartition``, which logs each reason at DEBUG level on the
    configs' loggers; they are caught here and not printed.
    """
    reasons: dict[str, str] = {}

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            why = record.msg  # the WhyNoPartition object, read now: it is reused for the next reason
            if isinstance(why, _executorch().WhyNoPartition) and why.node is not None:
                reasons.setdefault(why.node.name, why.reason)

    logger = logging.getLogger("executorch.backends.xnnpack")
    handler, saved = Collect(logging.DEBUG), (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield reasons
    finally:
        logger.removeHandler(handler)
        logger.level, logger.propagate = saved


NO_CONFIG = "XNNPACK's partitioner has no config for this operator"


def portable_node_table(graph_module: torch.fx.GraphModule, reasons: dict[str, str] | None = None):
    """The nodes left outside the delegates, grouped by operator, by what they take and give, and why.

    Read from the graph ``to_edge_transform_and_lower`` returns; ``to_executorch`` later rewrites it
    in place (memory planning, out variants), so read it before that. ``reasons`` are the
    partitioner's, by node name; a node's reason may be filed under a node it came from (its
    ``from_node`` provenance), and an operator no XNNPACK config handles gets :data:`NO_CONFIG`.
    """
    import pandas as pd

    reasons = reasons or {}
    configured = {config.target_name.split(".")[0] for config in _executorch().ALL_PARTITIONER_CONFIGS}

    rows = []
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        if getattr(node.target, "__name__", "") == "executorch_call_delegate":
            continue
        first = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
        source = "graph input" if first is not None and first.op == "placeholder" else "computed"
        name = _operator_name(node.target)
        reason = next((reasons[n] for n in [node.name, *_provenance(node)] if n in reasons), "")
        rows.append(
            {
                "operator": name,
                "takes": f"{source} {_value_text(first.meta.get('val')) if first is not None else ''}".strip(),
                "gives": _value_text(node.meta.get("val")),
                "why not in XNNPACK": reason or ("" if name in configured else NO_CONFIG),
            }
        )
    table = pd.DataFrame(rows, columns=["operator", "takes", "gives", "why not in XNNPACK"])
    return table.value_counts(sort=False).rename("nodes").reset_index()


def _provenance(node: torch.fx.Node) -> list[str]:
    """Names of the nodes this one was made from, through every pass that recorded it."""
    names, stack = [], list(node.meta.get("from_node") or [])
    while stack:
        source = stack.pop()
        names.append(source.name)
        stack.extend(getattr(source, "from_node", None) or [])
    return names


def _value_text(value: Any) -> str:
    """A node's value as a reader wants it: shape and dtype of a tensor, "int" for a symbolic size."""
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    if isinstance(value, torch.SymInt):
        return "int"
    return type(value).__name__


def _operator_name(target: Any) -> str:
    """``aten.view_copy.default`` -> ``view_copy``: the operator without namespace and overload."""
    parts = getattr(target, "__name__", str(target)).split(".")
    return parts[-2] if len(parts) >= 2 else parts[0]


def runtime_threads() -> int:
    """The size of the ExecuTorch runtime's thread pool, on which XNNPACK runs.

    The runtime sizes it from the machine's cores. It can be resized (``_unsafe_reset_threadpool``),
    but doing so inside a Jupyter kernel killed the kernel here, so the book compares at this size.
    """
    with _without_cpuinfo_lines():  # the first call into the runtime detects the CPU
        return _executorch().threadpool_get_thread_count()


class ExecuTorchProgram:
    """A ``.pte`` loaded with the ExecuTorch runtime; calling it runs ``forward`` on tensors."""

    def __init__(self, path: str | os.PathLike[str]):
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no .pte file at {path}: write one with XnnpackLowering.save(path)")
        self.path = path
        with _without_cpuinfo_lines():  # the runtime detects the CPU when it loads its first program
            self.method = _executorch().Runtime.get().load_program(path).load_method("forward")

    def __call__(self, *tensors: torch.Tensor) -> list[torch.Tensor]:
        return list(self.method.execute([t.contiguous() for t in tensors]))


def write_pte(
    program: torch.export.ExportedProgram, path: Path, args: Any = None, settings: Any = None
) -> None:
    """`lower_to_xnnpack`, saved to ``path`` (the backend registry's write)."""
    lower_to_xnnpack(program).save(path)


def load_pte(path: Path, device: Any = None, settings: Any = None) -> ExecuTorchProgram:
    """The ``.pte`` in the ExecuTorch runtime (the backend registry's load)."""
    return ExecuTorchProgram(path)


def load_pte_as_given(
    path: Path, device: Any = None, settings: Any = None
) -> Callable[..., list[torch.Tensor]]:
    """The ``.pte``'s ``forward`` called as the runtime is, with the tensors as given (no ``.contiguous()``
    on the way in, unlike `ExecuTorchProgram`): what a service that calls the runtime itself gets."""
    from executorch.runtime import Runtime  # the runtime alone, as a service imports it

    method = Runtime.get().load_program(str(path)).load_method("forward")
    return lambda *tensors: list(method.execute(list(tensors)))


def pte_tie(path: Path, loaded: Any = None) -> str:
    """The file format a ``.pte`` declares (its bytes 4 to 8) and the runtime version that read it."""
    return f"file format {Path(path).read_bytes()[4:8].decode()}, read by executorch {importlib.metadata.version('executorch')}"


class BackboneOnExecuTorch(torch.nn.Module):
    """Stands in for a torchvision detector's ``backbone``: runs the ``.pte`` and returns the same dict."""

    def __init__(self, program: ExecuTorchProgram, feature_names: Sequence[str]):
        super().__init__()
        self.program, self.feature_names = program, list(feature_names)

    def forward(self, images: torch.Tensor) -> OrderedDict[str, torch.Tensor]:
        features = self.program(images)
        if len(features) != len(self.feature_names):
            raise RuntimeError(
                f"the .pte returned {len(features)} feature maps, the detector expects {self.feature_names}"
            )
        return OrderedDict(zip(self.feature_names, features, strict=True))


@contextlib.contextmanager
def backbone_replaced(model: torch.nn.Module, backbone: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Run ``model`` with ``backbone`` in place of its own; the original is restored on exit."""
    original = model.backbone
    model.backbone = backbone
    try:
        yield model
    finally:
        model.backbone = original


def error_code_names() -> dict[int, str]:
    """ExecuTorch's error codes by number (``0x12``: ``InvalidArgument``), read from its installed header.

    The Python runtime reports a failed call as "failed with error 0x12"; the name is in
    ``runtime/core/error.h``, which the wheel ships.
    """
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("executorch is not installed: `make build` installs the pinned version")
    root = Path(next(iter(spec.submodule_search_locations)))
    header = root / "include" / "executorch" / "runtime" / "core" / "error.h"
    if not header.is_file():
        raise FileNotFoundError(f"no {header}: this executorch wheel does not ship its C++ headers")
    found = re.findall(r"^\s*(\w+)\s*=\s*(0x[0-9a-fA-F]+)\s*,", header.read_text(), flags=re.MULTILINE)
    return {int(code, 16): name for name, code in found}
