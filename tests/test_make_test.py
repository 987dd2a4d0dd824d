"""`make test`'s choices are checked before anything runs: a wrong value says which values exist.

Only values that stop make while it reads the Makefile are tried here: `make -n` still runs a recipe
line that calls $(MAKE), and `test` has such lines.
"""

import subprocess

from booklayout import REPO_ROOT


def make_dry_run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(REPO_ROOT), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_wrong_unit_beside_value_names_the_two_it_takes():
    result = make_dry_run("test", "UNIT_BESIDE=maybe")
    assert result.returncode != 0
    assert "UNIT_BESIDE=maybe: use UNIT_BESIDE=yes" in result.stderr
    assert "or UNIT_BESIDE=no (first, alone)" in result.stderr


def test_a_wrong_screenshots_value_names_the_two_it_takes():
    result = make_dry_run("site-check", "SCREENSHOTS=maybe")
    assert result.returncode != 0
    assert "SCREENSHOTS=maybe: use SCREENSHOTS=yes" in result.stderr
    assert "or SCREENSHOTS=no (the default)" in result.stderr
