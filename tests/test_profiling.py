"""Per-call split of a call's time into PyTorch operators and the rest (casebook.profiling)."""

import os

import pytest
import torch

from casebook.profiling import native_stderr_collected, operator_time


def test_operator_time_splits_wall_time_into_operators_and_the_rest():
    conv = torch.nn.Conv2d(3, 8, 3).eval()
    timing = operator_time(conv, (torch.randn(1, 3, 32, 32),), runs=3, label="conv")
    assert timing.label == "conv"
    assert timing.ms("aten::mkldnn_convolution", "aten::convolution", "aten::_convolution") > 0
    assert timing.ms("aten::no_such_operator") == 0
    assert sum(timing.operator_ms.values()) + timing.outside_operators_ms == pytest.approx(timing.wall_ms)


def test_the_profilers_native_lines_do_not_reach_stderr(capfd):
    operator_time(torch.nn.ReLU(), (torch.randn(4),), runs=1)
    assert "profiler_start" not in capfd.readouterr().err


def test_native_stderr_is_collected_and_restored(capfd):
    with native_stderr_collected() as lines:
        os.write(2, b"from native code\n")
    os.write(2, b"after the block\n")
    assert lines == ["from native code"]
    assert capfd.readouterr().err == "after the block\n"


def test_operator_time_needs_a_run():
    with pytest.raises(ValueError, match="runs=0: profile at least one call"):
        operator_time(torch.nn.ReLU(), (torch.randn(4),), runs=0)
