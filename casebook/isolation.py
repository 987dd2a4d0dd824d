"""Run a function in a forked child process, so that a crash inside torch ends the child, not us.

A segmentation fault or an abort in PyTorch's C++ code cannot be caught in Python: it ends the
process. `run_forked` runs the function in a child made with ``fork`` (the parent's imports and
objects are already there, so a small step costs milliseconds, not an interpreter start) and reports
what happened: the value, the exception as text, the signal that killed the child, or the time limit.

The child runs torch on one thread: GNU OpenMP's thread pool does not survive ``fork``, and a child
that starts a parallel kernel after the parent used one waits forever (measured on 2.14.1).
"""

from __future__ import annotations

import contextlib
import faulthandler
import math
import os
import pickle
import select
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Forked:
    """What happened in the child: exactly one of ``value`` (with ``ok``), ``error``, ``signal_name``
    or ``timed_out`` tells it. ``error`` is ``"TypeName: first line of the message"``; ``details``
    holds the child's traceback, or, for a child killed by a signal, the end of what it wrote to
    stderr (Python's `faulthandler` writes the stack of the crash there)."""

    ok: bool
    value: Any = None
    error: str = ""
    error_type: str = ""
    signal_name: str = ""
    timed_out: bool = False
    seconds: float = 0.0
    details: str = ""

    @property
    def crashed(self) -> bool:
        """The child died of a signal (a segmentation fault, an abort) or ran out of time."""
        return bool(self.signal_name) or self.timed_out

    def describe(self) -> str:
        """One line: what the child did, for a report or an assertion message."""
        if self.ok:
            return f"returned in {self.seconds:.1f} s"
        if self.signal_name:
            return f"killed by {self.signal_name}"
        if self.timed_out:
            return f"still running after {self.seconds:.0f} s (time limit)"
        return f"raised {self.error}"


def run_forked(function: Callable[[], Any], *, timeout_s: float) -> Forked:
    """Call `function()` in a forked child and return what happened as a `Forked`.

    The return value must be picklable (it is sent back through a pipe): one that is not comes back
    as ``error_type == "Unpicklable"``, told apart from an exception the function raised, which
    comes back as text (exceptions from torch often are not picklable). A child still running after
    `timeout_s` seconds is killed, with the processes it started.
    """
    if not callable(function):
        raise TypeError(f"run_forked needs a function to call, got {type(function).__name__}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s < math.inf:
        raise ValueError(f"timeout_s must be a positive, finite number of seconds, got {timeout_s!r}")
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile() as child_stderr:
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the caller's code
            _child(function, read_end, write_end, child_stderr.fileno())
        _own_group(pid)
        os.close(write_end)
        try:
            payload, timed_out = _read_until_closed(read_end, start + timeout_s)
        except BaseException:  # Ctrl-C while waiting: the child must not outlive the wait
            _kill_group(pid)
            os.waitpid(pid, 0)
            raise
        if timed_out:
            _kill_group(pid)
        _, status = os.waitpid(pid, 0)
        seconds = time.monotonic() - start
        child_stderr.seek(0)
        stderr_tail = _crash_stack(child_stderr.read().decode(errors="replace"))
    if timed_out:
        return Forked(ok=False, timed_out=True, seconds=seconds, details=stderr_tail)
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        return Forked(ok=False, signal_name=name, seconds=seconds, details=stderr_tail)
    try:
        kind, body = pickle.loads(payload)
    except Exception as error:  # the child exited before it wrote a whole message, or wrote garbage
        what = "no result" if not payload else f"a result this process cannot read ({first_line(error)})"
        return Forked(
            ok=False,
            error=f"ChildExited: exit code {os.WEXITSTATUS(status)} and {what}",
            error_type="ChildExited",
            seconds=seconds,
            details=stderr_tail,
        )
    if kind == "value":
        return Forked(ok=True, value=body, seconds=seconds)
    error_type, line, details = body
    return Forked(
        ok=False, error=f"{error_type}: {line}", error_type=error_type, seconds=seconds, details=details
    )


def first_line(error: BaseException) -> str:
    """``Type: first line of the message``; an exception whose message cannot be made is named only."""
    try:
        lines = str(error).strip().splitlines()
    except Exception:  # a __str__ that raises: the type is still worth reporting
        lines = []
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _own_group(pid: int) -> None:
    """Make the child lead its own process group from this side too, so that a kill right after the
    fork finds the group whichever of the two `setpgid` calls ran first."""
    try:
        os.setpgid(pid, pid)
    except ProcessLookupError:  # the child has already exited: waitpid collects it
        return
    except PermissionError:  # the child's own call won the race: the group exists
        return


def _kill_group(pid: int) -> None:
    """Kill the child and every process it started (it leads its own process group)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # the group is gone already: kill the child alone, if it is still here
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _child(function: Callable[[], Any], read_end: int, write_end: int, stderr_fd: int) -> None:
    """Run `function` and write the result into the pipe; whatever happens, exit here (a child that
    returned into the caller's code would go on as a second copy of it)."""
    code = 1
    try:
        os.setpgid(0, 0)  # its own process group, so that a timeout kills what it started too
        os.close(read_end)
        os.dup2(stderr_fd, 2)  # what the child prints to stderr is kept for the parent, not shown
        faulthandler.enable(file=2)  # the Python stack of a crash, written to that file
        import torch

        torch.set_num_threads(1)  # see the module docstring: OpenMP's pool does not survive fork
        try:
            value = function()
        except BaseException as error:  # everything the function raises is the result, sent as text
            data = pickle.dumps(
                ("error", (type(error).__name__, _message_line(error), traceback.format_exc()))
            )
        else:
            try:
                data = pickle.dumps(("value", value))
                code = 0
            except Exception as error:  # the function ran; its result cannot cross the pipe
                data = pickle.dumps(("error", ("Unpicklable", first_line(error), traceback.format_exc())))
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(data)
    finally:
        os._exit(code)  # skip the parent's atexit handlers and pytest's teardown in the child


def _message_line(error: BaseException) -> str:
    text = first_line(error)
    return text.partition(": ")[2]


def _crash_stack(stderr: str, limit: int = 4000) -> str:
    """faulthandler's report (the innermost frame comes first, so its start is kept), else the end of
    what the child wrote."""
    start = stderr.rfind("Fatal Python error")
    return stderr[start : start + limit] if start >= 0 else stderr[-limit:]


def _read_until_closed(read_end: int, deadline: float) -> tuple[bytes, bool]:
    """Everything the child writes, read as it comes (a full pipe would block the child); True when
    the deadline passed first."""
    chunks = []
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"".join(chunks), True
            ready, _, _ = select.select([read_end], [], [], left)
            if not ready:
                continue
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                return b"".join(chunks), False
            chunks.append(chunk)
    finally:
        os.close(read_end)


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Torch on one thread while the block runs, as in a child of `run_forked`: a result computed
    here then sums in the order a child's would (a convolution's sums come out in another order on
    another number of threads, and a detector's boxes differ by more than a comparison allows)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
