"""casebook.introspect.symbol_range: the one reader of a program's size ranges."""

import torch
from torch.export import Dim

from casebook.introspect import symbol_range


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
