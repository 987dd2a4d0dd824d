"""An exported program that checks its inputs before it runs, and says what is wrong in words.

An `ExportedProgram` checks the sizes of its inputs against the ranges export derived, but says so
as ``Guard failed: images[0].size()[1] >= 129``; it rejects a different number of inputs with
``Trying to flatten user inputs with exported input tree spec``; and it does not check dtypes at
all (a ``uint8`` image runs). `CheckedProgram` reads what the program was exported for (the input
structure, each tensor's dtype, and each dimension's size or range) from the program itself and
checks a call against it first, raising `TypeError` (wrong dtype or container) or `ValueError`
(wrong count or size) with the input's name, what the program accepts, and what to do. Model
specific checks (such as the ones a model runs in Python and export traces away) run before those.
The same checks can guard any route compiled from the program (``run=``): an AOTInductor package
checks nothing by default, and ONNX Runtime does not check the exported range.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree

from .introspect import symbol_range

__all__ = ["CheckedProgram", "DimContract", "TensorContract", "input_contract"]


@dataclass(frozen=True)
class DimContract:
    """One dimension: a fixed size, or a symbol with the range export derived (high None: no bound)."""

    size: int | None
    symbol: str = ""
    low: int = 0
    high: int | None = None

    def accepts(self, value: int) -> bool:
        if self.size is not None:
            return value == self.size
        return value >= self.low and (self.high is None or value <= self.high)

    def describe(self) -> str:
        if self.size is not None:
            return f"exactly {self.size}"
        return f"{self.low} to {self.high}" if self.high is not None else f"{self.low} or more"


@dataclass(frozen=True)
class TensorContract:
    """A tensor input as the program was exported for it."""

    name: str  # as the reader writes it, e.g. "images[0]"
    dtype: torch.dtype
    dims: tuple[DimContract, ...]

    def shape_text(self) -> str:
        parts = [str(d.size) if d.size is not None else f"{d.low}..{d.high or '∞'}" for d in self.dims]
        return "(" + ", ".join(parts) + ")"


def input_contract(
    program: torch.export.ExportedProgram, parameters: Sequence[str] | None = None
) -> tuple[pytree.TreeSpec, list[TensorContract | None]]:
    """The input structure of ``program`` and, per leaf, its tensor contract (None: not a tensor).

    ``parameters`` are the names of the positional arguments; read from ``program.module()``'s
    signature when not given (which unlifts the program: pass them if you already hold the module).
    """
    spec = program.call_spec.in_spec
    if spec is None:
        raise ValueError("the program has no input spec; was it exported with torch.export.export?")
    if parameters is None:
        parameters = _parameters(program.module())
    names = _leaf_names(spec, parameters)
    user_inputs = set(program.graph_signature.user_inputs)
    values = [
        node.meta.get("val")
        for node in program.graph.nodes
        if node.op == "placeholder" and node.name in user_inputs
    ]
    if len(values) != len(names):
        raise ValueError(
            f"the program has {len(values)} user inputs but its input spec has {len(names)} leaves"
        )
    contracts: list[TensorContract | None] = []
    for name, value in zip(names, values, strict=True):
        if not isinstance(value, torch.Tensor):
            contracts.append(None)  # a Python number or None: the program checks it by equality
            continue
        dims = tuple(_dim_contract(size, program) for size in value.shape)
        contracts.append(TensorContract(name, value.dtype, dims))
    return spec, contracts


class CheckedProgram:
    """Call an exported program after checking the call against what it was exported for.

    ``checks`` are callables run first with the call's arguments, for checks of the model's own
    that export traced away (each raises its own error). ``what_to_do`` is appended to every size
    and dtype message (e.g. "Resize the image to fit."). Accepts a loaded program as well.

    ``run`` is what a call that passes the checks runs: by default ``program.module()``; any other
    route compiled from the same program (an AOTInductor package, an ExecuTorch or ONNX Runtime
    session) gets the program's checks this way. ``contiguous_only`` also refuses tensors whose
    memory is not laid out as the export example's was (a transposed view, channels-last): runtimes
    that read an input's memory as contiguous return other values for them.
    """

    def __init__(
        self,
        program: torch.export.ExportedProgram,
        *checks: Callable[..., Any],
        what_to_do: str = "",
        run: Callable[..., Any] | None = None,
        contiguous_only: bool = False,
    ):
        if run is not None and not callable(run):
            raise TypeError(f"run must be callable (a loaded package or session), got {type(run).__name__}")
        self.program = program
        self.module = program.module()
        self.run = run if run is not None else self.module
        self.checks = checks
        self.what_to_do = what_to_do
        self.contiguous_only = contiguous_only
        self.parameters = _parameters(self.module)
        self.spec, self.contracts = input_contract(program, self.parameters)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for check in self.checks:
            check(*args, **kwargs)
        self.check(*args, **kwargs)
        return self.run(*args, **kwargs)

    def check(self, *args: Any, **kwargs: Any) -> None:
        """Raise `TypeError` or `ValueError` naming what in the call the program does not accept."""
        self._check_arguments(args, kwargs)
        args_spec, kwargs_spec = self.spec.children()
        for name, spec, value in zip(self.parameters, args_spec.children(), args, strict=False):
            _check_structure(spec, value, name)
        keywords = list(kwargs_spec.context)
        for key, spec in zip(keywords, kwargs_spec.children(), strict=True):
            _check_structure(spec, kwargs[key], key)
        # Leaves in the order the program was exported with, whatever order the keywords came in.
        leaves = pytree.tree_leaves((args, {key: kwargs[key] for key in keywords}))
        seen: dict[str, tuple[str, int]] = {}  # symbol -> where it was first seen, and its value
        for contract, leaf in zip(self.contracts, leaves, strict=True):
            if contract is not None:
                self._check_tensor(contract, leaf, seen)

    def _check_arguments(self, args: tuple, kwargs: dict) -> None:
        args_spec, kwargs_spec = self.spec.children()
        expected_keywords = list(kwargs_spec.context)
        if len(args) == args_spec.num_children and sorted(kwargs) == sorted(expected_keywords):
            return
        names = self.parameters[: args_spec.num_children]
        takes = f"{args_spec.num_children} positional argument(s) ({', '.join(names)})"
        if expected_keywords:
            takes += f" and keyword arguments {expected_keywords}"
        got = f"{len(args)} positional" + (f" and keyword arguments {list(kwargs)}" if kwargs else "")
        raise TypeError(
            f"the program takes {takes}, got {got}. Pass the inputs the way they were passed to "
            "torch.export.export: an exported program binds them by position and keyword as traced."
        )

    def _check_tensor(self, contract: TensorContract, value: Any, seen: dict[str, tuple[str, int]]) -> None:
        name, advice = contract.name, f" {self.what_to_do}" if self.what_to_do else ""
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(value).__name__}")
        if value.dtype != contract.dtype:
            raise TypeError(
                f"{name} is {value.dtype}; the program was exported for {contract.dtype} and does not "
                f"check dtypes itself. Convert it first.{advice}"
            )
        if value.dim() != len(contract.dims):
            raise ValueError(
                f"{name} has shape {tuple(value.shape)}, {value.dim()} dimensions; the program takes "
                f"{len(contract.dims)}: {contract.shape_text()}.{advice}"
            )
        for index, (dim, size) in enumerate(zip(contract.dims, value.shape, strict=True)):
            where = f"{name}.shape[{index}]"
            if not dim.accepts(size):
                origin = "" if dim.size is not None else " (the range export derived)"
                raise ValueError(
                    f"{where} is {size}; the program accepts {dim.describe()}{origin}. "
                    f"Shape {tuple(value.shape)}, accepted {contract.shape_text()}.{advice}"
                )
            if dim.symbol:
                first = seen.setdefault(dim.symbol, (where, size))
                if first[1] != size:
                    raise ValueError(
                        f"{where} is {size} but {first[0]} is {first[1]}; the program was exported with "
                        f"these two sizes equal.{advice}"
                    )
        if self.contiguous_only and not value.is_contiguous():
            layout = (
                "channels-last"
                if value.is_contiguous(memory_format=torch.channels_last)
                else "not contiguous"
            )
            raise ValueError(
                f"{name} is {layout} (strides {value.stride()}); the compiled program reads its memory "
                f"as contiguous and would return other values. Pass {name}.contiguous().{advice}"
            )


def _dim_contract(size: int | torch.SymInt, program: torch.export.ExportedProgram) -> DimContract:
    if isinstance(size, int):
        return DimContract(size=size)
    expr = size.node.expr
    if isinstance(expr, sympy.Integer):
        return DimContract(size=int(expr))
    if not isinstance(expr, sympy.Symbol):
        # e.g. 2*s0: the range of the expression is the program's own business; check only >= 0
        return DimContract(size=None, symbol="", low=0, high=None)
    low, high = symbol_range(program, expr) or (0, None)
    return DimContract(size=None, symbol=str(expr), low=low or 0, high=high)


def _parameters(module: torch.nn.Module) -> list[str]:
    return list(inspect.signature(module.forward).parameters)


def _leaf_names(spec: pytree.TreeSpec, parameters: Sequence[str]) -> list[str]:
    """Each leaf's name as the reader writes it: ``images[0]``, ``x``, ``boxes['scores']``."""
    placeholder = pytree.tree_unflatten([None] * spec.num_leaves, spec)
    names = []
    for path, _ in pytree.tree_flatten_with_path(placeholder)[0]:
        (group, *rest) = path
        if group.idx == 0 and rest:  # positional arguments
            position = rest[0].idx
            head = parameters[position] if position < len(parameters) else f"args[{position}]"
            names.append(head + pytree.keystr(tuple(rest[1:])))
        else:  # keyword arguments: the key is the name
            names.append(pytree.keystr(tuple(rest)).removeprefix("['").replace("']", "", 1))
    return names


def _describe_spec(spec: pytree.TreeSpec) -> str:
    if spec.is_leaf():
        return "a tensor or value"
    kind = spec.type.__name__
    if spec.type in (list, tuple):
        return f"a {kind} of {spec.num_children}"
    if spec.type is dict:
        return f"a dict with keys {list(spec.context)}"
    return f"a {kind}"


def _describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, list | tuple):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, dict):
        return f"a dict with keys {list(value)}"
    return f"a {type(value).__name__}"


def _check_structure(spec: pytree.TreeSpec, value: Any, path: str) -> None:
    """Compare one argument (named ``path``) with its exported spec; raise at the first difference."""
    if spec.is_leaf():
        if not pytree.tree_flatten(value)[1].is_leaf():
            raise TypeError(f"{path} must be a single tensor or value, got {_describe_value(value)}")
        return
    children, context = _flatten_one_level(value)
    matches = type(value) is spec.type and len(children) == spec.num_children and context == spec.context
    if not matches:
        count_note = (
            " The number of elements is fixed when the program is exported: export again with the "
            "count you need, or call the program once per element."
            if type(value) is spec.type and spec.type in (list, tuple)
            else ""
        )
        raise (ValueError if type(value) is spec.type else TypeError)(
            f"{path} must be {_describe_spec(spec)}, got {_describe_value(value)}.{count_note}"
        )
    for index, (child_spec, child) in enumerate(zip(spec.children(), children, strict=True)):
        child_path = f"{path}[{context[index]!r}]" if spec.type is dict else f"{path}[{index}]"
        _check_structure(child_spec, child, child_path)


def _flatten_one_level(value: Any) -> tuple[list[Any], Any]:
    node = pytree.SUPPORTED_NODES.get(type(value))
    if node is None:
        return [], None
    children, context = node.flatten_fn(value)
    return list(children), context
