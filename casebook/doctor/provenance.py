"""Where a value known only at run time came from: a tensor's values, or sizes packed into a tensor.

One message, "Could not extract specialized integer from data-dependent expression u0", has two
causes with different fixes. ``int(count.max())`` reads a *value* of an input: no Python int can stand
for it, so the code must keep it a tensor or bound it (`torch._check`). ``int(spatial_shapes[0, 0])``
reads a *size* that was packed into a tensor: keep it a Python int and the error disappears.

`draft_export` gets past the error and records the read in its graph (an ``aten.item`` node at the
failing line). Following that node's data inputs back to the program's inputs tells the two apart: a
path to an input, a parameter or a buffer means values; a path that ends in constants, or reaches an
input only through its size (``aten.sym_size``), means sizes.
"""

from __future__ import annotations

import re
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
            read = ", ".join(f"`{name}`" for name in self.inputs)
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
