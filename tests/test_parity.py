"""Parity with eager: outputs compared leaf by leaf, structure included."""

import pytest
import torch

from casebook.parity import assert_parity, compare_outputs


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
