"""casebook.busy: neighbours start, keep a core busy, and always stop."""

import os
import time

import pytest

from casebook.busy import busy_cores


def test_neighbours_run_during_the_block_and_stop_after_it():
    with busy_cores(2, seconds=30) as spinners:
        time.sleep(0.3)
        assert len(spinners) == 2 and all(spinner.poll() is None for spinner in spinners)
    assert all(spinner.poll() is not None for spinner in spinners)


def test_each_neighbour_runs_in_a_session_of_its_own_as_a_page_kernel_does():
    # under autogroup scheduling, neighbours in the caller's session would not compete with kernels
    with busy_cores(2, seconds=30) as spinners:
        sessions = {os.getsid(spinner.pid) for spinner in spinners}
        assert sessions == {spinner.pid for spinner in spinners}
        assert os.getsid(0) not in sessions


def test_neighbours_stop_when_the_block_raises():
    with pytest.raises(RuntimeError, match="planted"):
        with busy_cores(1, seconds=30) as spinners:
            raise RuntimeError("planted")
    assert spinners[0].poll() is not None


def test_a_neighbour_stops_by_itself_at_its_deadline():
    with busy_cores(1, seconds=0.5) as spinners:
        spinners[0].wait(timeout=20)
        assert spinners[0].returncode == 0


def test_one_neighbour_per_core_by_default():
    with busy_cores(seconds=5) as spinners:
        assert len(spinners) == os.cpu_count()


@pytest.mark.parametrize(
    ("kwargs", "message"), [({"count": 0}, "at least one"), ({"seconds": 0}, "positive time")]
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        with busy_cores(**kwargs):
            pass
