"""casebook.inputs: one call's arguments and their device, the same everywhere in the package."""

import torch

from casebook.inputs import as_args, first_device


def test_as_args_keeps_argument_lists_and_wraps_everything_else():
    x, y = torch.ones(1), torch.zeros(1)
    assert as_args(x) == (x,)
    assert as_args((x, y)) == (x, y)
    assert as_args([x, y]) == (x, y)
    assert as_args(([x],)) == ([x],)  # a model that takes one list of images
    mapping = {"image": x}
    assert as_args(mapping) == (mapping,)  # a dict is one argument, not its keys


def test_first_device_finds_nested_tensors_and_defaults_to_cpu():
    assert first_device(({"a": [torch.ones(1, device="meta")]},)) == torch.device("meta")
    assert first_device((1, "text")) == torch.device("cpu")
