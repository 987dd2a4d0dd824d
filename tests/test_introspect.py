"""casebook.introspect: size ranges, runtime asserts, traced input shapes, suggested fixes, the graph
signature and in-place writes."""

import torch
from mutating_modules import CountingBuffer, WritesInput
from torch import nn
from torch.export import Dim

from casebook.introspect import (
    mutations,
    runtime_asserts,
    signature_rows,
    suggested_fixes,
    symbol_range,
    user_input_shapes,
)


class Grow(torch.nn.Module):
    def forward(self, x, y):
        return x.nonzero(), y * 2


def test_symbol_range_reads_bounded_unbounded_and_data_dependent_sizes():
    x, y = torch.tensor([0.0, 1.0, 2.0]), torch.ones(4, 3)
    program = torch.export.export(
        Grow(), (x, y), dynamic_shapes=({0: Dim("n", min=2, max=64)}, {0: Dim("rows"), 1: None})
    )
    (n,) = [node for node in program.graph.nodes if node.op == "placeholder"][0].meta["val"].shape
    assert symbol_range(program, n) == (2, 64)  # a SymInt
    assert symbol_range(program, str(n.node.expr)) == (2, 64)  # its name
    rows = [node for node in program.graph.nodes if node.op == "placeholder"][1].meta["val"].shape[0]
    assert symbol_range(program, rows.node.expr) == (0, None)  # Dim("rows"): [0, int_oo] on torch 2.14.1
    count = next(node for node in program.graph.nodes if "nonzero" in str(node.target)).meta["val"].shape[0]
    low, high = symbol_range(program, count)
    assert low == 0 and high is not None and high <= 64  # nonzero's count: at most n
    assert symbol_range(program, "s999") is None  # a symbol the program does not constrain
    assert symbol_range(program, 2 * n.node.expr) is None  # an expression, not a symbol


class FirstRows(torch.nn.Module):
    def forward(self, feats, length):
        return feats.narrow(0, 0, length.item())


def test_runtime_asserts_lists_the_assert_scalar_messages():
    program = torch.export.export(FirstRows(), (torch.randn(6, 4), torch.tensor(3)))
    asserts = runtime_asserts(program)
    assert any("u0 >= 0" in line for line in asserts)
    assert any("u0 <= 6" in line for line in asserts)


def test_runtime_asserts_is_empty_without_data_dependence():
    program = torch.export.export(torch.nn.Linear(3, 2), (torch.randn(2, 3),))
    assert runtime_asserts(program) == []


class WritesConstant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ids = torch.zeros(2, 3, dtype=torch.long)

    def forward(self, x):
        self.ids[:, 0] = 7
        return x + self.ids


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


VIOLATION = """Constraints violated (h, w)! For more information, run with TORCH_LOGS="+dynamic".
  - Not all values of h = L['x'].size()[2] in the specified range 32 <= h <= 512 satisfy the generated guard ...
Suggested fixes:
  _h = Dim('_h', min=8, max=128)
  _w = Dim('_w', min=8, max=128)
  h = 4*_h
  w = 4*_w

The error above occurred when calling torch.export.export. If you would like to view some more information ..."""


class _Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x):
        return self.linear(x)


def test_suggested_fixes_reads_the_block_and_stops_at_the_trailer():
    assert suggested_fixes(VIOLATION) == [
        "_h = Dim('_h', min=8, max=128)",
        "_w = Dim('_w', min=8, max=128)",
        "h = 4*_h",
        "w = 4*_w",
    ]


def test_suggested_fixes_without_a_block():
    assert suggested_fixes("Guard failed: x.size()[0] == 2") == []
    assert suggested_fixes("Suggested fixes:\n  batch = 1") == ["batch = 1"]


def test_user_input_shapes_shows_numbers_and_symbols():
    static = torch.export.export(_Head(), (torch.randn(3, 4),))
    assert user_input_shapes(static) == {"x": "[3, 4]"}

    dynamic = torch.export.export(
        _Head(), (torch.randn(3, 4),), dynamic_shapes={"x": {0: Dim("batch", max=8)}}
    )
    shapes = user_input_shapes(dynamic)
    assert list(shapes) == ["x"]  # parameters are not user inputs
    symbol = shapes["x"].strip("[]").split(", ")[0]
    assert symbol.startswith("s") and shapes["x"] == f"[{symbol}, 4]"
