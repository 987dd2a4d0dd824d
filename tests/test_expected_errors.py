"""expect_error: a failure a page reproduces must still happen, with its type and message."""

import re

import pytest
import torch

from casebook.expected_errors import expect_error


class DataDependentBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x + 1
        return x - 1


def test_expect_error_catches_and_shows_the_expected_error(capsys):
    with expect_error(RuntimeError, "Could not guard on data-dependent expression") as caught:
        torch.export.export(DataDependentBranch(), (torch.randn(3),))
    assert type(caught.exception).__name__ == "GuardOnDataDependentSymNode"
    assert "raised as expected" in capsys.readouterr().out


def test_expect_error_accepts_a_regular_expression():
    with expect_error(ValueError, re.compile(r"code \d+")):
        raise ValueError("failed with code 17")


def test_expect_error_fails_when_nothing_is_raised():
    with pytest.raises(AssertionError, match="ran without error"):
        with expect_error(RuntimeError, "anything"):
            pass


def test_expect_error_fails_on_a_different_type():
    with pytest.raises(AssertionError, match="expected builtins.KeyError"):
        with expect_error(KeyError, "x"):
            raise ValueError("x")


def test_expect_error_fails_when_the_message_changed():
    with pytest.raises(AssertionError, match="is stale"):
        with expect_error(ValueError, "old wording"):
            raise ValueError("new wording")


def test_raised_at_names_the_innermost_matching_frame():
    def inner():
        raise ValueError("boom")

    with expect_error(ValueError, "boom", show=False) as caught:
        inner()
    assert caught.raised_at("test_expected_errors.py").endswith('in inner: raise ValueError("boom")')
    with pytest.raises(ValueError, match="no frame of the traceback is in a file whose path contains"):
        caught.raised_at("/no/such/library/")


def test_graph_lines_limits_the_partial_graph_shown(capsys):
    with expect_error(RuntimeError, "Could not guard", graph_lines=2) as caught:
        torch.export.export(DataDependentBranch(), (torch.randn(3),))
    out = capsys.readouterr().out
    assert caught.partial_graph  # non-strict export attaches the graph it traced before failing
    shown = out.split("last lines:\n", 1)[1].strip().splitlines()
    assert shown[0].strip().startswith("... (") and "earlier lines in .partial_graph" in shown[0]
    assert [line.strip() for line in shown[1:]] == [
        line.strip() for line in caught.partial_graph.strip().splitlines()[-2:]
    ]


def test_expect_error_refuses_nonsense_limits():
    with pytest.raises(ValueError, match="graph_lines >= 0"):
        with expect_error(ValueError, "x", graph_lines=-1):
            pass
