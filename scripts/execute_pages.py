"""Execute the book's pages two at a time, into the cache that Jupyter Book reads.

Jupyter Book (myst-nb in cache mode) executes a page while Sphinx reads it, so pages run one after
another. Most export work is single-threaded Python, which left one of the CI machine's two cores
idle. This script runs before the Sphinx build. It does four things:

1. It reads every page of the table of contents exactly as myst-nb does.
2. It looks each page up in the jupyter-cache (``_build/.jupyter_cache``).
3. It executes the pages with no cached run, ``--jobs`` at a time, longest first. The order comes
   from each page's last recorded time, so the long pages do not end up last.
4. It caches each result the way myst-nb would.

Sphinx then finds every page in the cache and executes nothing. Two details:

- **Cell timings.** Every cell's duration, and each page's CPU seconds, are recorded in
  ``_build/page_times.json``, which the build report renders.
- **No cell near its timeout.** If any page's costliest cell cost more than a third of its cell
  timeout, the build fails. A cell's cost is the smaller of its wall-clock and CPU seconds (the
  kernel's and its descendants', `CellCpuClock`), so a neighbour that slows the machine does not
  fail the build; the wall-clock timeout stays the hard stop. The timeout is ``execute.timeout``
  in ``_config.yml``, unless the page sets its own (``execution: timeout:`` in its front matter). A page that creeps towards its
  timeout fails here first, while there is still room to split or slim it.

The build report (the page ``build_report``) shows those timings, so it executes last, after every
other page, and on every build.

Usage: ``python scripts/execute_pages.py [--jobs N] [--dry-run]``. ``make build`` runs it after
``scripts/stale_pages.py`` and before ``jupyter-book build``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import multiprocessing
import os
import re
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from casebook import REPO_ROOT, toc
from casebook.build_records import PAGE_ENV, engine_log_path, share_cores
from casebook.build_times import (
    BUILD_REPORT_PAGE,
    PageRun,
    load_page_times,
    over_budget,
    prior_page_seconds,
    recorded_runs_path,
    save_page_times,
)
from casebook.cpu_time import process_tree_cpu_seconds

# Pages whose outputs describe the build itself, by page name: executed after all others, on every build.
RUN_LAST = (BUILD_REPORT_PAGE,)
# myst-nb's name for its own reader of MyST-markdown notebooks, recorded with each cached page.
MYST_NB_READ_FORMAT = {"type": "plugin", "name": "myst_nb_md"}


@dataclass
class Page:
    docname: str  # as in _toc.yml: "case_studies/torchvision_detection_zoo"
    path: Path
    name: str  # the path relative to the book's folder, as page_times.json records it

    @property
    def page_name(self) -> str:
        """The page's file name without folder or suffix: how the book names a page wherever it lives."""
        return toc.page_name(self.docname)

    @property
    def runs_last(self) -> bool:
        return self.page_name in RUN_LAST


def book_settings(root: Path) -> dict:
    """The execution settings and MyST extensions of the book's ``_config.yml``."""
    import yaml

    path = root / "_config.yml"
    if not path.is_file():
        raise SystemExit(f"execute_pages: no book configuration at {path}; run from a Jupyter Book folder")
    config = yaml.safe_load(path.read_text()) or {}
    execute = config.get("execute", {})
    return {
        "timeout": int(execute.get("timeout", 30)),
        "allow_errors": bool(execute.get("allow_errors", False)),
        "extensions": list(config.get("parse", {}).get("myst_enable_extensions", [])),
    }


def is_notebook(path: Path) -> bool:
    """Whether myst-nb executes this page: a notebook, or MyST markdown with notebook front matter."""
    from myst_nb.core.read import is_myst_markdown_notebook

    return path.suffix == ".ipynb" or (path.is_file() and is_myst_markdown_notebook(path.read_text()))


def toc_pages(root: Path) -> list[Page]:
    """The pages of the book's table of contents that myst-nb treats as notebooks."""
    try:
        sources = {docname: toc.docname_source(docname, root) for docname in toc.docnames(root)}
    except toc.TocError as error:
        raise SystemExit(f"execute_pages: {error}") from error
    unlisted = toc.unlisted_pages(root)
    if unlisted:
        raise SystemExit(f"execute_pages: {toc.unlisted_pages_message(unlisted)}")
    return [
        Page(docname, path, str(path.relative_to(root)))
        for docname, path in sources.items()
        if is_notebook(path)
    ]


def chosen_pages(pages: list[Page], wanted: list[str], root: Path) -> list[Page]:
    """The pages named in `wanted` (paths such as ``notebooks/x.md``, or page names), in that order."""
    by_name = {page.page_name: page for page in pages}
    chosen = []
    for item in wanted:
        page = by_name.get(Path(item).stem)
        if page is None:
            if Path(item).stem in {toc.page_name(docname) for docname in toc.docnames(root)}:
                reason = "it is in _toc.yml but is not a notebook (it has no jupytext front matter)"
            else:
                reason = "it is not in _toc.yml, and a page not there is neither built nor checked: add it"
            raise SystemExit(f"execute_pages: cannot execute {item!r}: {reason}")
        if "/" in item and Path(item).with_suffix("").as_posix() != page.docname:
            raise SystemExit(f"execute_pages: cannot execute {item!r}: _toc.yml has that page at {page.name}")
        chosen.append(page)
    return chosen


def read_notebook(page: Page, extensions: list[str]):
    """The page as the notebook myst-nb builds from it (same cells, same metadata, same cache hash)."""
    import nbformat
    from myst_nb.core.read import read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    if page.path.suffix == ".ipynb":
        return nbformat.read(page.path, as_version=4)
    config = MdParserConfig(enable_extensions=set(extensions))
    return read_myst_markdown_notebook(
        page.path.read_text(), config=config, add_source_map=True, path=page.path
    )


def _cell_seconds(cell) -> float:
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return 0.0
    parse = dt.datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def short_error(text: str, head: int = 20, tail: int = 25) -> str:
    """A failed page's error as a reader wants it in a build log: no colour codes, and where it is
    long, its first ``head`` lines (the cell) and last ``tail`` (where it raised and what)."""
    lines = _ANSI.sub("", text).rstrip().splitlines()
    if len(lines) <= head + tail + 1:
        return "\n".join(lines)
    left_out = len(lines) - head - tail
    return "\n".join([*lines[:head], f"    ... ({left_out} lines of traceback left out) ...", *lines[-tail:]])


def children_cpu_seconds() -> float:
    """CPU seconds of this process's children that have ended and been waited for, and of theirs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def kernel_settings(socket_dir: str):
    """nbclient's configuration for a kernel that talks over Unix sockets in ``socket_dir``.

    Over TCP (Jupyter's default), the kernel manager picks free ports and the kernel binds them a
    moment later. With pages and the unit tests starting kernels at the same time, another process
    can take a port in between: seen here as "Address already in use", and a page that failed
    before its first cell. Socket files in a folder of their own cannot collide.
    """
    from traitlets.config import Config

    return Config({"KernelManager": {"transport": "ipc", "ip": str(Path(socket_dir) / "kernel")}})


def execute_notebook(
    notebook_json: str, cwd: str, timeout: int, allow_errors: bool, page: str = ""
) -> tuple[str, float, list[float], str | None, float, float, list[float | None]]:
    """Execute one notebook (in a worker process); return it, its seconds, its cells' seconds, its
    error, its cell timeout, its CPU seconds and its cells' CPU seconds.

    The CPU seconds are the kernel's, a child of this worker, read once it has ended; they include
    the processes the kernel waited for (engine-build workers, export processes).

    The cells' timing metadata is removed again before returning: the cache identifies a notebook by
    a hash of its cells, metadata included, and myst-nb looks it up with the metadata it reads.
    ``page`` names the page to the kernel ($CASEBOOK_PAGE), under which its engine builds are recorded;
    the records of its previous execution are dropped first.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellControlSignal, DeadKernelError

    if page:
        os.environ[PAGE_ENV] = page  # the kernel, a child of this worker, inherits it
        engine_log_path(page).unlink(missing_ok=True)
    notebook = nbformat.reads(notebook_json, as_version=4)
    settings = notebook.metadata.get("execution", {})  # a page may set its own, as myst-nb allows
    timeout = settings.get("timeout", timeout)
    start = time.perf_counter()
    cpu_before = children_cpu_seconds()
    error = None
    clock = CellCpuClock()
    try:
        with tempfile.TemporaryDirectory(prefix="casebook-kernel-") as socket_dir:
            client = NotebookClient(
                notebook,
                resources={"metadata": {"path": cwd}},
                timeout=timeout,
                allow_errors=settings.get("allow_errors", allow_errors),
                record_timing=True,
                config=kernel_settings(socket_dir),
            )
            clock.attach(client)
            client.execute()
    except (CellControlSignal, DeadKernelError, TimeoutError) as exc:  # a raising cell, a timeout, a crash
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - start
    cpu_seconds = children_cpu_seconds() - cpu_before
    cell_seconds, cell_cpu_seconds = [], []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            cell_seconds.append(round(_cell_seconds(cell), 2))
            measured = clock.seconds.get(index)  # None: not measured, and the wall clock counts
            cell_cpu_seconds.append(None if measured is None else round(measured, 2))
            cell.metadata.pop("execution", None)
    return (
        nbformat.writes(notebook),
        round(seconds, 2),
        cell_seconds,
        error,
        timeout,
        round(cpu_seconds, 1),
        cell_cpu_seconds,
    )


class CellCpuClock:
    """Each cell's CPU seconds: the kernel's and its descendants', read before and after the cell.

    A neighbour on the machine stretches a cell's wall-clock time but not the CPU it uses, so the
    build's cell-time rule can judge what the cell itself costs (`casebook.build_times.over_budget`).
    """

    def __init__(self):
        self.seconds: dict[int, float] = {}  # by the cell's index in the notebook
        self._client = None
        self._before: float | None = None

    def attach(self, client) -> None:
        self._client = client
        client.on_cell_execute = self._start
        client.on_cell_executed = self._stop

    def _kernel_cpu(self) -> float | None:
        km = self._client.km if self._client is not None else None
        pid = getattr(getattr(km, "provisioner", None), "pid", None)
        if pid is None:
            return None
        try:
            return process_tree_cpu_seconds(pid)
        except psutil.NoSuchProcess:  # the kernel died: nbclient reports that as the page's error
            return None

    def _start(self, cell, cell_index):
        self._before = self._kernel_cpu()

    def _stop(self, cell, cell_index, execute_reply):
        after = self._kernel_cpu()
        if self._before is not None and after is not None:
            self.seconds[cell_index] = after - self._before
        self._before = None


def _cell_times(run: PageRun, index: int) -> str:
    """A code cell's wall-clock and CPU seconds, as the build log prints them."""
    if index < 0:
        return "no code cells"
    cpu = run.cell_cpu(index)
    return f"{run.cell_seconds[index]:.0f} s, " + ("CPU not measured" if cpu is None else f"{cpu:.0f} CPU-s")


def schedule(
    pending: list[Page], times: dict[str, PageRun], priors: dict[str, float] | None = None
) -> list[Page]:
    """Longest first, RUN_LAST pages at the end.

    A page's length is its last time in ``_build/page_times.json``, else its time in the latest
    recorded CI run (`priors`, by page name, for a fresh clone: a page moved since that run keeps
    its time), else unknown, which counts as long. With the
    longest pages started first, two workers finish close together; a long page started last would
    run alone at the end.
    """
    priors = priors or {}

    def last_seconds(page: Page) -> float:
        run = times.get(page.name)
        return run.seconds if run is not None else priors.get(page.page_name, float("inf"))

    ordinary = sorted((p for p in pending if not p.runs_last), key=last_seconds, reverse=True)
    return ordinary + [p for p in pending if p.runs_last]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="pages executed at the same time (default 2)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be executed, execute nothing")
    parser.add_argument(
        "--root", type=Path, default=REPO_ROOT, help="the book's folder (default: this checkout)"
    )
    parser.add_argument(
        "--page",
        action="append",
        default=[],
        help="execute only this page (its path, e.g. notebooks/pytree_outputs.md, or its name), "
        "even when its outputs are cached; repeat for more (`make page PAGE=...`)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")

    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    root = args.root.resolve()
    cache_dir = root / "_build" / ".jupyter_cache"
    times_path = root / "_build" / "page_times.json"
    pages = toc_pages(root)
    if args.page:
        pages = chosen_pages(pages, args.page, root)
    settings = book_settings(root)
    cache = get_cache(cache_dir)
    times = load_page_times(times_path)

    notebooks, pending = {}, []
    for page in pages:
        notebook = read_notebook(page, settings["extensions"])
        notebooks[page.name] = notebook
        cached = None
        try:
            cached = cache.match_cache_notebook(notebook)
        except KeyError:  # jupyter-cache's way of saying "no cached run of this notebook"
            pass
        if cached is None or page.runs_last or args.page:
            pending.append(page)
    # A book without the build report's page (a test's fixture book) has no recorded runs.
    has_report = any(page.page_name == BUILD_REPORT_PAGE for page in pages)
    order = schedule(pending, times, prior_page_seconds(recorded_runs_path(root)) if has_report else {})
    openmp_wait = share_cores(args.jobs)  # before the workers start: their kernels inherit it
    print(
        f"execute_pages: {len(order)} of {len(notebooks)} pages to execute, {args.jobs} at a time"
        + (f", OMP_WAIT_POLICY={openmp_wait}" if openmp_wait else ""),
        flush=True,
    )
    if args.dry_run:
        for page in order:
            print(f"  {page.name}")
        return 0

    failures: list[PageRun] = []
    executed_now: set[str] = set()  # the pages this run executed and cached
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:

        def submit(page: Page) -> concurrent.futures.Future:
            print(
                f"  start  {page.name}  [{(time.perf_counter() - started) / 60:.1f} min elapsed]", flush=True
            )
            text = nbformat.writes(notebooks[page.name])
            return pool.submit(
                execute_notebook,
                text,
                str(page.path.parent),
                settings["timeout"],
                settings["allow_errors"],
                page.name,
            )

        # Submitted one by one as workers free up, so that "start" is when a page really starts.
        # The build report waits for every other page; a page asked for by name runs at once.
        queue = [p for p in order if args.page or not p.runs_last]
        last = [p for p in order if p.runs_last and not args.page]
        running = {}
        while queue or running:
            while queue and len(running) < args.jobs:
                page = queue.pop(0)
                running[submit(page)] = page
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                page = running.pop(future)
                try:
                    executed, seconds, cell_seconds, error, timeout, cpu_seconds, cell_cpu = future.result()
                except concurrent.futures.process.BrokenProcessPool as exc:
                    # The worker itself died (killed for memory, say): no page after it can run.
                    raise SystemExit(
                        f"execute_pages: the process executing {page.name} died ({exc}); the pages "
                        "finished so far are cached. Check the machine's memory and run `make build` again."
                    ) from exc
                run = PageRun(
                    page.name,
                    seconds,
                    cell_seconds,
                    error,
                    jobs=args.jobs,
                    timeout=timeout,
                    openmp_wait=openmp_wait,
                    cpu_seconds=cpu_seconds,
                    cell_cpu_seconds=cell_cpu,
                )
                index, cost = run.costliest_cell
                elapsed = time.perf_counter() - started
                if error is None:
                    record = cache.add_nb_to_project(str(page.path), read_data=MYST_NB_READ_FORMAT)
                    cache.cache_notebook_bundle(
                        CacheBundleIn(
                            nbformat.reads(executed, as_version=4),
                            record.uri,
                            data={"execution_seconds": seconds},
                        ),
                        check_validity=False,
                        overwrite=True,
                    )
                    times[page.name] = run
                    executed_now.add(page.name)
                    save_page_times(times, times_path)
                    if page.runs_last:
                        page.path.touch()  # Sphinx re-reads a page only when its source is newer
                    print(
                        f"  done   {page.name}: {seconds:.0f} s, {cpu_seconds:.0f} CPU-s "
                        f"(costliest: code cell {index + 1}, {_cell_times(run, index)})"
                        f"  [{elapsed / 60:.1f} min elapsed]",
                        flush=True,
                    )
                else:
                    failures.append(run)
                    print(
                        f"  FAILED {page.name} after {seconds:.0f} s  [{elapsed / 60:.1f} min elapsed]",
                        flush=True,
                    )
            if not queue and not running and last and not failures:
                # The build report reads page_times.json: it runs once every other page is done.
                queue, last = last, []

    for run in failures:
        print(f"\nexecute_pages: {run.page} raised:\n{short_error(run.error)}", file=sys.stderr)
    slow = over_budget({name: run for name, run in times.items() if name in notebooks})
    if slow:
        print(
            "\nexecute_pages: cells too close to their timeout on this machine:\n  "
            + "\n  ".join(slow)
            + "\n"
            "Split or slim those cells so that each stays under a third of the timeout; their outputs "
            "are cached, and this check fails until they are executed again under the limit.",
            file=sys.stderr,
        )
    if failures:
        names = ", ".join(run.page for run in failures)
        again = (
            " ".join(f"`make page PAGE={run.page}`" for run in failures)
            if args.page
            else "`make build`: the pages that succeeded are cached and are not executed again"
        )
        print(
            f"\nexecute_pages: {len(failures)} page(s) failed: {names}. Fix them and run {again}.",
            file=sys.stderr,
        )
    wall_min = (time.perf_counter() - started) / 60
    cpu_min = sum(run.cpu_seconds or 0.0 for name, run in times.items() if name in executed_now) / 60
    print(
        f"execute_pages: executed {len(order)} pages in {wall_min:.1f} min; they used {cpu_min:.1f} "
        f"CPU-min, {cpu_min / wall_min / (os.cpu_count() or 1) if wall_min else 0:.0%} of the "
        f"{os.cpu_count()} cores",
        flush=True,
    )
    return 1 if failures or slow else 0


if __name__ == "__main__":
    sys.exit(main())
