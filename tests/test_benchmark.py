"""benchmark()/compare(): run counts, statistics (with a fake clock), table and plot."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import casebook.benchmark as bench  # noqa: E402
from casebook.benchmark import Timing, benchmark, compare  # noqa: E402


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
    assert comparison.baseline == "eager"
    assert comparison.speedup("eager") == pytest.approx(1.0)
    table = comparison.table()
    assert list(table.index) == ["slow", "eager"]
    assert {"median_ms", "p90_ms", "runs", "speedup_vs_eager"} <= set(table.columns)
    assert (table["runs"] == 20).all()
    assert "speed-up vs `eager`" in comparison._repr_markdown_()


def test_compare_plot_has_labelled_axes_and_device(comparison):
    fig = comparison.plot(title="matmul chain")
    ax = fig.axes[0]
    assert "ms" in ax.get_ylabel() and ax.get_xlabel()
    assert "matmul chain" in ax.get_title() and "CPU" in ax.get_title()
    assert any(text.get_text().startswith("×") for text in ax.texts)
    matplotlib.pyplot.close(fig)


def test_compare_rejects_unknown_baseline():
    with pytest.raises(ValueError, match="baseline"):
        compare({"a": lambda x: x}, (torch.ones(1),), baseline="eager")
