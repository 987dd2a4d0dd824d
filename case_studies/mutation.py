"""In-place mutation in exported programs: where it happens, and whether it matches eager.

`torch.export` keeps in-place operators (``fill_``, ``add_``, ``copy_``, ``index_put_``) in the
training IR it returns; `run_decompositions()` rewrites them into functional operators and
records every write that must survive the call (to a user input or a buffer) as an extra graph
output in the `graph_signature`. These helpers make both visible and check that a program that
mutates state behaves like the eager model, call after call.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

import torch

from case_studies.parity import ParityResult, compare_outputs


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


def _clone_args(args: tuple) -> tuple:
    return tuple(arg.clone() if isinstance(arg, torch.Tensor) else copy.deepcopy(arg) for arg in args)


def assert_mutation_parity(
    reference: torch.nn.Module,
    candidate: torch.nn.Module,
    inputs: Iterable,
    *,
    state: Sequence[str] = (),
    rtol: float | None = None,
    atol: float | None = None,
) -> ParityResult:
    """Run both modules on the same inputs, one call after another, and compare what they change.

    After every call this compares the outputs, every argument (an in-place write to a user
    input must happen in both), and each buffer named in `state` (e.g. a counter or a cache that
    the forward updates). Each side gets its own copy of the arguments. The calls are made in
    order, so state that accumulates over calls is compared too; give each side its own module
    instance (the exported program shares buffer memory with the model it was exported from).
    """
    checked = leaves = 0
    worst = 0.0
    with torch.no_grad():
        for args in inputs:
            args = args if isinstance(args, tuple) else (args,)
            ref_args, cand_args = _clone_args(args), _clone_args(args)
            expected = (reference(*ref_args), ref_args, [reference.get_buffer(n) for n in state])
            actual = (candidate(*cand_args), cand_args, [candidate.get_buffer(n) for n in state])
            n, diff = compare_outputs(expected, actual, rtol=rtol, atol=atol)
            checked, leaves, worst = checked + 1, leaves + n, max(worst, diff)
    if checked == 0:
        raise ValueError("assert_mutation_parity needs at least one input")
    return ParityResult(checked, leaves, worst)
