"""What the book's own processes record while a build runs, for the build report to read.

The package writes here; only the build report's module (`build_times`) reads it back, and nothing
in the package imports that module.

- The page that is executing is named by ``$CASEBOOK_PAGE`` (`PAGE_ENV`), which
  ``scripts/execute_pages.py`` sets; each real TensorRT engine build appends one JSON line to that
  page's file (`record_engine_build`).
- How processes that share the cores wait for work (`share_cores`, `WAIT_POLICY`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from casebook import REPO_ROOT


def utc_now() -> str:
    """The time a record is written, as build records and page runs stamp it."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# How OpenMP threads wait for work, read by PyTorch's OpenMP runtime (libgomp) when it loads.
WAIT_POLICY = "OMP_WAIT_POLICY"


def share_cores(jobs: int, environ: dict[str, str] | None = None) -> str | None:
    """Set OMP_WAIT_POLICY=PASSIVE for the processes this one starts when ``jobs`` of them share the
    machine, unless the reader set a policy (theirs wins); return the policy they will run under.

    PyTorch gives each process one thread per core, and by default an OpenMP thread that waits
    for its siblings spins. Two such processes side by side each keep the cores busy spinning
    while the other's threads wait for them. Measured here (2026-11-26, two cores), ten ResNet-50
    calls at two threads: 2.4-2.7 s alone; side by side 8.6 s each with spinning, 4.3-4.8 s with
    passive waiting. One thread per process was as fast, but changes the rounding of parallel
    sums, and with it results the pages show (which of two equal scores NMS lists first).
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, not {jobs}")
    environ = os.environ if environ is None else environ
    if WAIT_POLICY not in environ and jobs > 1:
        environ[WAIT_POLICY] = "PASSIVE"
    return environ.get(WAIT_POLICY)


# Real TensorRT engine builds, one JSON line per build, in one file per page: the page that executes
# is named by $CASEBOOK_PAGE, which scripts/execute_pages.py sets; builds outside a book build
# (tests, a reader's session) are not recorded.
ENGINE_BUILDS = REPO_ROOT / "_build" / "engine_builds"
PAGE_ENV = "CASEBOOK_PAGE"


def engine_log_path(page: str, folder: Path = ENGINE_BUILDS) -> Path:
    """The file of one page's engine builds: ``case_studies/x.md`` -> ``case_studies__x.jsonl``."""
    return folder / (page.replace("/", "__").removesuffix(".md") + ".jsonl")


def record_engine_build(record: dict, folder: Path = ENGINE_BUILDS) -> Path | None:
    """Append one build's record to the executing page's file; None (nothing written) outside a book build."""
    page = os.environ.get(PAGE_ENV)
    if not page:
        return None
    path = engine_log_path(page, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log:
        log.write(json.dumps({"page": page, "finished": utc_now(), **record}) + "\n")
    return path
