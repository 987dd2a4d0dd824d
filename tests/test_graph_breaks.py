"""casebook.logs: explain rows and the captured graph_breaks log."""

import sys

import torch

from casebook.logs import GraphBreakLog, explain_graph_breaks, graph_break_log


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
