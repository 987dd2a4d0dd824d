"""The doctor's probe of inputs in other dtypes and memory layouts (`casebook.doctor.input_variants`)."""

import pytest
import torch
from torch import nn

from casebook.doctor import diagnose, input_variants
from casebook.doctor.copies import copy_inputs


@pytest.mark.parametrize(
    ("dtype", "probed"),
    [
        (torch.float32, [torch.uint8, torch.float16]),
        (torch.bfloat16, [torch.uint8, torch.float32]),
        (torch.float64, [torch.uint8, torch.float32]),
        (torch.int64, [torch.int32]),
        (torch.int32, [torch.int64]),
        (torch.uint8, [torch.float32]),
        (torch.bool, []),
    ],
)
def test_each_dtype_is_probed_with_the_dtypes_a_pipeline_hands_over_instead(dtype, probed):
    tensor = torch.ones(2, 3, dtype=dtype)
    variants = input_variants.dtype_variants(tensor)
    assert [variant.make(tensor).dtype for variant in variants] == probed
    assert {variant.axis for variant in variants} <= {"dtype"}


@pytest.mark.parametrize(
    ("shape", "label"),
    [
        ((2, 3, 8, 6), "channels-last"),
        ((2, 3, 4, 8, 6), "channels-last"),
        ((3, 8, 6), "dimension 0 innermost (an HWC array as CHW)"),
        ((4, 5), "transposed (column-major)"),
    ],
)
def test_a_contiguous_input_is_probed_with_the_same_values_in_other_strides(shape, label):
    tensor = torch.rand(shape)
    variant = input_variants.layout_variant(tensor)
    assert variant.label == label and variant.axis == "layout"
    probe = variant.make(tensor)
    assert torch.equal(probe, tensor) and probe.stride() != tensor.stride() and not probe.is_contiguous()


def test_an_example_that_is_not_contiguous_is_probed_contiguous():
    tensor = torch.rand(2, 3, 8, 6).contiguous(memory_format=torch.channels_last)
    variant = input_variants.layout_variant(tensor)
    assert variant.label == "contiguous" and variant.make(tensor).is_contiguous()


@pytest.mark.parametrize("shape", [(7,), (1, 1), (5, 1)])
def test_shapes_with_no_other_layout_get_no_layout_probe(shape):
    assert input_variants.layout_variant(torch.rand(shape)) is None


def test_the_copies_the_doctor_runs_on_keep_the_probe_strides():
    probe = torch.rand(2, 3, 8, 6).contiguous(memory_format=torch.channels_last)
    (copied,) = copy_inputs((probe,))
    assert copied.stride() == probe.stride() and copied.data_ptr() != probe.data_ptr()


def test_at_most_four_tensor_inputs_are_probed_and_each_is_named_by_its_place():
    args = ([torch.rand(2, 2) for _ in range(5)], 3)
    named = input_variants.tensor_leaves(args, {"mask": torch.ones(2, 2)})
    assert [name for _, name, _ in named] == ["args[0][0]", "args[0][1]", "args[0][2]", "args[0][3]"]
    assert input_variants.tensor_leaves((), {"mask": torch.ones(2)})[0][1] == "kwargs['mask']"


def test_a_call_is_given_the_example_dtypes_and_layouts_and_the_differences_are_named():
    example = ((torch.rand(4, 8), torch.zeros(3, dtype=torch.int64)), {})
    call = ((torch.rand(8, 4).t(), torch.zeros(3, dtype=torch.int32)), {})
    (like_args, _) = input_variants.like_the_example(*example, *call)
    assert like_args[0].is_contiguous() and torch.equal(like_args[0], call[0][0])
    assert like_args[1].dtype == torch.int64
    how = input_variants.differs_from_the_example(*example, *call)
    assert (
        how == "`args[0]` has strides (1, 4), the example's (8, 1); `args[1]` is int32, the example's int64"
    )
    assert input_variants.like_the_example(*example, (call[0][0],), {}) is None  # another structure


class ElidedContiguous(nn.Module):
    def forward(self, x):
        return x.contiguous().view(x.shape[0] * x.shape[1]) * 2


class FloatInFront(nn.Module):
    def forward(self, x):
        return x.float() * 2


class ReshapeHead(nn.Module):
    def forward(self, x):
        return x.relu().reshape(x.shape[0], -1)


class RefusesIntegers(nn.Module):
    def forward(self, x):
        if not x.is_floating_point():
            raise TypeError("expected a floating-point image")
        return x * 2


class DoublesHalf(nn.Module):
    """A Python branch on the dtype: traced on float32, the program never doubles."""

    def forward(self, x):
        return x * 2 if x.dtype == torch.float16 else x


class SumsAlongTheFastAxis(nn.Module):
    """A Python branch on the strides: traced contiguous, the program always sums the last axis."""

    def forward(self, x):
        return x.sum(-1) if x.is_contiguous() else x.sum(0)


def _note(report, start: str) -> str:
    (note,) = [note for note in report.notes if note.startswith(start)]
    return note


def test_a_layout_the_program_refuses_where_eager_copies_is_a_note_naming_the_section():
    report = diagnose(ElidedContiguous(), (torch.rand(4, 6),))
    assert report.ok, report  # loud, and the reader may never pass such an input: no finding
    note = _note(report, "the program refuses what eager runs: `args[0]` as transposed (column-major) (")
    assert "view size is not compatible" in note
    assert note.endswith("(notebooks/exported_program_input_checks#exported-program-layout)")


def test_a_dtype_the_program_refuses_where_eager_converts_is_a_note_with_each_dtype():
    report = diagnose(FloatInFront(), (torch.rand(2, 3),))
    assert report.ok, report
    note = _note(report, "the program refuses what eager runs: `args[0]` as uint8 (")
    assert "Tensor dtype mismatch! Expected: Float, Got: unsigned char" in note
    assert "; `args[0]` as float16 (" in note and note.endswith("#exported-program-dtype)")


def test_a_check_eager_makes_and_the_program_lost_is_the_input_checks_entry():
    report = diagnose(RefusesIntegers(), (torch.rand(2, 3),))
    assert report.kinds() == ["exported-program-input-checks"], report
    assert (
        report.findings[0]
        .evidence[0]
        .startswith("`args[0]` as uint8: the program runs, eager raises TypeError")
    )


@pytest.mark.parametrize(
    ("model", "kind", "variant"),
    [
        (DoublesHalf(), "example-dtype-assumed", "`args[0]` as float16"),
        (SumsAlongTheFastAxis(), "example-layout-assumed", "`args[0]` as transposed (column-major)"),
    ],
)
def test_a_variant_both_run_with_other_values_is_a_finding(model, kind, variant):
    report = diagnose(model, (torch.rand(3, 5),))
    assert report.kinds() == [kind], report
    assert report.findings[0].evidence[0].startswith(f"{variant}: both run, and the outputs differ")


def test_a_program_returning_another_dtype_with_the_same_values_is_no_divergence():
    class AddsInt64(nn.Module):
        def forward(self, x):
            return x + torch.tensor(1)

    report = diagnose(AddsInt64(), (torch.arange(6).reshape(2, 3),))
    assert report.ok, report


def test_a_check_input_in_another_layout_is_confirmed_by_the_example_layout():
    report = diagnose(ElidedContiguous(), (torch.rand(4, 6),), check_inputs=[(torch.rand(6, 4).t(),)])
    assert report.kinds() == ["example-layout-assumed"], report
    (finding,) = report.findings
    assert finding.strength == "confirmed", finding
    assert finding.basis == (
        "the same input given the example's dtypes and layouts runs "
        "(`args[0]` has strides (1, 4), the example's (6, 1))"
    )


def test_a_check_input_in_another_dtype_is_confirmed_by_the_example_dtype():
    report = diagnose(
        FloatInFront(), (torch.rand(2, 3),), check_inputs=[(torch.ones(2, 3, dtype=torch.uint8),)]
    )
    assert report.kinds() == ["example-dtype-assumed"], report
    assert report.findings[0].strength == "confirmed"


def test_a_check_input_that_fails_in_the_example_layout_too_stays_unproven():
    class ViewOnly(nn.Module):
        def forward(self, x):
            return x.view(-1)

    report = diagnose(ViewOnly(), (torch.rand(4, 6),), check_inputs=[(torch.rand(4, 7),)])
    assert report.findings[0].strength != "confirmed", report


def test_the_decomposed_program_is_run_in_the_other_layout_too():
    report = diagnose(ReshapeHead(), (torch.rand(2, 3, 4, 5),))
    assert report.ok, report
    note = _note(report, "the decomposed program (what AOTInductor, ExecuTorch and TensorRT compile) refuses")
    assert "`args[0]` as channels-last (RuntimeError: view size is not compatible" in note


def test_what_the_readers_own_inputs_met_goes_before_a_hazard_of_made_up_inputs():
    report = diagnose(DoublesHalf(), (torch.rand(4, 6),), check_inputs=[(torch.rand(4, 7),)])
    assert report.kinds() == ["static-dim-guard", "example-dtype-assumed"], report


def test_a_program_without_tensor_inputs_probes_nothing():
    class Constant(nn.Module):
        def forward(self, n: int):
            return torch.arange(4) * n

    report = diagnose(Constant(), (3,))
    (step,) = [step for step in report.steps if step.name == input_variants.STEP]
    assert step.outcome == "passed" and step.detail.startswith("0 variant(s) of 0 tensor input(s)")


def test_inputs_the_probe_cannot_give_another_way_are_left_out_and_counted():
    args = (torch.rand(2, 3).to_sparse(), torch.rand(2, 3, device="meta"), torch.rand(2, 3))
    assert [name for _, name, _ in input_variants.tensor_leaves(args, {})] == ["args[2]"]


def test_a_call_at_another_batch_size_in_another_layout_differs_from_the_example():
    example = ((torch.rand(2, 3, 8, 8),), {})
    call = ((torch.rand(3, 3, 8, 8).contiguous(memory_format=torch.channels_last),), {})
    assert input_variants.differs_from_the_example(*example, *call).startswith("`args[0]` has strides")
    assert input_variants.differs_from_the_example(*example, (torch.rand(1, 3, 8, 8),), {}) == ""


@pytest.mark.parametrize(
    "example",
    [
        torch.rand(3, 8, 6).permute(2, 0, 1),  # an HWC array as CHW
        torch.rand(2, 3, 4, 8, 6).contiguous(memory_format=torch.channels_last_3d),
        torch.rand(5, 4).t(),
    ],
)
def test_a_call_is_given_the_layout_of_any_example(example):
    call = torch.rand(example.shape)
    (like,), _ = input_variants.like_the_example((example,), {}, (call,), {})
    assert torch.equal(like, call) and like.stride() == example.stride()


class PositionCode(nn.Module):
    """Sinusoidal codes made in `forward` with the input's dtype: traced on float32, the program
    keeps a float32 constant and computes a float16 input in float32."""

    def forward(self, x):
        frequencies = torch.arange(x.shape[-1], dtype=x.dtype) / x.shape[-1]
        return x + torch.sin(frequencies * 100)


def test_a_program_that_computes_in_the_example_dtype_is_a_note_not_a_divergence():
    report = diagnose(PositionCode(), (torch.rand(2, 64),))
    assert report.ok, report
    note = _note(report, "the program computes other dtypes than eager for: `args[0]` as float16 (")
    assert "eager returns float16, the program float32" in note


def test_complex_outputs_are_compared_with_their_imaginary_part():
    class ConjugateIfTransposed(nn.Module):
        """Only the imaginary parts differ between the two branches."""

        def forward(self, x):
            z = torch.complex(x, x)
            return z if x.is_contiguous() else z.conj()

    report = diagnose(ConjugateIfTransposed(), (torch.rand(2, 3) + 0.5,))
    assert report.kinds() == ["example-layout-assumed"], report
