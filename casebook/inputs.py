"""How the book passes example inputs around: one call's arguments, and the device they live on."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree


def as_args(inputs: Any) -> tuple[Any, ...]:
    """The positional arguments of one call.

    A tuple or list is the argument list itself; anything else (a tensor, a dict, a custom object)
    is the single argument. So ``as_args(x) == (x,)`` and ``as_args((x, y)) == (x, y)``; a model
    that takes one list (``model([image])``) is called with ``as_args(([image],))``.
    """
    return tuple(inputs) if isinstance(inputs, tuple | list) else (inputs,)


def first_device(inputs: Any) -> torch.device:
    """The device of the first tensor anywhere in `inputs` (CPU when there is none)."""
    for leaf in pytree.tree_leaves(inputs):
        if isinstance(leaf, torch.Tensor):
            return leaf.device
    return torch.device("cpu")
