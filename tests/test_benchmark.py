"""benchmark()/compare(): run counts, interleaved rounds and per-round speed-ups (with a fake clock),
verdicts and headlines, table and plot, and the errors for bad input."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import casebook.benchmark as bench  # noqa: E402
from casebook.benchmark import FASTER, SLOWER, UNCLEAR, Comparison, Timing, benchmark, compare  # noqa: E402


def test_fewer_than_twenty_runs_is_refused():
    with pytest.raises(ValueError, match="at least 20"):
        benchmark(lambda x: x, (torch.ones(1),), runs=19)


def test_warmup_and_runs_are_counted_under_inference_mode():
    calls = []

    def fn(x):
        calls.append(torch.is_inference_mode_enabled())
        return x + 1

    timing = benchmark(fn, torch.ones(3), warmup=2, runs=25, label="plus one")
    assert len(calls) == 27 and all(calls)
    assert timing.runs == 25 and timing.label == "plus one" and timing.device == "cpu"


def test_median_and_p90_from_a_fake_clock(monkeypatch):
    now = [0.0]
    durations_ms = iter([1000.0] * 3 + [float(ms) for ms in range(20, 0, -1)])  # warm-up, then 20..1 ms

    def fn(x):
        now[0] += next(durations_ms) / 1e3

    monkeypatch.setattr(bench, "_clock", lambda: now[0])
    timing = benchmark(fn, (torch.ones(1),), warmup=3, runs=20)
    assert sorted(timing.samples_ms) == pytest.approx([float(ms) for ms in range(1, 21)])
    assert timing.median_ms == pytest.approx(10.5)
    assert timing.p90_ms == pytest.approx(18.1)  # linear interpolation between 18 and 19
    assert timing.min_ms == pytest.approx(1.0)


def test_timing_statistics_match_numpy():
    samples = tuple(np.random.default_rng(0).exponential(2.0, size=37))
    t = Timing("x", samples)
    assert t.median_ms == pytest.approx(np.median(samples))
    assert t.p90_ms == pytest.approx(np.percentile(samples, 90))


@pytest.fixture(scope="module")
def comparison():
    x = torch.randn(64, 64)
    return compare({"slow": lambda a: a @ a @ a, "eager": lambda a: a @ a}, (x,), runs=20)


def test_compare_reports_speedup_against_eager(comparison):
    assert comparison.baseline == "eager" and comparison.rounds == 20
    assert comparison.speedup("eager") == pytest.approx(1.0)
    table = comparison.table()
    assert list(table.index) == ["slow", "eager"]
    assert {
        "median_ms",
        "p90_ms",
        "runs",
        "speedup_vs_eager",
        "speedup_p10",
        "speedup_p90",
        "verdict",
    } <= set(table.columns)
    assert (table["runs"] == 20).all() and table.loc["eager", "verdict"] == "baseline"
    markdown = comparison._repr_markdown_()
    assert "speed-up vs `eager` (p10–p90)" in markdown and "20 interleaved rounds" in markdown
    # A short table, no log wall: header, blank, two table rules, a row per candidate; a busy machine
    # (as CI's shared cores sometimes are) adds a blank line and its warning.
    busy_lines = 2 if comparison.busy else 0
    assert len(markdown.splitlines()) == 6 + busy_lines
    assert ("machine was busy" in markdown) == bool(comparison.busy)


def test_busy_machine_adds_one_warning_to_the_table():
    quiet = Timing("eager", tuple([1.0] * 20), device="cpu")
    noisy = Timing("slow", tuple([1.0] * 2 + [2.0] * 18), device="cpu")  # median 2x its minimum
    busy = Comparison({"slow": noisy, "eager": quiet}, baseline="eager", device_info="CPU")
    lines = busy._repr_markdown_().splitlines()
    assert busy.busy == ["slow"] and len(lines) == 8 and "machine was busy" in lines[-1]


def test_compare_plot_has_labelled_axes_and_device(comparison):
    fig = comparison.plot(title="matmul chain")
    ax = fig.axes[0]
    assert "ms" in ax.get_ylabel() and ax.get_xlabel()
    assert "matmul chain" in ax.get_title() and "CPU" in ax.get_title()
    assert any(text.get_text().startswith("×") and "–" in text.get_text() for text in ax.texts)
    assert any(text.get_text() == "baseline" for text in ax.texts)
    matplotlib.pyplot.close(fig)


def test_compare_rejects_unknown_baseline():
    with pytest.raises(ValueError, match="baseline"):
        compare({"a": lambda x: x}, (torch.ones(1),), baseline="eager")


def fake_clock(monkeypatch, load=lambda now_ms: 1.0):
    """A clock that only moves when a fake candidate "runs"; ``load(now_ms)`` scales its duration."""
    now_ms = [0.0]
    monkeypatch.setattr(bench, "_clock", lambda: now_ms[0] / 1e3)

    def candidate(duration_ms, calls=None, name=None):
        def run(x):
            if calls is not None:
                calls.append(name)
            now_ms[0] += duration_ms * load(now_ms[0])

        return run

    return candidate


def test_compare_warms_up_then_rotates_the_order_every_round(monkeypatch):
    calls = []
    candidate = fake_clock(monkeypatch)
    fns = {name: candidate(1.0, calls, name) for name in "abc"}
    compare(fns, (torch.ones(1),), warmup=2, runs=20)
    assert calls[:6] == ["a", "a", "b", "b", "c", "c"]
    rounds = [calls[6 + 3 * i : 9 + 3 * i] for i in range(20)]
    assert rounds[:4] == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)


def test_a_burst_of_load_hits_every_candidate_alike(monkeypatch):
    # Other jobs make every call 4x slower for the first 600 ms. Timed one after the other, eager
    # would take all of it; interleaved, each round is either all-busy or all-quiet.
    candidate = fake_clock(monkeypatch, load=lambda now_ms: 4.0 if now_ms < 600 else 1.0)
    result = compare({"eager": candidate(10.0), "aoti": candidate(5.0)}, (torch.ones(1),), warmup=0, runs=20)
    assert result.speedup("aoti") == pytest.approx(2.0)
    assert result.speedup_interval("aoti").low == pytest.approx(2.0)
    assert result.verdict("aoti") == FASTER
    assert result.busy == ["eager", "aoti"]  # 10 of 20 rounds at 4x: eager's median 25 ms, minimum 10 ms
    headline = result.headline("aoti")
    assert headline.startswith("aoti is faster than eager: ×2.00 per round")
    assert "busy" in headline and "unreliable" in headline
    assert "busy" in result._repr_markdown_() and "busy" in str(result)


def timings(eager_ms, other_ms):
    return Comparison(
        timings={"eager": Timing("eager", tuple(eager_ms)), "other": Timing("other", tuple(other_ms))},
        baseline="eager",
        device_info="CPU test",
    )


def test_speedup_is_the_median_per_round_ratio_with_its_spread():
    result = timings([10.0] * 20, [10.0 / r for r in np.linspace(1.1, 3.0, 20)])
    interval = result.speedup_interval("other")
    assert result.ratios("other") == pytest.approx(tuple(np.linspace(1.1, 3.0, 20)))
    assert interval.median == pytest.approx(np.median(np.linspace(1.1, 3.0, 20)))
    assert (interval.low, interval.high) == pytest.approx(
        tuple(np.percentile(np.linspace(1.1, 3.0, 20), [10, 90]))
    )
    assert interval.rounds == 20 and str(interval).startswith("×2.05 (")


@pytest.mark.parametrize(
    ("ratios", "verdict", "subject"),
    [
        (np.linspace(1.05, 1.5, 20), FASTER, "other is faster than eager"),
        (np.linspace(0.5, 0.95, 20), SLOWER, "other is slower than eager"),
        (np.linspace(0.8, 1.6, 20), UNCLEAR, "other and eager show no clear difference on this machine"),
        ([0.5] * 3 + [1.5] * 17, UNCLEAR, "no clear difference"),  # a median > 1 is not enough
    ],
)
def test_verdict_needs_the_whole_spread_on_one_side_of_one(ratios, verdict, subject):
    result = timings([10.0] * 20, [10.0 / r for r in ratios])
    assert result.verdict("other") == verdict
    assert subject in result.headline("other") and "busy" not in result.headline("other")
    assert result.table().loc["other", "verdict"] == verdict


def test_a_quiet_machine_is_not_flagged_busy():
    assert not timings([10.0] * 19 + [30.0], [5.0] * 20).busy
    assert timings([10.0] * 9 + [16.0] * 11, [5.0] * 20).busy == ["eager"]


def test_bad_input_is_refused_with_what_to_do():
    x = (torch.ones(1),)
    with pytest.raises(ValueError, match="at least one candidate"):
        compare({}, x)
    with pytest.raises(ValueError, match=r"\['output'\] are not callable: pass the model"):
        compare({"eager": lambda a: a, "output": torch.ones(1)}, x)
    with pytest.raises(ValueError, match="warmup=-1 must be >= 0"):
        compare({"eager": lambda a: a}, x, warmup=-1)
    with pytest.raises(ValueError, match="at least 20"):
        compare({"eager": lambda a: a}, x, runs=5)
    with pytest.raises(ValueError, match=r"one sample per round.*compare\(\)"):
        timings([10.0] * 20, [5.0] * 19)
    result = timings([10.0] * 20, [5.0] * 20)
    with pytest.raises(ValueError, match=r"'aoti' is not one of the candidates \['eager', 'other'\]"):
        result.speedup("aoti")
    with pytest.raises(ValueError, match=r"'eager' is the baseline.*\['other'\]"):
        result.headline("eager")


@pytest.mark.slow
def test_timed_rounds_wait_for_another_process_holding_the_timing_lock(monkeypatch, tmp_path, capsys):
    # `make build` executes two pages at a time; their timed rounds must not overlap.
    import subprocess
    import sys
    import textwrap
    import time

    lock = tmp_path / "timing.lock"
    monkeypatch.setenv(bench.TIMING_LOCK_ENV, str(lock))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import fcntl, sys, time
                with open({str(lock)!r}, "a") as handle:
                    fcntl.flock(handle, fcntl.LOCK_EX)
                    print("locked", flush=True)
                    time.sleep(1.5)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    start = time.perf_counter()
    bench.benchmark(lambda: None, (), warmup=0)
    waited = time.perf_counter() - start
    holder.wait(timeout=30)
    assert waited >= 1.0, "the timed rounds did not wait for the lock"
    assert "for another page's timed rounds" in capsys.readouterr().out
    assert bench.timing_lock_path() == lock


def test_the_device_line_names_the_openmp_wait_policy_when_one_is_set(monkeypatch):
    from casebook.benchmark import device_description

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert "OMP_WAIT_POLICY" not in device_description("cpu")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert f"{torch.get_num_threads()} threads, OMP_WAIT_POLICY=PASSIVE (torch" in device_description("cpu")
