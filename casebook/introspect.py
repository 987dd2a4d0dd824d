"""Read-only views of an ExportedProgram (and of what export said), for showing on a page.

- `runtime_asserts`: the checks export left in the graph for facts it could not prove while tracing.
- `symbol_range`: the range the program gives a symbolic size, None where an end has no bound.
- `user_input_shapes`: the shapes (with their symbols, `s0`, `4*s1`) the user inputs were traced with.
- `suggested_fixes`: the "Suggested fixes:" block of a constraint-violation message.
- `signature_rows` and `mutations`: what the graph signature maps to what, and every in-place write.
  `torch.export` keeps in-place operators (``fill_``, ``add_``, ``copy_``, ``index_put_``) in the
  training IR it returns; `run_decompositions()` rewrites them into functional operators and records
  every write that must survive the call (to a user input or a buffer) as an extra graph output in
  the `graph_signature`.
"""

from __future__ import annotations

import sympy
import torch
from torch.utils._sympy.numbers import int_oo

# Nodes through which an exported graph checks, at run time, what export assumed about a value.
_RANGE_TARGETS = (
    torch.ops.aten.sym_constrain_range_for_size.default,
    torch.ops.aten.sym_constrain_range.default,
)


def runtime_asserts(program) -> list[str]:
    """One line per runtime check in the graph of `program` (an ExportedProgram or GraphModule).

    An `aten._assert_scalar` node is shown by its message, which names the symbolic expression it
    checks (e.g. "Runtime assertion failed for expression u0 >= 0 on node 'ge'"). Subgraphs (the
    branches of `torch.cond`) are not searched.
    """
    lines = []
    for node in program.graph.nodes:
        if node.target is torch.ops.aten._assert_scalar.default:
            lines.append(str(node.args[1]))
        elif node.target in _RANGE_TARGETS:
            bounds = ", ".join(f"{key}={value}" for key, value in node.kwargs.items())
            lines.append(f"{node.target}({node.args[0]}, {bounds})")
    return lines


def symbol_range(
    program: torch.export.ExportedProgram, size: torch.SymInt | sympy.Expr | str
) -> tuple[int | None, int | None] | None:
    """The range ``program.range_constraints`` gives one symbolic size: ``(low, high)``, an end with no
    bound (``int_oo``, ``oo``) as None. ``size``: a SymInt from the program's metadata, its sympy
    symbol, or the symbol's name ("s0", "u3"). None when the program has no range for it (an
    expression such as ``2*s0``, or a symbol it does not constrain)."""
    if isinstance(size, torch.SymInt):
        size = size.node.expr
    ranges = {str(symbol): bounds for symbol, bounds in program.range_constraints.items()}
    bounds = ranges.get(str(size))
    if bounds is None:
        return None

    def end(value) -> int | None:
        return None if value in (int_oo, -int_oo, sympy.oo, -sympy.oo) else int(value)

    return end(bounds.lower), end(bounds.upper)


def user_input_shapes(program: torch.export.ExportedProgram) -> dict[str, str]:
    """`{placeholder name: traced shape}` for the user inputs of an exported program.

    Shapes are printed as export recorded them, so a dynamic dimension shows up as its symbol
    (`s77`, `4*s16`) and a static one as a number.
    """
    user_inputs = set(program.graph_signature.user_inputs)
    shapes = {}
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in user_inputs:
            value = node.meta.get("val")
            if isinstance(value, torch.Tensor):
                shapes[node.name] = "[" + ", ".join(str(size) for size in value.shape) + "]"
            else:
                shapes[node.name] = repr(value)
    return shapes


def suggested_fixes(message: str) -> list[str]:
    """The lines of the "Suggested fixes:" block of an export constraint-violation message.

    Export ends such messages with a block of Python-like assignments (`batch = 1`,
    `_h = Dim('_h', min=8, max=128)`, `h = 4*_h`) that, applied to `dynamic_shapes`, make the
    export succeed. Returns `[]` when the message has no such block.
    """
    if "Suggested fixes:" not in message:
        return []
    block = message.split("Suggested fixes:", 1)[1]
    lines = []
    for line in block.splitlines():
        stripped = line.strip()
        if not stripped:
            if lines:
                break
            continue
        if not line.startswith((" ", "\t")):
            break
        lines.append(stripped)
    return lines


def signature_rows(program: torch.export.ExportedProgram) -> list[dict[str, str]]:
    """One row per graph input and output: which placeholder or output feeds what.

    Columns: ``side`` ("input" or "output"), ``kind`` (e.g. USER_INPUT, CONSTANT_TENSOR,
    BUFFER_MUTATION), ``graph name`` and ``target`` (the attribute or input it refers to).
    """
    signature = program.graph_signature
    rows = []
    for side, specs in (("input", signature.input_specs), ("output", signature.output_specs)):
        for spec in specs:
            rows.append(
                {
                    "side": side,
                    "kind": spec.kind.name,
                    "graph name": getattr(spec.arg, "name", str(spec.arg)),
                    "target": spec.target or "",
                }
            )
    return rows


def _written_arguments(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The node arguments an operator writes to, according to its schema (``Tensor(a!)``)."""
    schema = node.target._schema
    written = []
    for position, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = node.args[position] if position < len(node.args) else node.kwargs.get(argument.name)
        if isinstance(value, torch.fx.Node):
            written.append(value)
    return written


def _aliases_its_input(node: torch.fx.Node) -> bool:
    """Whether the node's output shares memory with its first argument.

    View operators (select, slice, view, ...) and in-place metadata operators (``detach_``) always
    do. ``aten.to`` only *may* alias: it returns
    its input unchanged when neither dtype nor device changes and ``copy=True`` is not given.
    """
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    if not (target.is_view or torch.Tag.inplace_view in target.tags):  # e.g. detach_ returns its input
        return False
    if not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    if target.overloadpacket is torch.ops.aten.to:
        if node.kwargs.get("copy", False):
            return False
        before, after = node.args[0].meta.get("val"), node.meta.get("val")
        if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor):
            return before.dtype == after.dtype and before.device == after.device
    return True


def _storage_root(node: torch.fx.Node) -> torch.fx.Node:
    """Follow aliasing operators back to the tensor that owns the memory."""
    while _aliases_its_input(node):
        node = node.args[0]
    return node


def _user_line(node: torch.fx.Node) -> str:
    """The last line of the node's stack trace: the model code that produced it."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.splitlines()]
    # Python 3.11+ underlines the failing expression with a line of ^ and ~: skip it.
    code = [line for line in lines if line and set(line) - set("^~ ")]
    return code[-1] if code else ""


def mutations(program: torch.export.ExportedProgram) -> list[dict[str, str]]:
    """Every in-place operator in the graph and the tensor whose memory it writes.

    Columns: ``node``, ``op`` (the ATen overload), ``writes into`` (the graph value that owns the
    memory, after following views), ``kind`` and ``target`` (from the graph signature when that
    value is a graph input, e.g. CONSTANT_TENSOR ``ids``; "intermediate" for a tensor created in
    the graph) and ``code`` (the model line that did it).
    """
    kinds = {spec.arg.name: spec for spec in program.graph_signature.input_specs if hasattr(spec.arg, "name")}
    rows = []
    for node in program.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if not node.target._schema.is_mutable or torch.Tag.inplace_view in node.target.tags:
            continue  # not a write, or a metadata-only in-place op such as detach_
        for written in _written_arguments(node):
            root = _storage_root(written)
            spec = kinds.get(root.name)
            rows.append(
                {
                    "node": node.name,
                    "op": str(node.target),
                    "writes into": root.name,
                    "kind": spec.kind.name if spec is not None else "intermediate",
                    "target": (spec.target or "") if spec is not None else "",
                    "code": _user_line(node),
                }
            )
    return rows
