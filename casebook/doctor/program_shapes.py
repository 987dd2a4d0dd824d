"""Checks on an exported program that no exception reports.

- `requested_dims` / `dimension_results`: each dimension the reader asked to be dynamic, and what the
  program made of it: a symbol with a range, or a constant (export "succeeded", yet the program
  rejects every other size).
- `size_asserts`: the runtime asserts export left on sizes known only at run time (``u0 >= 2``),
  with the operator that produces each size and the line that called it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree
from torch.export.dynamic_shapes import Dim, _combine_args, _DimHint, _DimHintType, _tree_map_with_path

from ..introspect import symbol_range
from .frames import Frame, message_frames


@dataclass(frozen=True)
class RequestedDim:
    """A dimension the reader asked to be dynamic: where it is and how it was declared."""

    name: str  # the input as the reader writes it, e.g. "images[0]"
    source: str  # the same as export names it in messages, e.g. "L['images'][0].size()[1]"
    leaf: int  # position of the tensor among the flattened (args, kwargs)
    dim: int
    spec: str  # "Dim.AUTO", "Dim('h', min=64, max=1024)"
    example_size: int

    @property
    def label(self) -> str:
        return f"{self.name}.shape[{self.dim}]"


@dataclass(frozen=True)
class DimResult:
    """What the program made of a requested dimension: a symbol and its range, or a constant."""

    requested: RequestedDim
    static_size: int | None  # the constant, when the dimension was specialized
    symbol: str = ""
    value_range: str = ""
    lower_bound: int | None = None  # the range's smallest size, when the dimension is a symbol


def _spec_text(spec: Any) -> str:
    if isinstance(spec, _DimHint):
        return f"Dim.{spec.type.name}"
    if isinstance(spec, Dim):
        bounds = [f"min={spec.min}"] if spec.min not in (0, 1, 2) else []
        bounds += [f"max={spec.max}"] if spec.max < 2**62 else []
        return f"Dim({spec.__name__!r}{''.join(', ' + b for b in bounds)})"
    return repr(spec)


def _asks_dynamic(spec: Any) -> bool:
    if isinstance(spec, _DimHint):
        return spec.type in (_DimHintType.AUTO, _DimHintType.DYNAMIC)
    return isinstance(spec, Dim)


def map_dim_specs(model, args: tuple, kwargs: dict, dynamic_shapes, function: Callable):
    """Walk `dynamic_shapes` along the inputs it describes, the way torch.export pairs them, and
    return it rebuilt from what `function` returns.

    `function(name, leaf, tensor, spec)` is called for every tensor input with a spec: ``name`` is
    the input as the reader writes it (``images[0]``), ``leaf`` its position among the flattened
    (args, kwargs) (the order of the program's user inputs). Other inputs keep their spec.
    """
    combined = _combine_args(model, args, kwargs)
    dynamic_shapes = _grouped_var_kwargs(model, combined, dynamic_shapes)
    names = list(combined)
    tree = type(dynamic_shapes)(combined.values()) if isinstance(dynamic_shapes, tuple | list) else combined
    leaves = {id(leaf): index for index, leaf in enumerate(pytree.tree_leaves((args, kwargs)))}

    def visit(path, value, spec):
        if not isinstance(value, torch.Tensor) or spec is None:
            return spec
        first = path[0]
        top = names[first.idx] if isinstance(first, pytree.SequenceKey) else first.key
        return function(f"{top}{pytree.keystr(path[1:])}", leaves.get(id(value), -1), value, spec)

    return _tree_map_with_path(visit, tree, dynamic_shapes, tree_name="inputs")


def _grouped_var_kwargs(model, combined: dict, dynamic_shapes):
    """A dict spec that names the entries of ``**kwargs`` by their own keys (``"z"``), as torch.export
    accepts, regrouped under the parameter's name (``"kwargs"``), as the inputs are."""
    if not isinstance(dynamic_shapes, dict):
        return dynamic_shapes
    parameters = inspect.signature(model.forward if isinstance(model, torch.nn.Module) else model).parameters
    var_keyword = next((p.name for p in parameters.values() if p.kind == p.VAR_KEYWORD), None)
    if var_keyword is None or var_keyword in dynamic_shapes or var_keyword not in combined:
        return dynamic_shapes
    grouped = {key: spec for key, spec in dynamic_shapes.items() if key in combined[var_keyword]}
    rest = {key: spec for key, spec in dynamic_shapes.items() if key not in grouped}
    return {**rest, var_keyword: grouped} if grouped else dynamic_shapes


def dim_items(spec) -> list[tuple[int, Any]]:
    """(dimension, spec) pairs of one tensor's spec: a dict by dimension, or a tuple/list in order."""
    return list(spec.items() if isinstance(spec, dict) else enumerate(spec))


def source_name(name: str, dim: int) -> str:
    """How export names a dimension in its messages and logs: ``L['images'][0].size()[1]``."""
    top, bracket, inner = name.partition("[")
    return f"L['{top}']{bracket}{inner}.size()[{dim}]"


def requested_dims(model, args: tuple, kwargs: dict, dynamic_shapes) -> list[RequestedDim]:
    """Every dimension `dynamic_shapes` asks to be dynamic (named `Dim`, `Dim.AUTO`, `Dim.DYNAMIC`)."""
    if not dynamic_shapes:
        return []
    found: list[RequestedDim] = []

    def record(name, leaf, tensor, spec):
        if tensor.dim() > 0:
            found.extend(
                RequestedDim(
                    name=name,
                    source=source_name(name, dim),
                    leaf=leaf,
                    dim=dim,
                    spec=_spec_text(dim_spec),
                    example_size=int(tensor.shape[dim]),
                )
                for dim, dim_spec in dim_items(spec)
                if _asks_dynamic(dim_spec)
            )
        return spec

    map_dim_specs(model, args, kwargs, dynamic_shapes, record)
    return found


def range_text(lower: int | None, upper: int | None) -> str:
    """A symbol's range as the doctor prints it: "[2, 40]", "[2, ∞]" when it has no upper end."""
    return f"[{lower}, {'∞' if upper is None else upper}]"


def dimension_results(
    program: torch.export.ExportedProgram, requested: list[RequestedDim]
) -> list[DimResult]:
    """For each requested dimension: the constant the program fixed it to, or its symbol and range."""
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    user_inputs = list(program.graph_signature.user_inputs)
    results = []
    for want in requested:
        if not 0 <= want.leaf < len(user_inputs):
            continue
        value = placeholders[user_inputs[want.leaf]].meta.get("val")
        if not isinstance(value, torch.Tensor):
            continue
        size = value.shape[want.dim]
        if isinstance(size, torch.SymInt) and size.node.expr.is_number:  # replaced by a constant
            size = int(size.node.expr)
        if isinstance(size, torch.SymInt):
            symbol = str(size.node.expr)
            bounds = symbol_range(program, symbol)
            lower, upper = bounds or (None, None)
            text = range_text(lower, upper) if bounds is not None else ""
            results.append(DimResult(want, None, symbol, text, lower))
        else:
            results.append(DimResult(want, int(size)))
    return results


@dataclass(frozen=True)
class SizeAssert:
    """A runtime assert on a size known only at run time, with the operator that produced it."""

    expression: str  # "u7 >= 2"
    lower_bound: int | None  # the smallest size the assert accepts, when it is a lower bound
    operator: str  # "torchvision.nms.default"
    frame: Frame | None  # the line that called the operator

    @property
    def from_library_kernel(self) -> bool:
        """The size comes from an operator outside ATen (torchvision's `nms`, a custom op), whose fake
        kernel chose the bound; ATen's own kernels allow empty results."""
        return not self.operator.startswith("aten.")

    def __str__(self) -> str:
        where = f" at {self.frame.location}" if self.frame else ""
        return f"{self.expression} (size produced by {self.operator}{where})"


def _lower_bound(expr: Any) -> tuple[sympy.Symbol, int] | None:
    """(symbol, smallest allowed value) for ``u >= c``, ``u > c``, ``c <= u``, ``c < u``."""
    if not isinstance(expr, sympy.core.relational.Relational):
        return None
    lhs, rhs = expr.lhs, expr.rhs
    if isinstance(expr, sympy.GreaterThan | sympy.StrictGreaterThan):
        symbol, constant, strict = lhs, rhs, isinstance(expr, sympy.StrictGreaterThan)
    elif isinstance(expr, sympy.LessThan | sympy.StrictLessThan):
        symbol, constant, strict = rhs, lhs, isinstance(expr, sympy.StrictLessThan)
    else:
        return None
    if not isinstance(symbol, sympy.Symbol) or not constant.is_Integer:
        return None
    return symbol, int(constant) + int(strict)


def size_asserts(program: torch.export.ExportedProgram) -> list[SizeAssert]:
    """Every ``_assert_scalar`` in the graph about an unbacked size (``u0``), with its producer."""
    producers: dict[str, torch.fx.Node] = {}
    for node in program.graph.nodes:
        for symbol in (node.meta.get("unbacked_bindings") or {}).keys():
            producers[str(symbol)] = node
    asserts = []
    for node in program.graph.nodes:
        if node.target is not torch.ops.aten._assert_scalar.default:
            continue
        value = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
        expr = getattr(getattr(value, "node", None), "expr", None)
        if expr is None:
            continue
        symbols = [str(s) for s in expr.free_symbols if str(s).startswith("u")]
        producer = producers.get(symbols[0]) if len(symbols) == 1 else None
        if producer is None:
            continue
        bound = _lower_bound(expr)
        frames = message_frames(producer.meta.get("stack_trace") or "")
        asserts.append(
            SizeAssert(
                expression=str(expr),
                lower_bound=bound[1] if bound else None,
                operator=str(producer.target),
                frame=frames[0] if frames else None,
            )
        )
    return asserts
