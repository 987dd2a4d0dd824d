"""Parity with eager: outputs compared leaf by leaf, structure included."""

import copy

import pytest
import torch
from mutating_modules import CountingBuffer, WritesInput

from casebook.parity import assert_mutation_parity, assert_parity, compare_outputs


def test_parity_passes_for_an_exported_program():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    exported = torch.export.export(model, (torch.randn(2, 4),))
    result = assert_parity(model, exported.module(), [torch.randn(2, 4), torch.zeros(2, 4)])
    assert result.inputs_checked == 2 and result.leaves_checked == 2


def test_parity_reports_the_path_of_a_differing_value():
    with pytest.raises(AssertionError, match=r"\['boxes'\] differs"):
        compare_outputs({"boxes": torch.zeros(2), "n": 2}, {"boxes": torch.ones(2), "n": 2})


def test_parity_rejects_a_different_structure():
    with pytest.raises(AssertionError, match="structure differs"):
        compare_outputs((torch.zeros(0, 4),), [torch.zeros(0, 4)])


def test_parity_compares_non_tensor_leaves():
    with pytest.raises(AssertionError, match="expected 2, got 3"):
        compare_outputs({"n": 2}, {"n": 3})


def test_parity_needs_inputs():
    with pytest.raises(ValueError, match="at least one input"):
        assert_parity(torch.nn.Identity(), torch.nn.Identity(), [])


class CopiesInput(torch.nn.Module):
    def forward(self, x):
        x = x.clone()
        x[:, 0] = 0.0
        return x * 2


def _export(model, *args):
    return torch.export.export(model, args)


def test_assert_mutation_parity_checks_buffers_over_several_calls():
    model = CountingBuffer()
    reference = copy.deepcopy(model)
    candidate = _export(model, torch.ones(3)).run_decompositions().module()
    result = assert_mutation_parity(reference, candidate, [torch.ones(3), torch.arange(3.0)], state=["count"])
    assert result.inputs_checked == 2
    assert reference.count.item() == candidate.count.item() == 2


def test_assert_mutation_parity_catches_a_missing_input_write():
    with pytest.raises(AssertionError, match="differs"):
        assert_mutation_parity(WritesInput(), CopiesInput(), [torch.ones(2, 3)])


def test_assert_mutation_parity_catches_diverging_state():
    reference = CountingBuffer()
    candidate = CountingBuffer()
    candidate.count.fill_(5)
    with pytest.raises(AssertionError):
        assert_mutation_parity(reference, candidate, [torch.ones(3)], state=["count"])


def test_assert_mutation_parity_needs_inputs():
    with pytest.raises(ValueError, match="at least one input"):
        assert_mutation_parity(WritesInput(), WritesInput(), [])
