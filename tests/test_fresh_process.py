"""`run_python`: a program in a fresh interpreter, its output, and the exception that ended it."""

import pytest

from casebook.fresh_process import run_python


def test_a_clean_run_returns_its_output_and_no_error():
    result = run_python("import casebook, sys; print('imported', 'torch' in sys.modules)")
    assert result.ok and result.error == ""
    assert result.stdout.strip() == "imported False"


@pytest.mark.slow
def test_a_failed_run_reports_the_last_exception_line():
    result = run_python(
        """
        import torch
        raise RuntimeError("We ran into an error when deserializing the saved file.")
        """
    )
    assert not result.ok and result.returncode == 1
    assert result.error == "RuntimeError: We ran into an error when deserializing the saved file."


def test_a_qualified_exception_name_is_kept():
    result = run_python("import json; json.loads('{')")
    assert result.error.startswith("json.decoder.JSONDecodeError: Expecting property name")


def test_an_exit_without_a_traceback_says_so():
    assert run_python("import sys; sys.exit(3)").error == "exit code 3 (no Python traceback on stderr)"


def test_a_run_past_its_time_limit_raises_a_timeout_that_says_what_to_change():
    with pytest.raises(TimeoutError, match="did not finish in 0.5 s; raise timeout_s"):
        run_python("import time; time.sleep(10)", timeout_s=0.5)


@pytest.mark.parametrize("code", ["", "   \n", None, b"print(1)"])
def test_code_must_be_a_non_empty_string(code):
    with pytest.raises(TypeError, match="non-empty str"):
        run_python(code)


def test_the_time_limit_must_be_positive():
    with pytest.raises(ValueError, match="timeout_s must be positive, got 0"):
        run_python("print(1)", timeout_s=0)


def test_extra_path_folders_come_first(tmp_path):
    (tmp_path / "only_here.py").write_text("WHERE = 'the extra folder'\n")
    result = run_python("import only_here\nprint(only_here.WHERE)", pythonpath=[tmp_path])
    assert result.ok and result.stdout.strip() == "the extra folder"
    assert "ModuleNotFoundError" in run_python("import only_here").error
