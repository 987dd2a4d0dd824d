"""Run the program at a size of each dynamic dimension that the example does not have.

A dimension can be a symbol with the full range in the program and still accept one size only: code
that turned the size into a Python number (`int(x.shape[-2] / 2)`) leaves a guard on the example's
value (`math.trunc(x.size()[2] / 2) == 16`), and nothing in the range says so. The doctor runs eager
and the program with each dynamic size half again the example's (as much smaller at the top of the
range), every input that shares the symbol changed together: where eager runs and the program
refuses, or the two differ, the dimension is not as dynamic as it looks. A derived dimension
(`16*s0`) is tried at the multiple of its symbol's probe size, so the program's own range admits it;
a guard that refuses such a size (`x.size()[2] // 16 == 6`) pins the dimension as `int()` does.
"""

from __future__ import annotations

import sympy
import torch
import torch.utils._pytree as pytree

from .. import catalog
from ..introspect import symbol_range
from ..parity import compare_outputs
from .program_shapes import dimension_results, range_text, requested_dims
from .program_steps import run_on_copies
from .report import EVIDENCE, Finding
from .session import Session, first_line


def _probe_size(example: int, lower: int, upper) -> int | None:
    """A size in [lower, upper], half again the example's (a step of 1 would leave `int(h / 2)`
    unchanged from 32 to 33), or as much smaller at the top of the range; None if neither fits."""
    step = max(1, example // 2)
    if upper is None or example + step <= upper:
        return example + step
    return example - step if example - step >= max(lower, 2) else None


def _resized(tensor: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    """`tensor` with `size` along `dim`: its first slice repeated at the end, or its last one cut."""
    if size <= tensor.shape[dim]:
        return tensor.narrow(dim, 0, size)
    extra = tensor.narrow(dim, 0, size - tensor.shape[dim])
    return torch.cat([tensor, extra], dim)


def _symbol_and_factor(expression: str) -> tuple[str, int] | None:
    """`("s0", 16)` for a dimension the program holds as `16*s0`, `("s0", 1)` for a plain `s0`;
    None for anything else (`s0 + 1`, `2*s0*s1`), which the probe does not try."""
    parsed = sympy.sympify(expression)
    if isinstance(parsed, sympy.Symbol):
        return str(parsed), 1
    factor, rest = parsed.as_coeff_Mul()
    if isinstance(rest, sympy.Symbol) and factor.is_Integer and int(factor) > 1:
        return str(rest), int(factor)
    return None


def check_another_size(session: Session, module, program, args, kwargs, dynamic_shapes) -> None:
    with session.step("another size") as record:
        if not session.ran_clean:
            record.detail = "not tried, the program failed on the example"
            return
        by_symbol: dict[str, list] = {}  # symbol -> [(requested dimension, its multiple of the symbol)]
        for result in dimension_results(program, requested_dims(module, args, kwargs, dynamic_shapes)):
            held = None if result.static_size is not None else _symbol_and_factor(result.symbol)
            if held is not None and symbol_range(program, held[0]) is not None:
                by_symbol.setdefault(held[0], []).append((result.requested, held[1]))
        runnable = program.module() if by_symbol else None  # unlifted once, for every probe
        refused, differ, undecided = [], [], 0  # refused: (label, the range that admits it, error)
        for symbol, wants in by_symbol.items():
            lower, upper = symbol_range(program, symbol)
            first, factor = wants[0]
            value = _probe_size(first.example_size // factor, lower, upper)
            if value is None:
                continue
            values, structure = pytree.tree_flatten((args, kwargs))
            values = list(values)
            for want, multiple in wants:
                values[want.leaf] = _resized(values[want.leaf], want.dim, multiple * value)
            probe_args, probe_kwargs = pytree.tree_unflatten(values, structure)
            label = ", ".join(f"`{want.label}` = {multiple * value}" for want, multiple in wants)
            derived = f"{factor}*{symbol}, " if factor > 1 else ""
            admits = f"{derived}{symbol} in {range_text(lower, upper)}"
            try:
                expected = run_on_copies(module, probe_args, probe_kwargs)
            except Exception:  # the model does not take this size: counted in the step's detail
                undecided += 1
                continue
            try:
                compare_outputs(expected, run_on_copies(runnable, probe_args, probe_kwargs))
            except AssertionError as error:
                if "Guard failed" in str(error):
                    refused.append((label, admits, error))
                else:
                    differ.append(f"at {label}: {first_line(error)}")
            except Exception as error:
                refused.append((label, admits, error))
        record.detail = (
            f"{len(by_symbol)} dynamic size(s) tried at 1.5 times the example's"
            + (f", {len(refused) + len(differ)} not like eager" if refused or differ else "")
            + (f", {undecided} that eager does not take" if undecided else "")
        )
        if refused or differ:
            record.outcome = "failed"
    for label, admits, error in refused:
        finding = session.classified(error, "run", "another size", context=f"at {label}, where eager runs:")
        if finding.kind == "unclassified":
            session.report.notes.append(f"at {label} eager runs and the program raises `{first_line(error)}`")
            continue
        basis = (
            f"the program's range admits {label} ({admits}) and a guard refuses it: "
            "the dimension is held to the example's by code, not by its range"
        )
        # static-dim-guard means a size made static at export; this dimension is a symbol whose range
        # admits the size, and a guard holds it anyway
        if finding.kind == "static-dim-guard":
            finding.reclassify(catalog.entry("size-pinned-by-int"), strength=EVIDENCE, basis=basis)
        elif finding.kind == "size-pinned-by-int":
            finding.strengthen(EVIDENCE, basis)
        session.add(finding)
    if differ:
        session.add(Finding.from_entry(catalog.entry("parity-mismatch"), differ, "parity"))
