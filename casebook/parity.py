"""Parity: an exported program (or any candidate) computes what eager computes.

Outputs are compared leaf by leaf after pytree flattening, so a fix that changes the output
*structure* (a missing field, a list that became a tuple, an empty result with a different shape)
fails just like one that changes values. `assert_mutation_parity` also compares what each call
writes (arguments and buffers), call after call.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
import torch.utils._pytree as pytree

from casebook.inputs import as_args

# Per-dtype (rtol, atol). None means torch.testing.assert_close's own dtype-based defaults.
Tolerances = Mapping[torch.dtype, tuple[float, float]]

REORDERED_ARITHMETIC: Tolerances = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.complex64: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}
"""(rtol, atol) for a program whose arithmetic was reordered (a compiler that fuses kernels and
reorders reductions, or `run_decompositions` spelling an operator in smaller ones) against the one it
came from: looser than assert_close's defaults, which are meant for the same kernels run again."""


@dataclass(frozen=True)
class ParityResult:
    """How many inputs were checked, the largest absolute difference, and the tolerances applied."""

    inputs_checked: int
    leaves_checked: int
    max_abs_diff: float
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)

    def __str__(self) -> str:
        tols = ", ".join(f"{d}: rtol {r:g}, atol {a:g}" for d, (r, a) in self.tolerances.items())
        return (
            f"parity OK on {self.inputs_checked} input(s), {self.leaves_checked} output tensor(s) compared, "
            f"max |difference| = {self.max_abs_diff:.3g}" + (f" ({tols})" if tols else "")
        )


def _max_abs_diff(expected: torch.Tensor, actual: torch.Tensor) -> float:
    if expected.numel() == 0:
        return 0.0
    if expected.dtype.is_floating_point or expected.dtype.is_complex:
        wide = torch.complex128 if expected.dtype.is_complex else torch.float64
        return (expected.detach().to(wide) - actual.detach().to(expected.device, wide)).abs().max().item()
    return float((expected != actual.to(expected.device)).sum().item())


def compare_outputs(
    expected,
    actual,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    tolerances: Tolerances | None = None,
    used: dict | None = None,
    label: str = "",
) -> tuple[int, float]:
    """Assert that two output pytrees have the same structure and close leaves.

    `tolerances` maps dtypes to (rtol, atol) (integer and bool leaves are compared exactly when
    their dtype is not listed); otherwise `rtol`/`atol`, or assert_close's defaults. The tolerances
    applied are recorded in `used`. Returns (leaves compared, largest absolute difference) and raises
    AssertionError naming the first leaf that differs.
    """
    expected_leaves, expected_spec = pytree.tree_flatten_with_path(expected)
    actual_leaves, actual_spec = pytree.tree_flatten_with_path(actual)
    if expected_spec != actual_spec:
        raise AssertionError(
            f"{label}output structure differs:\n  expected {expected_spec}\n  actual   {actual_spec}"
        )
    worst = 0.0
    for (path, want), (_, got) in zip(expected_leaves, actual_leaves, strict=True):
        where = f"{label}output {pytree.keystr(path) or '<output>'}"
        if not isinstance(want, torch.Tensor):
            if want != got:
                raise AssertionError(f"{where} differs: expected {want!r}, got {got!r}")
            continue
        leaf_rtol, leaf_atol = rtol, atol
        if tolerances is not None:
            leaf_rtol, leaf_atol = tolerances.get(want.dtype, (0.0, 0.0))
            if (want.is_floating_point() or want.is_complex()) and used is not None:
                used[str(want.dtype).removeprefix("torch.")] = (leaf_rtol, leaf_atol)
        torch.testing.assert_close(
            got,
            want,
            rtol=leaf_rtol,
            atol=leaf_atol,
            check_device=False,
            msg=lambda m, where=where: f"{where} differs: {m}",
        )
        worst = max(worst, _max_abs_diff(want, got))
    return len(expected_leaves), worst


def assert_parity(
    reference: Callable,
    candidate: Callable,
    inputs: Iterable,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    tolerances: Tolerances | None = None,
) -> ParityResult:
    """Run `reference` (eager) and `candidate` (exported/compiled) on every input and compare.

    `inputs` is an iterable of argument tuples (a single tensor counts as a one-argument tuple).
    Default tolerances are `torch.testing.assert_close`'s, which depend on the dtype; compiled
    backends pass a per-dtype `tolerances` table instead.
    """
    checked = leaves = 0
    worst = 0.0
    used: dict[str, tuple[float, float]] = {}
    with torch.inference_mode():
        for index, args in enumerate(inputs):
            args = as_args(args)
            n, diff = compare_outputs(
                reference(*args),
                candidate(*args),
                rtol=rtol,
                atol=atol,
                tolerances=tolerances,
                used=used,
                label=f"input {index}: ",
            )
            checked, leaves, worst = checked + 1, leaves + n, max(worst, diff)
    if checked == 0:
        raise ValueError("assert_parity needs at least one input")
    return ParityResult(checked, leaves, worst, used)


def shapes(tree):
    """The shapes of every tensor in an output pytree, for showing what came back."""
    return pytree.tree_map_only(torch.Tensor, lambda t: tuple(t.shape), tree)


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
            args = as_args(args)
            ref_args, cand_args = _clone_args(args), _clone_args(args)
            expected = (reference(*ref_args), ref_args, [reference.get_buffer(n) for n in state])
            actual = (candidate(*cand_args), cand_args, [candidate.get_buffer(n) for n in state])
            n, diff = compare_outputs(expected, actual, rtol=rtol, atol=atol)
            checked, leaves, worst = checked + 1, leaves + n, max(worst, diff)
    if checked == 0:
        raise ValueError("assert_mutation_parity needs at least one input")
    return ParityResult(checked, leaves, worst)
