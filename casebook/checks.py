"""Checks every page makes: an exported program computes what eager computes, and an error that a
page reproduces is still raised.

Parity: outputs are compared leaf by leaf after pytree flattening, so a fix that changes the output
*structure* (a missing field, a list that became a tuple, an empty result with a different shape)
fails just like one that changes values. `assert_mutation_parity` also compares what each call
writes (arguments and buffers), call after call.

Expected errors: every failure page runs the failing call inside `expect_error`. The block must
raise an exception of the stated type whose message contains the stated fragment; otherwise the cell
raises `AssertionError` and the book build fails. That is deliberate: the day a PyTorch release
changes the behaviour, the page that describes the old behaviour stops building instead of silently
going stale.
"""

from __future__ import annotations

import copy
import io
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field

import torch
import torch.utils._pytree as pytree
from IPython.display import display

from casebook.display import ExpectedError
from casebook.inputs import as_args

# --------------------------------------------------------------------------------------------------
# Parity
# --------------------------------------------------------------------------------------------------
# Per-dtype (rtol, atol). None means torch.testing.assert_close's own dtype-based defaults.
Tolerances = Mapping[torch.dtype, tuple[float, float]]


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


# --------------------------------------------------------------------------------------------------
# Expected errors
# --------------------------------------------------------------------------------------------------
# The last lines of a partial graph are where tracing stopped; the rest can be hundreds of lines.
PARTIAL_GRAPH_LINES = 25


@dataclass
class CaughtError:
    """The exception a block raised, kept so the page can show and discuss it."""

    expected_type: type[BaseException]
    fragment: str
    exception: BaseException | None = field(default=None)
    stderr: str = ""

    @property
    def partial_graph(self) -> str | None:
        """The graph export had traced before it failed, when export attached one."""
        graph = getattr(self.exception, "partial_fx_graph", None)
        return str(graph) if graph is not None else None

    @property
    def message(self) -> str:
        return str(self.exception)

    def summary(self, max_lines: int = 12) -> str:
        """The error as the reader would see it at the bottom of a traceback, trimmed."""
        lines = traceback.format_exception_only(type(self.exception), self.exception)
        text = "".join(lines).rstrip().splitlines()
        if len(text) > max_lines:
            text = text[:max_lines] + [f"... ({len(text) - max_lines} more lines)"]
        return "\n".join(text)

    def where(self, frames: int = 3) -> str:
        """The innermost frames of the traceback: where in the library the error was raised."""
        tb = traceback.extract_tb(self.exception.__traceback__)
        return "".join(traceback.format_list(tb[-frames:])).rstrip()

    def raised_at(self, path_fragment: str) -> str:
        """The innermost traceback frame whose file path contains `path_fragment`, on one line.

        For a library, e.g. ``raised_at("/detectron2/")``, this is the library line that asked the
        question export could not answer: ``detectron2/layers/batch_norm.py:53 in forward: ...``
        (paths shown from ``site-packages/`` on). Raises ValueError when no frame matches.
        """
        frames = [
            f for f in traceback.extract_tb(self.exception.__traceback__) if path_fragment in f.filename
        ]
        if not frames:
            raise ValueError(
                f"no frame of the traceback is in a file whose path contains {path_fragment!r}; "
                f"the innermost frames are:\n{self.where()}"
            )
        frame = frames[-1]
        return f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno} in {frame.name}: {frame.line}"


def _qualified_name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


@contextmanager
def expect_error(
    expected_type: type[BaseException],
    fragment: str,
    *,
    show: bool = True,
    max_lines: int = 12,
    graph_lines: int = PARTIAL_GRAPH_LINES,
):
    """Assert that the block raises `expected_type` with `fragment` in its message.

    `fragment` is a plain substring, or a regular expression when wrapped as `re.compile(...)`.
    The caught error is printed (type, message trimmed to `max_lines`, then the last `graph_lines`
    lines of the graph export had traced before it failed, when it attached one; 0 hides them) and
    available as the yielded object's `.exception` for further assertions.
    """
    if max_lines < 1 or graph_lines < 0:
        raise ValueError(
            f"expect_error needs max_lines >= 1 and graph_lines >= 0, got max_lines={max_lines}, "
            f"graph_lines={graph_lines}"
        )
    caught = CaughtError(expected_type, fragment if isinstance(fragment, str) else fragment.pattern)
    # torch.export prints the partially traced graph to stderr once per nested wrapper; capture it so
    # the page shows it once, labelled, after the error.
    captured = io.StringIO()
    try:
        with redirect_stderr(captured):
            yield caught
    except BaseException as error:  # noqa: BLE001 - re-raised below unless it is the expected one
        if not isinstance(error, expected_type):
            raise AssertionError(
                f"expected {_qualified_name(expected_type)} but the block raised "
                f"{_qualified_name(type(error))}: {str(error)[:500]}"
            ) from error
        message = str(error)
        found = fragment.search(message) if isinstance(fragment, re.Pattern) else fragment in message
        if not found:
            raise AssertionError(
                f"{_qualified_name(type(error))} was raised, but its message no longer contains "
                f"{caught.fragment!r}; the page describing it is stale. Message:\n{message[:2000]}"
            ) from error
        caught.exception = error
    else:
        raise AssertionError(
            f"expected {_qualified_name(expected_type)} ({caught.fragment!r}) but the block ran without error: "
            "PyTorch's behaviour has changed and this page needs updating."
        )
    finally:
        caught.stderr = captured.getvalue()
    other_stderr = caught.stderr
    if caught.partial_graph:
        other_stderr = other_stderr.replace(caught.partial_graph, "").strip()
    if other_stderr:
        sys.stderr.write(other_stderr + "\n")
    if show:
        body = [caught.summary(max_lines)]
        if caught.partial_graph and graph_lines:
            traced = [line for line in caught.partial_graph.strip().splitlines() if line.strip()]
            body.append("\nGraph traced before the failure (export prints it to stderr), last lines:")
            if len(traced) > graph_lines:
                body.append(f"    ... ({len(traced) - graph_lines} earlier lines in .partial_graph)")
            body.append("\n".join(traced[-graph_lines:]))
        sys.stdout.flush()  # keep the cell's earlier prints above the error block
        display(
            ExpectedError(f"✗ raised as expected: {_qualified_name(type(caught.exception))}", "\n".join(body))
        )
