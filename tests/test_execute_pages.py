"""scripts/execute_pages.py: pages execute in parallel into the cache that Sphinx reads, and the build
fails on a raising cell or a cell too close to its timeout; casebook.build_times records the runs."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_build_config import NOTEBOOK_HEADER

from booklayout import REPO_ROOT, fixture_book_config
from casebook.build_records import PAGE_ENV, WAIT_POLICY, engine_log_path, record_engine_build, share_cores
from casebook.build_times import (
    PageRun,
    engine_builds_table,
    engine_builds_wall_minutes,
    load_page_times,
    over_budget,
    page_times_table,
    prior_page_seconds,
    recorded_runs,
    runs_table,
    save_page_times,
)

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import execute_pages  # noqa: E402

# A fixture page starts as test_build_config's does: jupytext front matter, then its title.
HEADER = NOTEBOOK_HEADER.replace("# Fixture page", "# {title}")


def _cell(source: str, tags: str = "") -> str:
    return f"```{{code-cell}} ipython3\n{tags}{source}\n```\n\n"


def _fixture_book(tmp_path: Path, pages: dict[str, str], timeout: int | None = None) -> Path:
    book = tmp_path / "book"
    config = (REPO_ROOT / "_config.yml").read_text()
    if timeout is not None:
        config = config.replace("timeout: 900", f"timeout: {timeout}")
    fixture_book_config(book, config)
    names = list(pages)
    chapters = "".join(f"  - file: {name}\n" for name in names[1:])
    (book / "_toc.yml").write_text(
        f"format: jb-book\nroot: {names[0]}\n" + (f"chapters:\n{chapters}" if chapters else "")
    )
    for name, cells in pages.items():
        (book / f"{name}.md").write_text(HEADER.format(title=name) + cells)
    return book


def _sphinx_build(book: Path) -> subprocess.CompletedProcess:
    """The Makefile's bare Jupyter Book call (`make book`) on a fixture book."""
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO_ROOT), "book", f"BOOK={book}"],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _execute(book: Path, *args: str) -> subprocess.CompletedProcess:
    # Without the wait policy `make unit` sets for its workers, as in `make build`.
    environ = {name: value for name, value in os.environ.items() if name != WAIT_POLICY}
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "execute_pages.py"), "--root", str(book), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=environ,
    )


@pytest.mark.slow
def test_sphinx_reads_every_page_from_the_cache_and_executes_none(tmp_path):
    book = _fixture_book(
        tmp_path,
        {
            "first": _cell("x = 6 * 7\nprint('answer', x)")
            + _cell("import time\ntime.sleep(0.3)", ":tags: [hide-cell]\n\n"),
            "second": _cell("import os\nprint('OpenMP threads wait:', os.environ['OMP_WAIT_POLICY'])"),
        },
    )
    executed = _execute(book, "--jobs", "2")
    assert executed.returncode == 0, executed.stdout + executed.stderr
    assert "2 of 2 pages to execute, 2 at a time, OMP_WAIT_POLICY=PASSIVE" in executed.stdout
    times = load_page_times(book / "_build" / "page_times.json")
    assert set(times) == {"first.md", "second.md"}
    assert times["first.md"].longest_cell[0] == 1 and times["first.md"].cell_seconds[1] >= 0.3

    built = _sphinx_build(book)
    log = built.stdout + built.stderr
    assert built.returncode == 0, log[-3000:]
    assert log.count("Using cached notebook") == 2, log[-3000:]
    assert "Executing notebook" not in log, "Sphinx executed a page the script had already executed"
    assert "answer 42" in (book / "_build" / "html" / "first.html").read_text()
    assert "OpenMP threads wait: PASSIVE" in (book / "_build" / "html" / "second.html").read_text()
    assert times["second.md"].openmp_wait == "PASSIVE"
    # The notebook a reader downloads carries the cached outputs (casebook.sphinx_notebooks).
    assert "answer 42" in (book / "_build" / "html" / "_sources" / "first.ipynb").read_text()

    again = _execute(book)
    assert "0 of 2 pages to execute" in again.stdout, again.stdout


@pytest.mark.slow
def test_a_raising_page_fails_and_the_others_stay_cached(tmp_path):
    book = _fixture_book(
        tmp_path,
        {"good": _cell("print('fine')"), "bad": _cell("raise ValueError('planted failure 5179')")},
    )
    result = _execute(book)
    assert result.returncode == 1
    assert "planted failure 5179" in result.stderr
    assert "1 page(s) failed: bad.md" in result.stderr
    assert "0 of 2" not in _execute(book, "--dry-run").stdout
    assert "1 of 2 pages to execute" in _execute(book, "--dry-run").stdout  # only the failed page again


def test_pages_side_by_side_wait_passively_and_a_readers_choice_wins():
    environ = {}
    assert share_cores(2, environ) == "PASSIVE" and environ == {WAIT_POLICY: "PASSIVE"}
    alone = {}
    assert share_cores(1, alone) is None and alone == {}  # one page at a time: OpenMP's default
    assert share_cores(2, {WAIT_POLICY: "ACTIVE"}) == "ACTIVE"
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        share_cores(0, {})


def test_a_long_error_keeps_its_cell_and_where_it_raised_without_colour_codes():
    cell = [f"cell line {i}" for i in range(20)]
    frames = [f"\x1b[0;32mframe {i}\x1b[0m" for i in range(200)]
    short = execute_pages.short_error("\n".join([*cell, *frames, "ValueError: planted"]))
    lines = short.splitlines()
    assert lines[:20] == cell and lines[-1] == "ValueError: planted" and "frame 199" in lines[-2]
    assert "(176 lines of traceback left out)" in short and "\x1b" not in short
    assert execute_pages.short_error("one\ntwo") == "one\ntwo"


@pytest.mark.slow
def test_a_worker_that_dies_is_named_and_what_finished_stays_cached(tmp_path):
    # The kernel's parent is the worker process: killing it stands for the worker killed for memory.
    killer = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"
    book = _fixture_book(tmp_path, {"dies": _cell(killer)})
    result = _execute(book)
    assert result.returncode == 1
    assert "the process executing dies.md died" in result.stderr
    assert "Check the machine's memory" in result.stderr


# A cell that keeps a core busy for `seconds` of its own CPU time (in a child process when asked),
# first moving to the core `pin` names, if any.
def _busy_cell(seconds: float, in_child: bool = False, pin: int | None = None) -> str:
    spin = f"import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end:\n    pass\n"
    if pin is not None:
        spin = f"import os\nos.sched_setaffinity(0, {{{pin}}})\n" + spin
    if not in_child:
        return _cell(spin)
    return _cell(f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {spin!r}], check=True)")


@pytest.mark.slow
def test_a_cell_over_a_third_of_its_timeout_fails_the_build(tmp_path):
    # A timeout with room to spare, so that a loaded machine cannot turn the cost into a timeout.
    pages = {"slow": _busy_cell(4.5), "child": _busy_cell(4.5, in_child=True)}
    result = _execute(_fixture_book(tmp_path, pages, timeout=12))
    assert result.returncode == 1
    # the CPU seconds of a process the cell started count as the cell's own
    for page in ("child", "slow"):
        assert re.search(
            rf"{page}.md: code cell 1 cost [45] s \(\d+ s of wall clock and [45] CPU seconds\), more than "
            r"a third of the 12 s cell timeout \(4 s\)",
            result.stderr,
        ), result.stderr
    assert "Split or slim" in result.stderr


@pytest.mark.slow
def test_a_busy_neighbour_slows_a_cell_without_failing_the_build(tmp_path):
    """The cell shares one core with nine spinning neighbours: its wall clock grows to about ten
    times its CPU seconds, past a third of the timeout, and the build still passes."""
    core = sorted(os.sched_getaffinity(0))[0]
    book = _fixture_book(tmp_path, {"shared": _busy_cell(1.2, pin=core)}, timeout=30)

    def on_that_core():
        os.sched_setaffinity(0, {core})

    spin = [sys.executable, "-c", "while True:\n    pass"]
    # each in a session of its own, as the page's kernel is: the scheduler shares a core between
    # sessions (autogroups) before it shares it between processes
    neighbours = [subprocess.Popen(spin, preexec_fn=on_that_core, start_new_session=True) for _ in range(9)]
    try:
        result = _execute(book)
    finally:
        for neighbour in neighbours:
            neighbour.kill()
            neighbour.wait()
    assert result.returncode == 0, result.stdout + result.stderr
    run = load_page_times(book / "_build" / "page_times.json")["shared.md"]
    wall, cpu = run.cell_seconds[0], run.cell_cpu_seconds[0]
    assert wall > 10 and 1.2 <= cpu < 2, (wall, cpu)  # the old rule (the wall clock) would have failed it
    assert run.cell_cost(0) == cpu


@pytest.mark.slow
def test_a_page_may_set_its_own_cell_timeout(tmp_path):
    book = _fixture_book(tmp_path, {"slow": _busy_cell(1.5)}, timeout=3)
    page = book / "slow.md"
    page.write_text(page.read_text().replace("kernelspec:", "execution:\n  timeout: 30\nkernelspec:", 1))
    result = _execute(book)
    assert result.returncode == 0, result.stderr
    assert load_page_times(book / "_build" / "page_times.json")["slow.md"].timeout == 30
    built = _sphinx_build(book)  # Sphinx accepts the key (-W) and reads the page from the cache
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    assert "Executing notebook" not in built.stdout + built.stderr


@pytest.mark.slow
def test_bad_arguments_are_named(tmp_path):
    result = _execute(tmp_path, "--jobs", "0")
    assert result.returncode == 2 and "--jobs must be at least 1, not 0" in result.stderr
    result = _execute(tmp_path)
    assert result.returncode != 0 and f"no table of contents at {tmp_path / '_toc.yml'}" in result.stderr


@pytest.mark.slow
def test_a_toc_entry_without_a_file_is_named(tmp_path):
    (tmp_path / "_config.yml").write_text("execute:\n  timeout: 10\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: missing_page\n")
    result = _execute(tmp_path)
    assert result.returncode != 0 and "_toc.yml lists 'missing_page'" in result.stderr


@pytest.mark.slow
def test_one_page_asked_for_is_executed_even_when_cached_and_the_others_are_not(tmp_path):
    book = _fixture_book(tmp_path, {"first": _cell("print('one')"), "second": _cell("print('two')")})
    assert _execute(book).returncode == 0
    again = _execute(book, "--page", "second.md")
    assert again.returncode == 0, again.stderr
    assert "1 of 1 pages to execute" in again.stdout and "start  second.md" in again.stdout
    by_name = _execute(book, "--page", "first", "--dry-run")
    assert by_name.returncode == 0 and "  first.md" in by_name.stdout
    (book / "second.md").write_text(
        (book / "second.md").read_text() + _cell("raise KeyError('planted 0411')")
    )
    raising = _execute(book, "--page", "second.md")
    assert raising.returncode == 1 and "planted 0411" in raising.stderr
    assert "1 page(s) failed: second.md. Fix them and run `make page PAGE=second.md`." in raising.stderr


@pytest.mark.slow
def test_a_page_asked_for_that_the_book_does_not_build_is_named(tmp_path):
    book = _fixture_book(tmp_path, {"first": _cell("print('one')")})
    (book / "notes").mkdir()
    (book / "notes" / "draft.md").write_text("# A draft\n")
    result = _execute(book, "--page", "notes/draft.md")
    assert result.returncode != 0
    assert "cannot execute 'notes/draft.md': it is not in _toc.yml" in result.stderr
    assert "a page not there is neither built nor checked: add it" in result.stderr
    result = _execute(book, "--page", "elsewhere/first.md")
    assert result.returncode != 0 and "_toc.yml has that page at first.md" in result.stderr


@pytest.mark.slow
def test_the_build_stops_on_a_page_the_toc_does_not_list(tmp_path):
    book = _fixture_book(tmp_path, {"first": _cell("print('one')")})
    (book / "notebooks").mkdir()
    (book / "notebooks" / "forgotten.md").write_text("# A failure page nobody listed\n")
    result = _execute(book, "--dry-run")
    assert result.returncode != 0
    assert "notebooks/forgotten.md: in a page folder but not in _toc.yml" in result.stderr
    assert "Add it to _toc.yml under its part" in result.stderr


def _page(name: str, seconds: float) -> execute_pages.Page:
    return execute_pages.Page(name, Path(f"/book/{name}.md"), f"{name}.md")


def test_longest_recorded_pages_start_first_and_the_build_report_last():
    times = {"a.md": PageRun("a.md", 10, [10]), "b.md": PageRun("b.md", 300, [300])}
    pending = [_page("book/about/build_report", 5), _page("a", 10), _page("new", 0), _page("b", 300)]
    order = [page.docname for page in execute_pages.schedule(pending, times)]
    assert order == ["new", "b", "a", "book/about/build_report"]  # never timed counts as long


def test_the_longest_cell_and_the_budget():
    run = PageRun("p.md", 400, [1.0, 310.0, 20.0])
    assert run.longest_cell == (1, 310.0)
    assert PageRun("empty.md", 0, []).longest_cell == (-1, 0.0)
    assert PageRun("empty.md", 0, []).costliest_cell == (-1, 0.0)
    assert over_budget({"p.md": run}) == [
        "p.md: code cell 2 cost 310 s (310 s (no CPU seconds recorded)), more than a third of the "
        "900 s cell timeout (300 s)"
    ]
    run.timeout = 1200
    assert over_budget({"p.md": run}) == []


def test_a_cell_costs_the_smaller_of_its_wall_clock_and_its_cpu_seconds():
    # cell 2 was stretched by a neighbour (wall 500 s, 200 CPU-s); cell 3's processes worked in
    # parallel (wall 320 s, 610 CPU-s): the wall clock is its cost, and it is over the budget
    run = PageRun("p.md", 900, [1.0, 500.0, 320.0], cell_cpu_seconds=[1.0, 200.0, 610.0])
    assert [run.cell_cost(index) for index in range(3)] == [1.0, 200.0, 320.0]
    assert run.costliest_cell == (2, 320.0)
    assert over_budget({"p.md": run}) == [
        "p.md: code cell 3 cost 320 s (320 s of wall clock and 610 CPU seconds), more than a third "
        "of the 900 s cell timeout (300 s)"
    ]
    run.cell_seconds[2] = 290.0
    assert over_budget({"p.md": run}) == []  # the stretched cell 2 does not fail the build
    run.cell_cpu_seconds[1] = None  # not measured (it timed out, its kernel died): the wall clock counts
    assert run.cell_cpu(1) is None and run.cell_cost(1) == 500.0
    assert over_budget({"p.md": run}) == [
        "p.md: code cell 2 cost 500 s (500 s (no CPU seconds recorded)), more than a third of the "
        "900 s cell timeout (300 s)"
    ]
    assert execute_pages._cell_times(run, 1) == "500 s, CPU not measured"
    assert execute_pages._cell_times(run, 2) == "290 s, 610 CPU-s"


def test_page_times_round_trip_and_table(tmp_path):
    path = tmp_path / "page_times.json"
    assert load_page_times(path) == {}
    times = {"a.md": PageRun("a.md", 12.5, [2, 10.5], jobs=2), "b.md": PageRun("b.md", 99, [99])}
    save_page_times(times, path)
    assert load_page_times(path) == times
    table = page_times_table(times)
    assert list(table["page"]) == ["b.md", "a.md"]
    assert table.loc[1, "costliest cell"] == "code cell 2" and table.loc[1, "share of the timeout"] == "1%"
    assert table.loc[1, "its CPU seconds"] == ""  # not recorded
    times["a.md"].cell_cpu_seconds = [2, 4]
    row = page_times_table(times).loc[1]
    assert (row["its seconds"], row["its CPU seconds"], row["its cost (s)"]) == (10, 4, 4)


def test_a_fresh_clone_orders_pages_by_the_latest_recorded_run():
    priors = {"a": 50.0, "b": 500.0}
    order = execute_pages.schedule([_page("a", 0), _page("b", 0), _page("c", 0)], {}, priors)
    assert [page.docname for page in order] == ["c", "b", "a"]
    # This build's own times win over the recorded run.
    order = execute_pages.schedule(
        [_page("a", 0), _page("b", 0)], {"a.md": PageRun("a.md", 900, [900])}, priors
    )
    assert [page.docname for page in order] == ["a", "b"]


def test_a_page_moved_since_the_recorded_run_keeps_its_recorded_time(tmp_path):
    runs = tmp_path / "build_runs.json"
    runs.write_text(json.dumps({"runs": [{"page seconds": {"failures/a.md": 50, "case_studies/b.md": 500}}]}))
    priors = prior_page_seconds(runs)
    assert priors == {"a": 50, "b": 500}
    order = execute_pages.schedule([_page("notebooks/a", 0), _page("case_studies/b", 0)], {}, priors)
    assert [page.docname for page in order] == ["case_studies/b", "notebooks/a"]


def test_the_recorded_runs_render_and_give_page_times():
    # A page missing from the latest recorded run is fine (a new page): the schedule counts it as
    # long and starts it first (test_a_fresh_clone_orders_pages_by_the_latest_recorded_run).
    runs = recorded_runs()
    assert runs and all({"date", "change", "outcome", "total (min)"} <= set(run) for run in runs)
    priors = prior_page_seconds()
    assert priors and all(
        "/" not in page and "." not in page and seconds > 0 for page, seconds in priors.items()
    )
    table = runs_table(runs)
    assert len(table) == len(runs) and "total (min)" in table.columns
    assert set(table["machine"]) <= {"", "quiet", "slowed 2x"}, set(table["machine"])


def test_engine_builds_are_recorded_per_page_and_only_inside_a_book_build(tmp_path, monkeypatch):
    monkeypatch.delenv(PAGE_ENV, raising=False)
    build = {"seconds": 40.0, "engines": 1, "failed": 4, "peak_rss_mb": 1100}
    assert record_engine_build(build, tmp_path) is None and list(tmp_path.iterdir()) == []
    assert engine_builds_table(tmp_path).empty

    monkeypatch.setenv(PAGE_ENV, "case_studies/faster_rcnn_dynamic_hw.md")
    path = record_engine_build(build, tmp_path)
    assert path == engine_log_path("case_studies/faster_rcnn_dynamic_hw.md", tmp_path)
    assert path.name == "case_studies__faster_rcnn_dynamic_hw.jsonl"
    record_engine_build({"seconds": 60.5, "engines": 10, "failed": 1, "peak_rss_mb": 1450}, tmp_path)
    monkeypatch.setenv(PAGE_ENV, "book/backends/exported_program_to_engine.md")
    record_engine_build({"seconds": 9.0, "engines": 1, "failed": 0, "peak_rss_mb": 1000}, tmp_path)

    table = engine_builds_table(tmp_path).set_index("page")
    detector = table.loc["case_studies/faster_rcnn_dynamic_hw.md"]
    assert (detector["builds"], detector["seconds"], detector["engines built"]) == (2, 100.5, 11)
    assert detector["blocks failed"] == 5 and detector["peak GB"] == round(1450 / 1024, 2)
    assert list(table.index) == [
        "case_studies/faster_rcnn_dynamic_hw.md",
        "book/backends/exported_program_to_engine.md",
    ]
    # records without CPU time (written before builds reported it): no share of the wall time
    assert table["CPU seconds"].isna().all() and engine_builds_wall_minutes(table, 2) is None


def test_engine_builds_cpu_seconds_give_their_share_of_the_wall_time(tmp_path, monkeypatch):
    monkeypatch.setenv(PAGE_ENV, "case_studies/torchvision_detection_zoo.md")
    for cpu in (50.0, 10.0):
        build = {"seconds": 30.0, "cpu_seconds": cpu, "engines": 3, "failed": 1, "peak_rss_mb": 1500}
        record_engine_build(build, tmp_path)
    monkeypatch.setenv(PAGE_ENV, "book/backends/lowering_tensorrt.md")
    record_engine_build(
        {"seconds": 5.0, "cpu_seconds": 60.0, "engines": 1, "failed": 0, "peak_rss_mb": 900}, tmp_path
    )
    table = engine_builds_table(tmp_path).set_index("page")
    assert table.loc["case_studies/torchvision_detection_zoo.md", "CPU seconds"] == 60.0
    assert engine_builds_wall_minutes(table, cores=2) == 1.0  # 120 CPU seconds on two cores
    assert engine_builds_wall_minutes(table, cores=1) == 2.0
    with pytest.raises(ValueError, match="cores must be at least 1"):
        engine_builds_wall_minutes(table, cores=0)


def _one_cell_notebook(code: str) -> str:
    """A notebook of one code cell for the python3 kernel, as execute_notebook takes it (JSON)."""
    import nbformat

    return nbformat.writes(
        nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell(code)],
            metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        )
    )


def test_a_page_names_itself_to_its_kernel_and_its_old_engine_records_go(monkeypatch):
    import nbformat

    monkeypatch.setenv(PAGE_ENV, "set by the test, restored after it")
    page = "fixture_page_names_itself.md"
    stale = engine_log_path(page)
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text('{"page": "fixture_page_names_itself.md", "seconds": 1}\n')
    executed, _, _, error, _, _, _ = execute_pages.execute_notebook(
        _one_cell_notebook(f"import os\nprint(os.environ[{PAGE_ENV!r}])"), str(REPO_ROOT), 60, False, page
    )
    assert error is None, error
    assert not stale.exists()
    (cell,) = nbformat.reads(executed, as_version=4).cells
    assert cell.outputs[0]["text"].strip() == page


@pytest.mark.slow
def test_a_page_s_cpu_seconds_include_the_processes_its_kernel_waited_for():
    spin = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 1.5:\n    pass"
    code = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {spin!r}])"
    _, seconds, _, error, _, cpu_seconds, cell_cpu_seconds = execute_pages.execute_notebook(
        _one_cell_notebook(code), str(REPO_ROOT), 60, False
    )
    assert error is None, error
    assert cpu_seconds >= 1.5  # the spinning child alone, waited for by the kernel
    assert 1.5 <= cell_cpu_seconds[0] <= cpu_seconds  # and the cell's own, read from the kernel's tree
    assert cpu_seconds <= seconds * (os.cpu_count() or 1) + 1


def test_page_times_table_shows_cpu_seconds_where_they_were_measured():
    table = page_times_table(
        {"a.md": PageRun("a.md", 12, [12], cpu_seconds=20.4), "old.md": PageRun("old.md", 5, [5])}
    ).set_index("page")
    assert table.loc["a.md", "CPU seconds"] == 20
    assert table.loc["old.md", "CPU seconds"] == ""


def test_a_page_s_kernel_talks_over_unix_sockets_that_are_gone_afterwards():
    import nbformat

    code = (
        "import json, os\n"
        "from ipykernel.connect import get_connection_file\n"
        "info = json.load(open(get_connection_file()))\n"
        "print(info['transport'], os.path.dirname(info['ip']))"
    )
    executed, _, _, error, _, _, _ = execute_pages.execute_notebook(
        _one_cell_notebook(code), str(REPO_ROOT), 60, False
    )
    assert error is None, error
    transport, socket_dir = nbformat.reads(executed, as_version=4).cells[0].outputs[0]["text"].split()
    assert transport == "ipc"
    assert Path(socket_dir).name.startswith("casebook-kernel-") and not Path(socket_dir).exists()
