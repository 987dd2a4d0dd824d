"""Where a value known only at run time came from: a tensor's values, or sizes packed into a tensor.

One message, "Could not extract specialized integer from data-dependent expression u0", has two
causes with different fixes. ``int(count.max())`` reads a *value* of an input: no Python int can stand
for it, so the code must keep it a tensor or bound it (`torch._check`). ``int(spatial_shapes[0, 0])``
reads a *size* that was packed into a tensor: keep it a Python int and the error disappears.

The read is an ``aten.item`` node: the last node of the graph the failed export had traced, or the
node at the failing line in a program that got past the error (`draft_export`'s, or the other export
mode's, which also names the inputs). Following that node's data inputs back to the graph's inputs
tells the two apart: a path to an input, a parameter or a buffer means values; a path that ends in
constants, or reaches an input only through its size (``aten.sym_size``), means sizes.

`observer_behind` answers a third case of one message, several causes: a branch on a value raised
inside a quantization observer the model still holds.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass

import torch

from .frames import Frame

# The operators that read a tensor's value into a Python number while tracing.
_SCALAR_READS = {"aten.item.default", "aten._local_scalar_dense.default"}
# Operators whose result depends only on their input's shape, not on its values.
_SHAPE_ONLY = {
    "aten.sym_size.int",
    "aten.sym_numel.default",
    "aten.sym_stride.int",
    "aten.sym_storage_offset.default",
}
_STACK_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')

VALUES = "tensor values"
SIZES = "sizes packed into a tensor"


@dataclass(frozen=True)
class Origin:
    """What a scalar read at the failing line reads: ``source`` is VALUES or SIZES; ``inputs`` the
    program inputs (user inputs, parameters, buffers) whose values it depends on."""

    source: str
    op: str
    inputs: tuple[str, ...]

    def evidence(self, frame: Frame) -> str:
        if self.source == VALUES:
            read = ", ".join(name if " " in name else f"`{name}`" for name in self.inputs)
            return f"provenance: {frame.code or frame.location} reads the values of {read} ({self.op})"
        return f"provenance: {frame.code or frame.location} reads sizes packed into a tensor ({self.op})"


def origin_at(program: torch.export.ExportedProgram, frame: Frame) -> Origin | None:
    """The origin of the scalar read `draft_export` recorded at `frame`, or None when the program
    holds no read there (the value came from elsewhere, such as a data-dependent size)."""
    reads = [
        node for node in program.graph.nodes if str(node.target) in _SCALAR_READS and _traced_at(node, frame)
    ]
    if not reads:
        return None
    sources = _program_inputs(program)
    inputs: list[str] = []
    for read in reads:
        for name in _data_inputs(read):
            label = sources.get(name)
            if label is not None and label not in inputs:
                inputs.append(label)
    op = str(reads[0].target).rsplit(".", 1)[0]
    return Origin(VALUES if inputs else SIZES, op, tuple(inputs))


def origin_in_failed_trace(error: BaseException) -> Origin | None:
    """The origin of the read a failed non-strict export stopped at: the last scalar read of the graph
    its tracer had built (the tracer is still a local of the traceback's frames). Its placeholders are
    unnamed, so ``inputs`` says only that the read depends on them."""
    graph = None
    frame = error.__traceback__
    while frame is not None and graph is None:
        candidate = getattr(frame.tb_frame.f_locals.get("tracer"), "graph", None)
        graph = candidate if isinstance(candidate, torch.fx.Graph) else None
        frame = frame.tb_next
    reads = [node for node in graph.nodes if str(node.target) in _SCALAR_READS] if graph is not None else []
    if not reads:
        return None
    op = str(reads[-1].target).rsplit(".", 1)[0]
    if _data_inputs(reads[-1]):
        return Origin(VALUES, op, ("the model's inputs or weights",))
    return Origin(SIZES, op, ())


def _traced_at(node: torch.fx.Node, frame: Frame) -> bool:
    """Whether `frame` (file and line) is on the Python stack recorded for `node`."""
    stack = node.meta.get("stack_trace") or ""
    return any(
        match["path"] == frame.path and int(match["line"]) == frame.line
        for match in _STACK_FRAME.finditer(stack)
    )


def _data_inputs(node: torch.fx.Node) -> set[str]:
    """Names of the placeholders `node` depends on through values (not through a size read)."""
    seen, found, todo = set(), set(), [node]
    while todo:
        current = todo.pop()
        for parent in current.all_input_nodes:
            if parent in seen or str(parent.target) in _SHAPE_ONLY:
                continue
            seen.add(parent)
            if parent.op == "placeholder":
                found.add(parent.name)
            else:
                todo.append(parent)
    return found


def _program_inputs(program: torch.export.ExportedProgram) -> dict[str, str]:
    """Placeholder name -> how a reader names it: the input's name, ``parameter w``, ``buffer b``.
    Lifted constants are left out: their values were known when the program was traced."""
    signature = program.graph_signature
    names = {name: name for name in signature.user_inputs}
    names.update({name: f"parameter {target}" for name, target in signature.inputs_to_parameters.items()})
    names.update({name: f"buffer {target}" for name, target in signature.inputs_to_buffers.items()})
    return names


# Quantization observers of torch.ao (eager and FX quantization) and of torchao's PT2E flow.
_OBSERVER_BASES = {"ObserverBase", "FakeQuantizeBase"}
_OBSERVER_CODE = re.compile(r"quantization[/\\](?:observer|fake_quantize)\.py$|pt2e[/\\]observer\.py$")


def observer_behind(error: BaseException, module: torch.nn.Module) -> str | None:
    """The quantization observer an export error was raised in (``"activation_post_process
    (HistogramObserver)"``), or None: the error's traceback runs through observer code (non-strict),
    or its message names an observer class of the model (strict)."""
    observers = {
        name: type(child).__name__
        for name, child in module.named_modules()
        if _OBSERVER_BASES & {kind.__name__ for kind in type(child).__mro__}
    }
    if not observers:
        return None
    in_observer_code = any(
        _OBSERVER_CODE.search(frame.filename) for frame in traceback.extract_tb(error.__traceback__)
    )
    named = [name for name, kind in observers.items() if f"{kind}.forward" in str(error)]
    if not in_observer_code and not named:
        return None
    name = named[0] if named else next(iter(observers))
    more = f" and {len(observers) - 1} more" if len(observers) > 1 else ""
    return f"`{name}` ({observers[name]}){more}"
