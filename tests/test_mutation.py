"""Mutation: in-place writes (casebook.introspect) and stateful parity (casebook.parity)."""

import copy

import pytest
import torch

from casebook.introspect import mutations, signature_rows
from casebook.parity import assert_mutation_parity


class CountingBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count.add_(1)
        return x * self.count


class WritesConstant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ids = torch.zeros(2, 3, dtype=torch.long)

    def forward(self, x):
        self.ids[:, 0] = 7
        return x + self.ids


class WritesInput(torch.nn.Module):
    def forward(self, x):
        x[:, 0] = 0.0
        return x * 2


class CopiesInput(torch.nn.Module):
    def forward(self, x):
        x = x.clone()
        x[:, 0] = 0.0
        return x * 2


class CopyThenMutate(torch.nn.Module):
    def forward(self, x):
        y = x.to(torch.float16, copy=True)
        y.mul_(2)
        return y


def _export(model, *args):
    return torch.export.export(model, args)


def test_signature_rows_show_buffer_mutation_after_decomposition():
    program = _export(CountingBuffer(), torch.ones(3)).run_decompositions()
    rows = signature_rows(program)
    assert {
        "side": "output",
        "kind": "BUFFER_MUTATION",
        "graph name": rows[-2]["graph name"],
        "target": "count",
    } in rows
    assert rows[0]["kind"] == "BUFFER" and rows[0]["target"] == "count"


def test_mutations_names_the_constant_and_the_line():
    (row,) = mutations(_export(WritesConstant(), torch.ones(2, 3, dtype=torch.long)))
    assert row["op"] == "aten.fill_.Tensor"
    assert (row["kind"], row["target"]) == ("CONSTANT_TENSOR", "ids")
    assert "self.ids[:, 0] = 7" in row["code"]


def test_mutations_sees_user_input_writes_and_skips_metadata_ops():
    (row,) = mutations(_export(WritesInput(), torch.ones(2, 3)))
    assert row["kind"] == "USER_INPUT" and row["writes into"] == "x"


def test_mutations_does_not_treat_a_copying_to_as_an_alias():
    (row,) = mutations(_export(CopyThenMutate(), torch.ones(3)))
    assert row["kind"] == "intermediate"


def test_mutations_is_empty_for_a_functional_graph():
    assert mutations(_export(WritesInput(), torch.ones(2, 3)).run_decompositions()) == []


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
