"""Run a short Python program in a fresh interpreter, the way a deployment loads an artifact.

A notebook's process has imported and registered everything its cells touched, so loading a saved
program there proves nothing about the server that will load it. `run_python` starts a new
interpreter (this one's executable, the repository on its path) with only the code given, and
returns what it printed and the exception it died of, if any, as one line (``"RuntimeError: ..."``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from casebook import REPO_ROOT

# The last line of a Python traceback: "ModuleName.ErrorType: message" (or the bare type).
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)\b.*$")


@dataclass(frozen=True)
class ProcessResult:
    """What the fresh interpreter printed, its exit code and the exception that ended it, if any."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def error(self) -> str:
        """The traceback's last line (``"RuntimeError: ..."``), or ``""`` when the run succeeded."""
        if self.ok:
            return ""
        lines = [line for line in self.stderr.splitlines() if _EXCEPTION_LINE.match(line)]
        return lines[-1] if lines else f"exit code {self.returncode} (no Python traceback on stderr)"


def run_python(
    code: str, *, timeout_s: float = 300, pythonpath: Sequence[str | os.PathLike[str]] = ()
) -> ProcessResult:
    """Run `code` in a new Python process (this interpreter, the repository importable) and wait.

    ``pythonpath`` folders go first on the process's path (a server's environment that differs from
    this one, such as Torch-TensorRT for RTX's folder).

    Raises `TimeoutError` if it runs longer than `timeout_s`; a run that raises is a normal result
    (``ok`` is False and ``error`` holds the exception's line), since showing that failure is usually
    the point.
    """
    if not isinstance(code, str) or not code.strip():
        raise TypeError(f"run_python needs the program's source as a non-empty str, got {code!r}")
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [*map(str, pythonpath), str(REPO_ROOT), env.get("PYTHONPATH", "")])
    )
    try:
        completed = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            cwd=REPO_ROOT,
        )
    except subprocess.TimeoutExpired as exc:
        raise TimeoutError(
            f"the fresh Python process did not finish in {timeout_s:g} s; raise timeout_s if the "
            "program is expected to take that long"
        ) from exc
    return ProcessResult(completed.returncode, completed.stdout, completed.stderr)
