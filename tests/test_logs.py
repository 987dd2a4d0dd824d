"""casebook.logs: explain rows, the captured graph_breaks log, the shape log and the guards added."""

import logging
import sys

import torch
import torch.fx.experimental._config as shape_config

from casebook.logs import SHAPE_LOGGER, GraphBreakLog, explain_graph_breaks, graph_break_log, shape_log


def breaks_on_branch(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


def no_break(x):
    return (x * 2).relu()


def test_explain_graph_breaks_counts_a_data_dependent_branch():
    torch._dynamo.reset()
    row = explain_graph_breaks(breaks_on_branch, torch.ones(3))
    assert row["graph breaks"] == 1 and row["graphs"] >= 2
    assert row["break reasons"]


def test_explain_graph_breaks_reports_a_clean_function():
    torch._dynamo.reset()
    assert explain_graph_breaks(no_break, torch.ones(3)) == {
        "graphs": 1,
        "graph breaks": 0,
        "break reasons": "",
    }


def test_graph_break_log_captures_and_resets():
    torch._dynamo.reset()
    with graph_break_log() as log:
        torch.compile(breaks_on_branch, backend="eager")(torch.ones(3))
    assert log.breaks == 1
    assert "Data-dependent branching" in log.summary()
    assert all("[__graph_breaks]" not in line for line in log.lines)
    assert not torch._logging._internal.log_state.is_artifact_enabled("graph_breaks")


def test_graph_break_log_passes_other_stderr_through(capsys):
    with graph_break_log() as log:
        print("not a log line", file=sys.stderr)
    assert log.lines == []
    assert "not a log line" in capsys.readouterr().err


def test_summary_keeps_header_reason_and_explanation_only():
    log = GraphBreakLog(
        [
            "Graph break in user code at f.py:3",
            "Graph Break Reason: Data-dependent branching",
            "  Explanation: Detected data-dependent branching.",
            "  Hint: Use `torch.cond`.",
            "",
            "User code traceback:",
        ]
    )
    assert log.breaks == 1
    assert log.summary().splitlines() == [
        "Graph break in user code at f.py:3",
        "Graph Break Reason: Data-dependent branching",
        "  Explanation: Detected data-dependent branching.",
    ]


class FirstRows(torch.nn.Module):
    def forward(self, feats, length):
        return feats.narrow(0, 0, length.item())


class Steps(torch.nn.Module):
    def forward(self, x):
        return torch.linspace(0.0, 1.0, x.shape[0])  # `steps` is an int: specialises x.shape[0]


def test_shape_log_collects_instead_of_printing_and_restores_the_logger(capfd):
    logger = logging.getLogger(SHAPE_LOGGER)
    before = (logger.level, logger.propagate, list(logger.handlers))
    with shape_log() as log:
        torch.export.export(FirstRows(), (torch.randn(6, 4), torch.tensor(3)))
    assert log.matching("create_unbacked_symint u0")
    assert all("for more info run with" not in line for line in log.matching("runtime_assert"))
    assert "create_unbacked_symint" not in capfd.readouterr().err
    assert (logger.level, logger.propagate, list(logger.handlers)) == before


def test_user_frames_point_at_the_line_that_added_a_guard():
    x = torch.randn(5)
    with shape_log() as log:
        torch.export.export(Steps(), (x,), dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    guard = log.matching("[guard added]")[0].split(" [guard added]")[0].removeprefix("eval ")
    with shape_config.patch(extended_debug_guard_added=guard), shape_log() as log:
        torch.export.export(Steps(), (x,), dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    frames = log.user_frames(guard)
    assert frames and __file__ in frames[-1] and "torch.linspace" in frames[-1]
    assert all("site-packages" not in frame for frame in frames)


def test_guards_added_collects_guard_lines_and_prints_nothing(capsys):
    import torch

    from casebook.logs import guards_added

    class Reshape(torch.nn.Module):
        def forward(self, x):
            return x.reshape(-1) if x.shape[0] > 3 else x

    with guards_added() as guards:
        torch.export.export(Reshape(), (torch.randn(8, 2),), dynamic_shapes=({0: torch.export.Dim.AUTO},))
    assert any("[guard added]" in line and "s" in line for line in guards), guards
    assert not any("for more info run with" in line for line in guards)
    assert "[guard added]" not in capsys.readouterr().err
