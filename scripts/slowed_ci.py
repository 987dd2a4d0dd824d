"""Run CI with the machine made about twice as slow: one CPU-bound neighbour per core, all along.

The CI machines differ in speed from day to day, so the build must pass on a machine twice as slow
as a quiet one. This runs a command (by default ``bash .ci/run`` with ``CI=true``) with one spinning
process per core beside it, each in a session of its own, as each page's kernel is: Linux shares the
CPU between sessions first (autogroup), so neighbours in this script's session would take their share
from the unit tests that run there, and hardly from the pages. It prints how long the command took,
and its exit status is the command's. The neighbours stop when the command ends, or after ``--limit-min`` minutes. In that
second case the command is stopped too: a run past that limit is a failure in itself.

Usage: ``python3 scripts/slowed_ci.py [--limit-min 150] [-- command ...]``. Run it from a fresh
clone to reproduce what CI does. It needs only the standard library (``casebook.busy``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

# Its own root, not casebook.REPO_ROOT: this script runs before the venv (and the package) exists.
REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
from casebook.busy import busy_cores  # noqa: E402  (stdlib only: runs before the venv exists)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--limit-min", type=float, default=150, help="stop everything after this (default 150)"
    )
    parser.add_argument("command", nargs="*", help="what to run (default: bash .ci/run, with CI=true)")
    args = parser.parse_args(argv)
    if not args.limit_min > 0:
        parser.error(f"--limit-min must be positive, not {args.limit_min}")
    command = args.command or ["bash", ".ci/run"]
    environment = {**os.environ, "CI": "true"} if not args.command else None
    cores = os.cpu_count() or 1
    print(
        f"slowed_ci: {' '.join(command)} beside {cores} busy neighbour(s), at most {args.limit_min:g} min",
        flush=True,
    )
    start = time.monotonic()
    with busy_cores(cores, seconds=args.limit_min * 60):
        try:
            status = subprocess.run(
                command, cwd=REPO_ROOT, env=environment, timeout=args.limit_min * 60
            ).returncode
        except subprocess.TimeoutExpired:
            print(f"slowed_ci: stopped after {args.limit_min:g} min", file=sys.stderr)
            status = 124
    print(f"slowed_ci: exit status {status} after {(time.monotonic() - start) / 60:.1f} min", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
