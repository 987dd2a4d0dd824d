"""`make test`'s choices are checked before anything runs: a wrong value says which values exist."""

import subprocess

from booklayout import REPO_ROOT


def test_a_wrong_unit_beside_value_names_the_two_it_takes():
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(REPO_ROOT), "test", "UNIT_BESIDE=maybe"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "UNIT_BESIDE=maybe: use UNIT_BESIDE=yes" in result.stderr
    assert "or UNIT_BESIDE=no (first, alone)" in result.stderr
