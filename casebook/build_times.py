"""How long each page took to execute, and which cell took longest: recorded by the build, shown in its report.

``scripts/execute_pages.py`` executes the pages before the Sphinx build and records one `PageRun` per
page in ``_build/page_times.json``. The build report renders them (`page_times_table`), and the
build fails when a cell costs more than a third of the cell timeout (`over_budget`): a page that
creeps towards its timeout fails there first, while there is still room to split or slim it. A
cell's cost is the smaller of its wall-clock and CPU seconds, so a neighbour that slows the
machine does not fail the build.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path

from casebook import REPO_ROOT
from casebook.build_records import ENGINE_BUILDS, utc_now

PAGE_TIMES = REPO_ROOT / "_build" / "page_times.json"
# A cell may take at most this share of the cell timeout on the machine that ran it.
CELL_SHARE = 1 / 3


def _machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores"


@dataclass
class PageRun:
    """One execution of a page: how long it took, where its time went, and how it ended."""

    page: str  # path relative to the book's folder: "case_studies/torchvision_detection_zoo.md"
    seconds: float
    cell_seconds: list[float]  # per code cell, in page order
    error: str | None = None
    finished: str = field(default_factory=utc_now)
    jobs: int = 1  # pages executing at the same time
    timeout: float = 900  # the cell timeout it ran under: the book's, or the page's own
    machine: str = field(default_factory=_machine)
    openmp_wait: str | None = None  # the kernel's OMP_WAIT_POLICY; None: OpenMP's default (spinning)
    # CPU time of the kernel and of the processes it waited for (engine builds, export processes);
    # None in records from before it was measured
    cpu_seconds: float | None = None
    # per code cell, the CPU seconds of the kernel and its descendants while it ran (None for a cell
    # that was not measured: it timed out, its kernel died); None in records from before it was measured
    cell_cpu_seconds: list[float | None] | None = None

    @property
    def longest_cell(self) -> tuple[int, float]:
        """(index among the code cells, seconds) of the slowest code cell; (-1, 0.0) without any."""
        if not self.cell_seconds:
            return -1, 0.0
        index = max(range(len(self.cell_seconds)), key=self.cell_seconds.__getitem__)
        return index, self.cell_seconds[index]

    def cell_cpu(self, index: int) -> float | None:
        """A code cell's CPU seconds; None where they were not measured."""
        if self.cell_cpu_seconds is None or index >= len(self.cell_cpu_seconds):
            return None
        return self.cell_cpu_seconds[index]

    def cell_cost(self, index: int) -> float:
        """What a code cell cost: the smaller of its wall-clock and its CPU seconds.

        A neighbour on the machine (another page, the unit tests) stretches a cell's wall clock but
        not its CPU time; a cell whose processes work in parallel uses more CPU seconds than wall
        seconds, and there the wall clock is what it cost. Without CPU seconds recorded, the wall clock.
        """
        wall, cpu = self.cell_seconds[index], self.cell_cpu(index)
        return wall if cpu is None else min(wall, cpu)

    @property
    def costliest_cell(self) -> tuple[int, float]:
        """(index among the code cells, cost) of the cell that cost most (`cell_cost`); (-1, 0.0) without any."""
        if not self.cell_seconds:
            return -1, 0.0
        index = max(range(len(self.cell_seconds)), key=self.cell_cost)
        return index, self.cell_cost(index)


def load_page_times(path: Path = PAGE_TIMES) -> dict[str, PageRun]:
    """The last successful run of every page, by page path (empty before the first build)."""
    if not path.is_file():
        return {}
    return {name: PageRun(**run) for name, run in json.loads(path.read_text()).items()}


def save_page_times(times: dict[str, PageRun], path: Path = PAGE_TIMES) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({name: asdict(run) for name, run in times.items()}, indent=1, sort_keys=True) + "\n"
    )


def over_budget(times: dict[str, PageRun]) -> list[str]:
    """A line for each page whose costliest cell cost more than CELL_SHARE of its cell timeout.

    A cell's cost is the smaller of its wall-clock and CPU seconds (`PageRun.cell_cost`), so a busy
    machine slows the build without failing it; the wall-clock timeout stays the hard stop.
    """
    lines = []
    for name, run in sorted(times.items()):
        index, cost = run.costliest_cell
        limit = run.timeout * CELL_SHARE
        if cost > limit:
            wall, cpu = run.cell_seconds[index], run.cell_cpu(index)
            measured = (
                f"{wall:.0f} s (no CPU seconds recorded)"
                if cpu is None
                else f"{wall:.0f} s of wall clock and {cpu:.0f} CPU seconds"
            )
            lines.append(
                f"{name}: code cell {index + 1} cost {cost:.0f} s ({measured}), more than a third "
                f"of the {run.timeout:.0f} s cell timeout ({limit:.0f} s)"
            )
    return lines


def page_times_table(times: dict[str, PageRun]):
    """One row per page, slowest first: total seconds, CPU seconds, the cell that cost most (its wall
    clock, its CPU seconds) and the share of the timeout its cost is (`PageRun.cell_cost`)."""
    import pandas as pd

    rows = []
    for name, run in times.items():
        index, cost = run.costliest_cell
        cpu = run.cell_cpu(index) if index >= 0 else None
        rows.append(
            {
                "page": name,
                "seconds": round(run.seconds),
                "CPU seconds": "" if run.cpu_seconds is None else round(run.cpu_seconds),
                "costliest cell": f"code cell {index + 1}" if index >= 0 else "",
                "its seconds": round(run.cell_seconds[index]) if index >= 0 else 0,
                "its CPU seconds": "" if cpu is None else round(cpu),
                "its cost (s)": round(cost),
                "cell timeout (s)": round(run.timeout),
                "share of the timeout": f"{cost / run.timeout:.0%}",
                "pages at once": run.jobs,
                "OpenMP wait": run.openmp_wait or "",
                "finished (UTC)": run.finished,
            }
        )
    frame = pd.DataFrame(rows)
    return frame.sort_values("seconds", ascending=False).reset_index(drop=True) if rows else frame


# Fresh-clone CI runs, recorded by hand after each one (the machine that runs CI keeps nothing), in
# this file beside the build report's page.
RECORDED_RUNS_FILE = "build_runs.json"
BUILD_REPORT_PAGE = "build_report"


def recorded_runs_path(root: Path = REPO_ROOT) -> Path:
    """Where the recorded runs are: beside the build report's page, wherever _toc.yml puts it."""
    from casebook import toc

    return toc.source(BUILD_REPORT_PAGE, root).parent / RECORDED_RUNS_FILE


def recorded_runs(path: Path | None = None) -> list[dict]:
    """The recorded fresh-clone CI runs, oldest first."""
    return json.loads((path or recorded_runs_path()).read_text())["runs"]


def runs_table(runs: list[dict]):
    """One row per recorded run: the minutes of each step, the total, and how it ended. Column
    "machine" says how the machine was loaded: "slowed 2x" is a run of `scripts/slowed_ci.py`, with
    a CPU-bound neighbour on each core (empty for runs recorded before the column)."""
    import pandas as pd

    columns = [
        "date",
        "machine",
        "change",
        "pages at once",
        "install and lint (min)",
        "unit tests (min)",
        "notebooks and site (min)",
        "site checks (min)",
        "total (min)",
        "outcome",
    ]
    frame = pd.DataFrame([{column: run.get(column) for column in columns} for run in runs], dtype=object)
    return frame.where(frame.notna(), "")  # a step not timed in a run shows as an empty cell


def prior_page_seconds(path: Path | None = None) -> dict[str, float]:
    """Each page's seconds in the latest recorded run that timed pages (empty when none did), by page
    name ("case_studies/x.md" -> "x"), so a page moved since that run keeps its time."""
    path = path or recorded_runs_path()
    if not path.is_file():
        return {}
    for run in reversed(recorded_runs(path)):
        if run.get("page seconds"):
            return {Path(page).stem: seconds for page, seconds in run["page seconds"].items()}
    return {}


def engine_builds_table(folder: Path = ENGINE_BUILDS):
    """One row per page that built engines in its last execution: builds, their seconds, the peak memory."""
    import pandas as pd

    records = [
        json.loads(line)
        for path in sorted(folder.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    if not records:
        return pd.DataFrame(
            columns=["page", "builds", "seconds", "CPU seconds", "engines built", "blocks failed", "peak GB"]
        )
    frame = pd.DataFrame(records)
    if "cpu_seconds" not in frame:  # records written before builds reported their CPU time
        frame["cpu_seconds"] = float("nan")
    table = frame.groupby("page").agg(
        builds=("seconds", "size"),
        seconds=("seconds", "sum"),
        # min_count: a page whose records lack CPU time shows NaN, not 0
        **{"CPU seconds": ("cpu_seconds", lambda column: column.sum(min_count=len(column)))},
        **{"engines built": ("engines", "sum"), "blocks failed": ("failed", "sum")},
        peak_mb=("peak_rss_mb", "max"),
    )
    table["seconds"] = table["seconds"].round(1)
    table["CPU seconds"] = table["CPU seconds"].astype(float).round(1)
    table["peak GB"] = (table.pop("peak_mb") / 1024).round(2)
    return table.sort_values("seconds", ascending=False).reset_index()


# What the whole of a fresh clone's `make test` (install, lint, pages, unit tests, site checks) may
# take on a quiet 2-core machine, in minutes: one figure, engine builds and every page included.
CI_BUDGET_MIN = 45.0


def engine_builds_wall_minutes(table, cores: int) -> float | None:
    """The minutes of a book build's wall time the engine builds in ``table`` (`engine_builds_table`)
    take: their CPU seconds over the machine's ``cores``. Pages execute two at a time and a page's builds
    run beside its other cells, so the cores are busy throughout and every CPU second a build uses is
    taken from other work. None when a page's records lack CPU time (written before builds reported it)."""
    if cores < 1:
        raise ValueError(f"cores must be at least 1, got {cores}")
    cpu = table["CPU seconds"]
    if cpu.isna().any():
        return None
    return float(cpu.sum()) / cores / 60
