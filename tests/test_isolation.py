"""`casebook.isolation.run_forked`: a crash in the child is a result, not the end of the test run."""

import ctypes
import os
import signal
import subprocess
import time

import pytest
import torch

from casebook.isolation import run_forked


def test_the_value_comes_back_and_torch_runs_in_the_child_after_the_parent_used_its_threads():
    conv = torch.nn.Conv2d(3, 8, 3)
    images = torch.rand(8, 3, 64, 64)
    expected = conv(images)  # the parent's OpenMP pool is now started: the child must not hang on it
    result = run_forked(lambda: conv(images), timeout_s=60)
    assert result.ok, result.describe()
    torch.testing.assert_close(result.value, expected)


def test_an_exception_comes_back_as_its_type_and_first_line_with_the_traceback():
    def fails():
        raise ValueError("first line\nsecond line")

    result = run_forked(fails, timeout_s=30)
    assert not result.ok and not result.crashed
    assert result.error == "ValueError: first line" and result.error_type == "ValueError"
    assert "in fails" in result.details and result.describe() == "raised ValueError: first line"


def test_a_segmentation_fault_kills_only_the_child():
    result = run_forked(lambda: ctypes.string_at(0), timeout_s=30)
    assert result.crashed and result.signal_name == "SIGSEGV", result
    assert result.describe() == "killed by SIGSEGV"


def test_an_abort_is_a_signal_too():
    result = run_forked(lambda: os.kill(os.getpid(), signal.SIGABRT), timeout_s=30)
    assert result.signal_name == "SIGABRT", result


def test_a_child_past_its_time_limit_is_killed():
    start = time.monotonic()
    result = run_forked(lambda: time.sleep(60), timeout_s=1)
    assert result.timed_out and result.crashed and time.monotonic() - start < 30, result
    assert result.describe().startswith("still running after")


def test_a_value_that_cannot_be_pickled_is_its_own_kind_of_error():
    result = run_forked(lambda: lambda: 1, timeout_s=30)
    assert not result.ok and result.error_type == "Unpicklable", result
    assert "pickle" in result.error.lower(), result


def test_an_error_that_mentions_pickle_is_still_the_functions_error():
    def fails():
        raise RuntimeError("could not pickle the weights")

    assert run_forked(fails, timeout_s=30).error_type == "RuntimeError"


def test_an_exception_whose_message_fails_is_reported_by_its_type():
    class BrokenMessage(Exception):
        def __str__(self):
            raise RuntimeError("no message")

    def fails():
        raise BrokenMessage

    result = run_forked(fails, timeout_s=30)
    assert result.error_type == "BrokenMessage" and not result.crashed, result


def test_a_timeout_also_stops_the_processes_the_child_started(tmp_path):
    marker = tmp_path / "grandchild.pid"

    def starts_a_process_and_hangs():
        process = subprocess.Popen(["sleep", "60"])
        marker.write_text(str(process.pid))
        time.sleep(60)

    result = run_forked(starts_a_process_and_hangs, timeout_s=3)
    assert result.timed_out
    grandchild = int(marker.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.1)
    assert not _alive(grandchild), "the child's own process outlived the time limit"


def _alive(pid: int) -> bool:
    """Whether `pid` still runs; an exited process not yet reaped (a zombie) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_bad_arguments_are_refused_before_forking():
    with pytest.raises(TypeError, match="needs a function to call"):
        run_forked("not a function", timeout_s=1)
    for limit in (0, -1, float("inf"), float("nan"), True, "10"):
        with pytest.raises(ValueError, match="timeout_s must be a positive, finite number of seconds"):
            run_forked(lambda: 1, timeout_s=limit)


def test_the_python_stack_of_a_crash_comes_back_in_the_details():
    def crashes_here():
        ctypes.string_at(0)

    result = run_forked(crashes_here, timeout_s=30)
    assert result.signal_name == "SIGSEGV" and "crashes_here" in result.details, result.details
