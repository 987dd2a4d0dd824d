"""Copies of a call's inputs for the doctor's runs, so a model that writes into its inputs changes
only its own copy.

`copy.deepcopy` refuses a tensor that is not a leaf of the autograd graph ("Only Tensors created
explicitly by the user (graph leaves) support the deepcopy protocol"), such as
``-torch.ones((), requires_grad=True)``: a reader's input, not a fault of the model.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.utils import _pytree as pytree


def copy_inputs(value: Any) -> Any:
    """A deep copy of ``value`` (args, kwargs, or both), in which each tensor that is not a graph
    leaf becomes a detached copy that keeps its ``requires_grad``. Two references to one tensor
    stay one tensor in the copy."""
    memo: dict[int, Any] = {}
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor) and not leaf.is_leaf and id(leaf) not in memo:
            memo[id(leaf)] = leaf.detach().clone().requires_grad_(leaf.requires_grad)
    return copy.deepcopy(value, memo)


def run_on_copies(function, args, kwargs, *, autograd: bool = False):
    """Call `function` on copies of the inputs (a model may write into them), without autograd
    unless asked for."""
    with torch.set_grad_enabled(autograd):
        return function(*copy_inputs(args), **copy_inputs(kwargs))
