"""casebook.doctor.copies: the doctor copies a call's inputs, tensors that are not graph leaves included."""

import copy

import pytest
import torch

from casebook.doctor.copies import copy_inputs


def test_a_tensor_that_is_not_a_leaf_is_copied_detached_keeping_requires_grad():
    leaf = torch.ones(3, requires_grad=True)
    not_a_leaf = -leaf
    with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user"):
        copy.deepcopy((not_a_leaf,))
    (copied,) = copy_inputs((not_a_leaf,))
    assert copied.is_leaf and copied.requires_grad
    assert torch.equal(copied, not_a_leaf) and copied.data_ptr() != not_a_leaf.data_ptr()


def test_one_tensor_twice_stays_one_tensor_and_the_originals_are_left_alone():
    shared = torch.zeros(2, requires_grad=True) * 2
    args, kwargs = copy_inputs(((shared, shared), {"scale": 3, "other": torch.ones(2)}))
    assert args[0] is args[1] and args[0] is not shared
    args[0].data.add_(1)
    assert torch.equal(shared, torch.zeros(2)) and kwargs["scale"] == 3
    assert kwargs["other"] is not None and torch.equal(kwargs["other"], torch.ones(2))
