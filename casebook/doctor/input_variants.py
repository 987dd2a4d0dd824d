"""The doctor's probe of the inputs in another dtype and another memory layout.

An exported program checks its inputs' structure and sizes. It does not check their dtypes or their
strides, and it follows what the example had. Three things come of that, each seen on 2.14.1:

- a check that ``forward`` makes in Python (``if not x.is_floating_point(): raise``) ran once while
  export traced: the program runs inputs that eager refuses (``exported-program-input-checks``);
- a conversion of an input (``x.float()``) gets an assert on the example's dtype in front of it:
  the program refuses inputs that eager converts (``example-dtype-assumed``,
  pytorch/pytorch#151001);
- a ``.contiguous()`` that changed nothing on the example was left out of the graph: the program
  runs a ``view`` that only the example's layout allows (``example-layout-assumed``,
  pytorch/pytorch#186381).

`check_input_variants` gives each tensor input, one at a time, in another dtype and in another
memory layout (the same values, other strides), to eager and to the program, and names what
differs. `layout_variants` is also used on the decomposed program, where `run_decompositions()`
turns a ``reshape`` traced on a contiguous tensor into a ``view``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

from .. import catalog
from ..parity import compare_outputs
from .copies import run_on_copies
from .report import CONFIRMED, VARIANT_PROBE_STEP, Finding
from .session import Session, first_line

STEP = VARIANT_PROBE_STEP
# Inputs probed, at most: each costs a few eager and program runs.
MAX_PROBED_INPUTS = 4
# Each variant copies its input twice and compares in float64: larger inputs are left out, and the
# step says so.
MAX_PROBED_ELEMENTS = 2**26


@dataclass(frozen=True)
class Variant:
    """One input given another way: `axis` is "dtype" or "layout", `label` says how."""

    axis: str
    label: str
    make: Callable[[torch.Tensor], torch.Tensor]


def dtype_variants(tensor: torch.Tensor) -> list[Variant]:
    """The dtypes a reader's pipeline hands over instead of the example's: uint8 frames from a
    decoder and half precision for floating-point inputs, float32 for other floating dtypes (a program
    exported in bfloat16 called with float32, pytorch/pytorch#151001), int32 for int64 token ids and
    the reverse, float32 for uint8 images."""
    if tensor.is_floating_point():
        dtypes = [torch.uint8, torch.float16 if tensor.dtype == torch.float32 else torch.float32]
    else:
        dtypes = {torch.int64: [torch.int32], torch.int32: [torch.int64], torch.uint8: [torch.float32]}.get(
            tensor.dtype, []
        )
    return [
        Variant("dtype", str(dtype).removeprefix("torch."), lambda t, dtype=dtype: t.to(dtype))
        for dtype in dtypes
    ]


def layout_variant(tensor: torch.Tensor) -> Variant | None:
    """The same values in other strides, or None when no other layout differs for this shape.

    A contiguous example is given channels-last: the channel dimension innermost (dimension 1 of a
    4-D or 5-D batch, dimension 0 of a 3-D image, which is how a decoder's HWC array permuted to CHW
    arrives), or transposed for a matrix. An example that is not contiguous is given contiguous: the
    program may assume the example's strides either way.
    """
    if tensor.dim() < 2 or tensor.numel() < 2:
        return None
    if not tensor.is_contiguous():
        variant = Variant("layout", "contiguous", lambda t: t.contiguous())
    else:
        channel = 1 if tensor.dim() >= 4 else 0
        label = {2: "transposed (column-major)", 3: "dimension 0 innermost (an HWC array as CHW)"}.get(
            tensor.dim(), "channels-last"
        )
        variant = Variant("layout", label, lambda t: t.movedim(channel, -1).contiguous().movedim(-1, channel))
    if variant.make(tensor).stride() == tensor.stride():  # size-1 dimensions: the same strides
        return None
    return variant


def tensor_leaves(args, kwargs) -> list[tuple[int, str, torch.Tensor]]:
    """(index among the flattened leaves, name, tensor) for each tensor input the probe can give
    another way: dense (not sparse), with data (not on ``meta``), at most `MAX_PROBED_ELEMENTS`
    elements; the first `MAX_PROBED_INPUTS` of them."""
    leaves = pytree.tree_flatten_with_path((args, kwargs))[0]
    return [
        (index, input_name(path), leaf)
        for index, (path, leaf) in enumerate(leaves)
        if isinstance(leaf, torch.Tensor)
        and leaf.layout == torch.strided
        and leaf.device.type != "meta"
        and leaf.numel() <= MAX_PROBED_ELEMENTS
    ][:MAX_PROBED_INPUTS]


def _tensor_count(args, kwargs) -> int:
    return sum(isinstance(leaf, torch.Tensor) for leaf in pytree.tree_leaves((args, kwargs)))


def input_name(path) -> str:
    """``args[0]['image']`` for a leaf of ``(args, kwargs)``, ``kwargs['x']`` for a keyword argument."""
    text = pytree.keystr(path)  # "[0][0]['image']" or "[1]['x']"
    if text.startswith("[0]"):
        return "args" + text[3:]
    return "kwargs" + text[3:]


def with_leaf(args, kwargs, index: int, replace):
    """``(args, kwargs)`` with the flattened leaf `index` replaced by ``replace(leaf)``."""
    values, structure = pytree.tree_flatten((args, kwargs))
    values[index] = replace(values[index])
    return pytree.tree_unflatten(values, structure)


def layout_variants(args, kwargs) -> Iterator[tuple[str, Variant, tuple, dict]]:
    """(input name, variant, args, kwargs) for each tensor input given in another memory layout."""
    for index, name, tensor in tensor_leaves(args, kwargs):
        variant = layout_variant(tensor)
        if variant is not None:
            yield name, variant, *with_leaf(args, kwargs, index, variant.make)


def like_the_example(example_args, example_kwargs, args, kwargs) -> tuple[tuple, dict] | None:
    """`args`, `kwargs` with each tensor given the dtype and the layout of the example's tensor at
    the same place, or None when the two are not laid out alike (another structure)."""
    example_leaves, example_structure = pytree.tree_flatten((example_args, example_kwargs))
    leaves, structure = pytree.tree_flatten((args, kwargs))
    if structure != example_structure:
        return None
    matched = [
        _like(leaf, example) if isinstance(leaf, torch.Tensor) and isinstance(example, torch.Tensor) else leaf
        for leaf, example in zip(leaves, example_leaves, strict=True)
    ]
    return pytree.tree_unflatten(matched, structure)


def _like(tensor: torch.Tensor, example: torch.Tensor) -> torch.Tensor:
    converted = tensor.to(example.dtype)
    if converted.dim() != example.dim():
        return converted
    order = stride_order(example)  # outermost dimension first
    inverse = sorted(range(len(order)), key=order.__getitem__)
    return converted.permute(order).contiguous().permute(inverse)


def stride_order(tensor: torch.Tensor) -> list[int]:
    """The dimensions from outermost to innermost in memory (by stride; ties by position)."""
    return sorted(range(tensor.dim()), key=lambda dim: (-tensor.stride(dim), dim))


def differs_from_the_example(example_args, example_kwargs, args, kwargs) -> str:
    """How the tensors of a call differ from the example's in dtype or layout ("" when they do not)."""
    example_leaves = pytree.tree_flatten_with_path((example_args, example_kwargs))[0]
    leaves = pytree.tree_flatten_with_path((args, kwargs))[0]
    if len(example_leaves) != len(leaves):
        return ""
    differences = []
    for (path, leaf), (_, example) in zip(leaves, example_leaves, strict=True):
        if not (isinstance(leaf, torch.Tensor) and isinstance(example, torch.Tensor)):
            continue
        name = input_name(path)
        if leaf.dtype != example.dtype:
            differences.append(f"`{name}` is {_dtype(leaf)}, the example's {_dtype(example)}")
        elif leaf.dim() == example.dim() and not _laid_out_alike(leaf, example):
            differences.append(f"`{name}` has strides {leaf.stride()}, the example's {example.stride()}")
    return "; ".join(differences)


def _laid_out_alike(tensor: torch.Tensor, example: torch.Tensor) -> bool:
    """Whether the dimensions of more than one element, in both, come in the same order in memory:
    the layout, whatever the sizes (a call at another batch size compares with the example)."""
    dims = [dim for dim in range(tensor.dim()) if tensor.size(dim) > 1 and example.size(dim) > 1]
    return [d for d in stride_order(tensor) if d in dims] == [d for d in stride_order(example) if d in dims]


def _dtype(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


@dataclass
class Outcome:
    """What one call did in the reference (eager, or the program for its decomposition) and in the
    candidate (the program, or the decomposed program): each one's error, or how their outputs
    differ."""

    eager_error: str | None = None
    program_error: str | None = None
    mismatch: str | None = None  # the values differ
    other_dtypes: str | None = None  # the outputs have other dtypes (their values are not compared)
    uncompared: str | None = None  # why the outputs could not be taken apart (run + parity says too)

    @property
    def agrees(self) -> bool:
        """Both ran, with outputs of the same dtypes and values."""
        return not (
            self.eager_error or self.program_error or self.mismatch or self.other_dtypes or self.uncompared
        )


# Values are compared, with room for half-precision rounding: a divergence is another result, not
# another rounding of it.
VALUE_TOLERANCE = {"rtol": 1e-3, "atol": 1e-3}


def _widened(tree):
    """Every tensor as float64 (complex128 for complex), so two dtypes' values can be compared."""

    def widen(tensor):
        return tensor.detach().to(torch.complex128 if tensor.is_complex() else torch.float64)

    return pytree.tree_map_only(torch.Tensor, widen, tree)


def _output_dtypes(expected, actual) -> str | None:
    """ "eager returns float16, the program float32" where the outputs' dtypes differ, else None."""
    for want, got in zip(pytree.tree_leaves(expected), pytree.tree_leaves(actual), strict=False):
        if isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor) and want.dtype != got.dtype:
            return f"eager returns {_dtype(want)}, the program {_dtype(got)}"
    return None


def compare_on(eager: Callable, runnable: Callable, args, kwargs) -> Outcome:
    """Run the reference (`eager`) and the candidate (`runnable`) on one call and say where they part.

    Outputs of other dtypes are not compared by value: a program that computes a float16 input in
    float32 (a constant of the trace promotes it) differs from eager by eager's rounding, and is the
    more exact of the two."""
    outcome = Outcome()
    try:
        expected = run_on_copies(eager, args, kwargs)
    except Exception as error:  # eager refusing the variant is what the probe looks for
        outcome.eager_error = first_line(error)
    try:
        actual = run_on_copies(runnable, args, kwargs)
    except Exception as error:  # and so is the program refusing it
        outcome.program_error = first_line(error)
        return outcome
    if outcome.eager_error is None:
        try:
            outcome.other_dtypes = _output_dtypes(expected, actual)
            if outcome.other_dtypes is None:
                compare_outputs(_widened(expected), _widened(actual), **VALUE_TOLERANCE)
        except AssertionError as error:
            outcome.mismatch = first_line(error)
        except Exception as error:  # outputs pytree cannot take apart: the parity step reports it
            outcome.uncompared = first_line(error)
    return outcome


SECTIONS = {"dtype": "exported-program-dtype", "layout": "exported-program-layout"}
"""The page section (label) that shows each axis."""


def check_input_variants(session: Session, module, program, args, kwargs) -> None:
    """Give each tensor input, one at a time, in other dtypes and another memory layout, to eager and
    to the program (see the module docstring).

    What would go unnoticed is a finding: an input eager refuses and the program runs (a check lost
    in export), or one both run with different outputs. An input the program refuses and eager runs
    fails loudly, and a reader may never pass it: that is a note naming the page section, and so is
    a program that returns other dtypes than eager. The same refusal on a reader's own check input is
    a finding of `check_runs`, which `confirm_like_the_example` confirms.
    """
    lost: list[str] = []  # eager refuses, the program runs: a check written in Python is gone
    differ: dict[str, list[str]] = {"dtype": [], "layout": []}  # both run, other outputs
    refused: dict[str, list[str]] = {"dtype": [], "layout": []}  # eager runs, the program raises
    computed_as: list[str] = []  # both run, the program returns other dtypes
    with session.step(STEP) as record:
        if not session.ran_clean:
            record.detail = "not tried, the program failed on the example"
            return
        runnable = program.module()  # unlifted once, for every probe
        leaves, tensors = tensor_leaves(args, kwargs), _tensor_count(args, kwargs)
        tried, uncompared = 0, set()
        for index, name, tensor in leaves:
            variants = dtype_variants(tensor) + [v for v in [layout_variant(tensor)] if v is not None]
            for variant in variants:
                tried += 1
                probe_args, probe_kwargs = with_leaf(args, kwargs, index, variant.make)
                outcome = compare_on(module, runnable, probe_args, probe_kwargs)
                given = f"`{name}` as {variant.label}"
                if outcome.eager_error is not None and outcome.program_error is None:
                    lost.append(f"{given}: the program runs, eager raises {outcome.eager_error}")
                elif outcome.eager_error is None and outcome.program_error is not None:
                    refused[variant.axis].append(f"{given} ({outcome.program_error})")
                elif outcome.other_dtypes is not None:
                    computed_as.append(f"{given} ({outcome.other_dtypes})")
                elif outcome.mismatch is not None:
                    # The control: the example itself, run by both at this point of the sequence. A
                    # model that keeps state or draws random numbers differs there too, and then the
                    # variant's outputs say nothing about its dtype or layout.
                    if compare_on(module, runnable, args, kwargs).agrees:
                        differ[variant.axis].append(
                            f"{given}: both run, and the outputs differ: {outcome.mismatch}"
                        )
                    else:
                        uncompared.add("eager and the program part on the example itself when run again")
                elif outcome.uncompared is not None:
                    uncompared.add(outcome.uncompared)
        found = len(lost) + len(differ["dtype"]) + len(differ["layout"])
        record.detail = (
            f"{tried} variant(s) of {len(leaves)} tensor input(s) tried"
            + (
                f" (of {tensors}; the first {len(leaves)} the probe can give another way)"
                if tensors > len(leaves)
                else ""
            )
            + (f", {found} where the program and eager part silently" if found else "")
            + (f"; outputs not compared: {'; '.join(sorted(uncompared))}" if uncompared else "")
        )
        if found:
            record.outcome = "failed"
    if computed_as:
        session.report.notes.append(
            "the program computes other dtypes than eager for: " + "; ".join(computed_as) + ". It follows "
            "the example's dtypes (a constant of the trace, a dtype fixed while tracing)"
        )
    for axis, inputs in refused.items():
        if inputs:
            section = catalog.entry(f"example-{axis}-assumed").docname + f"#{SECTIONS[axis]}"
            session.report.notes.append(
                f"the program refuses what eager runs: {'; '.join(inputs)}. A caller that passes "
                f"these needs a program exported with them ({section})"
            )
    if lost:
        evidence = lost + [
            "the check ran in Python while export traced; the program checks its inputs' structure "
            "and sizes, not their dtypes or strides"
        ]
        session.add(Finding.from_entry(catalog.entry("exported-program-input-checks"), evidence, STEP))
    if differ["dtype"]:
        evidence = differ["dtype"] + [
            "a Python branch on the dtype, or a conversion, was decided for the example's dtype"
        ]
        session.add(Finding.from_entry(catalog.entry("example-dtype-assumed"), evidence, STEP))
    if differ["layout"]:
        evidence = differ["layout"] + ["the program computes with the example's strides where eager does not"]
        session.add(Finding.from_entry(catalog.entry("example-layout-assumed"), evidence, STEP))


# The entries whose cause is an input's dtype or layout: a check input the program refuses for
# either is confirmed by giving it the example's.
ASSUMED = frozenset({"example-dtype-assumed", "example-layout-assumed"})


def confirm_like_the_example(
    finding: Finding, program, example: tuple[tuple, dict], call: tuple[tuple, dict]
) -> None:
    """A check input the program refused with an error of `ASSUMED`: when the same input, given the
    example's dtypes and layouts, runs, that was the cause (the finding is confirmed)."""
    if finding.kind not in ASSUMED:
        return
    how = differs_from_the_example(*example, *call)
    like = like_the_example(*example, *call)
    if not how or like is None:
        return
    try:
        run_on_copies(program.module(), *like)
    except Exception as error:  # the input fails for another reason too: the match stays unproven
        finding.evidence.append(
            f"given the example's dtypes and layouts, it still fails: {first_line(error)}"
        )
        return
    finding.strengthen(CONFIRMED, f"the same input given the example's dtypes and layouts runs ({how})")


def check_decomposed_layouts(session: Session, program, decomposed, args, kwargs) -> None:
    """Each tensor input in another memory layout, to the program and to the decomposed program:
    `run_decompositions()` turns a ``reshape`` traced on the example's layout into a ``view`` that
    needs that layout, so the program a backend compiles can refuse what the program runs. A note,
    as the program's own refusals are (`check_input_variants`)."""
    refused = []
    reference, candidate = program.module(), decomposed.module()
    for name, variant, probe_args, probe_kwargs in layout_variants(args, kwargs):
        outcome = compare_on(reference, candidate, probe_args, probe_kwargs)
        if outcome.eager_error is None and outcome.program_error is not None:
            refused.append(f"`{name}` as {variant.label} ({outcome.program_error})")
    if refused:
        section = catalog.entry("example-layout-assumed").docname + f"#{SECTIONS['layout']}"
        session.report.notes.append(
            "the decomposed program (what AOTInductor, ExecuTorch and TensorRT compile) refuses what "
            f"the program runs: {'; '.join(refused)}. `run_decompositions()` made a `reshape` traced "
            f"on the example's layout into a `view` that needs it ({section})"
        )
