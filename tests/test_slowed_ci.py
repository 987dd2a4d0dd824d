"""scripts/slowed_ci.py: a command runs beside busy neighbours, its exit status is kept, and a run
past the limit is stopped."""

import subprocess
import sys

import pytest

from booklayout import REPO_ROOT

SCRIPT = str(REPO_ROOT / "scripts" / "slowed_ci.py")


def _run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def test_the_command_runs_beside_one_neighbour_per_core_and_its_status_is_kept():
    probe = "import os, sys; sys.exit(7)"
    result = _run("--limit-min", "1", "--", sys.executable, "-c", probe)
    assert result.returncode == 7, result.stderr
    assert "busy neighbour(s), at most 1 min" in result.stdout
    assert "exit status 7 after" in result.stdout


@pytest.mark.slow
def test_a_command_past_the_limit_is_stopped():
    result = _run("--limit-min", "0.02", "--", sys.executable, "-c", "import time; time.sleep(30)")
    assert result.returncode == 124
    assert "stopped after 0.02 min" in result.stderr


def test_a_bad_limit_is_refused():
    result = _run("--limit-min", "0")
    assert result.returncode == 2 and "--limit-min must be positive, not 0.0" in result.stderr


def test_it_runs_without_the_installed_packages_as_before_the_venv_exists(tmp_path):
    # -S: no site-packages, so neither the casebook package nor anything pip installed is importable.
    result = subprocess.run(
        [sys.executable, "-S", SCRIPT, "--limit-min", "1", "--", sys.executable, "-c", "pass"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "exit status 0 after" in result.stdout
