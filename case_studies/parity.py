"""Parity checks: an exported or compiled program must compute what eager PyTorch computes.

Outputs are compared leaf by leaf after pytree flattening, so a fix that changes the output
*structure* (a missing field, a list that became a tuple, an empty result with a different shape)
fails just like one that changes values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree


@dataclass(frozen=True)
class ParityResult:
    """How many inputs were checked and the largest absolute difference seen."""

    inputs_checked: int
    leaves_checked: int
    max_abs_diff: float

    def __str__(self) -> str:
        return (
            f"parity OK on {self.inputs_checked} input(s), {self.leaves_checked} output tensor(s) compared, "
            f"max |difference| = {self.max_abs_diff:.3g}"
        )


def _as_args(inputs) -> tuple:
    return inputs if isinstance(inputs, tuple) else (inputs,)


def _max_abs_diff(expected: torch.Tensor, actual: torch.Tensor) -> float:
    if expected.numel() == 0:
        return 0.0
    if expected.dtype.is_floating_point or expected.dtype.is_complex:
        return (expected.detach() - actual.detach().to(expected.device)).abs().max().item()
    return float((expected != actual.to(expected.device)).sum().item())


def compare_outputs(
    expected, actual, *, rtol: float | None = None, atol: float | None = None
) -> tuple[int, float]:
    """Assert that two output pytrees have the same structure and close leaves.

    Returns (number of leaves compared, largest absolute difference). Raises AssertionError with
    the path of the first leaf that differs.
    """
    expected_leaves, expected_spec = pytree.tree_flatten_with_path(expected)
    actual_leaves, actual_spec = pytree.tree_flatten_with_path(actual)
    if expected_spec != actual_spec:
        raise AssertionError(
            f"output structure differs:\n  expected {expected_spec}\n  actual   {actual_spec}"
        )
    worst = 0.0
    for (path, want), (_, got) in zip(expected_leaves, actual_leaves, strict=True):
        where = pytree.keystr(path) or "<output>"
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(
                got,
                want,
                rtol=rtol,
                atol=atol,
                check_device=False,
                msg=lambda m, where=where: f"output {where} differs: {m}",
            )
            worst = max(worst, _max_abs_diff(want, got))
        elif want != got:
            raise AssertionError(f"output {where} differs: expected {want!r}, got {got!r}")
    return len(expected_leaves), worst


def assert_parity(
    reference: Callable,
    candidate: Callable,
    inputs: Iterable,
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> ParityResult:
    """Run `reference` (eager) and `candidate` (exported/compiled) on every input and compare.

    `inputs` is an iterable of argument tuples (a single tensor counts as a one-argument tuple).
    Default tolerances are `torch.testing.assert_close`'s, which depend on the dtype.
    """
    checked = leaves = 0
    worst = 0.0
    with torch.inference_mode():
        for args in inputs:
            args = _as_args(args)
            n, diff = compare_outputs(reference(*args), candidate(*args), rtol=rtol, atol=atol)
            checked, leaves, worst = checked + 1, leaves + n, max(worst, diff)
    if checked == 0:
        raise ValueError("assert_parity needs at least one input")
    return ParityResult(checked, leaves, worst)


def shapes(tree) -> Sequence:
    """The shapes of every tensor in an output pytree, for showing what came back."""
    return pytree.tree_map_only(torch.Tensor, lambda t: tuple(t.shape), tree)
