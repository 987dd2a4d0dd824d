"""Busy neighbours: CPU-bound processes started beside a measurement or a build, and always stopped.

The book is built two pages at a time, and CI machines are shared, so a timing may run beside other
work. `busy_cores` makes that happen on purpose, for a bounded time: the build report uses it to show
how far a busy neighbour moves a measured ratio, and ``scripts/slowed_ci.py`` uses it to run the
whole CI with every core shared.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

# Each neighbour spins until its own deadline, so it stops even if the parent dies without cleaning up.
_SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def busy_cores(count: int | None = None, *, seconds: float = 600) -> Iterator[list[subprocess.Popen]]:
    """Run `count` CPU-bound processes (default: one per core) for the block, at most `seconds` long.

    They are stopped when the block ends, however it ends; each also stops by itself after `seconds`.
    """
    count = (os.cpu_count() or 1) if count is None else count
    if count < 1:
        raise ValueError(f"busy_cores(count={count}): start at least one process, or do not use busy_cores")
    if not seconds > 0:
        raise ValueError(f"busy_cores(seconds={seconds}): give the neighbours a positive time limit")
    # Each in a session of its own, as Jupyter starts each kernel: where Linux groups processes by
    # session for scheduling (autogroup, on here), neighbours in the caller's session would share that
    # one session's CPU share, and the pages, in their kernels' sessions, would barely feel them.
    spinners = [
        subprocess.Popen([sys.executable, "-c", _SPIN.format(seconds=float(seconds))], start_new_session=True)
        for _ in range(count)
    ]
    try:
        yield spinners
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()
