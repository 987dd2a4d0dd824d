"""Latency measurements that are fair enough to print in a book.

Every speed-up the book reports comes from here, so the rules are fixed in one place: candidates
are timed in the same process on the same inputs, after warm-up, under ``torch.inference_mode``,
with at least 20 timed runs. ``compare`` interleaves them: in each round every candidate runs once,
in an order rotated from one round to the next, so a burst of load from another job slows all of
them alike. A speed-up is the per-round ratio baseline time / candidate time, reported as its median
with the 10th-90th percentile of the rounds; a page may call a candidate faster (or slower) only when
that whole interval lies above (below) 1, which ``Comparison.verdict`` and ``Comparison.headline``
decide. On CUDA, kernels run asynchronously, so each run is timed with CUDA events and the device is
synchronized; on CPU, ``time.perf_counter`` is used.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from casebook import REPO_ROOT
from casebook.build_records import WAIT_POLICY
from casebook.inputs import as_args, first_device

MIN_RUNS = 20
SPREAD_PERCENTILES = (10, 90)  # the spread of per-round speed-ups that a verdict must clear
BUSY_RATIO = 1.5  # a median this many times its own minimum: other jobs shared the machine
FASTER, SLOWER, UNCLEAR = "faster", "slower", "no clear difference on this machine"
_clock = time.perf_counter  # module attribute so tests can substitute a fake clock
# `make build` executes two pages at a time. Timed rounds hold this file lock, so two pages never
# time at once (the rest of a neighbour's work can still run beside them: see BUSY_RATIO).
TIMING_LOCK_ENV = "CASEBOOK_TIMING_LOCK"


def timing_lock_path() -> Path:
    """The lock file timed rounds hold: $CASEBOOK_TIMING_LOCK, else _build/.timing.lock in the checkout."""
    return Path(os.environ.get(TIMING_LOCK_ENV) or REPO_ROOT / "_build" / ".timing.lock")


@contextlib.contextmanager
def exclusive_timing() -> Iterator[list[float]]:
    """Hold the timing lock for the block; yields a one-item list: the seconds spent waiting for it."""
    path = timing_lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        start = _clock()
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield [_clock() - start]
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Timing:
    """Latencies of one callable, in milliseconds per call (from ``compare``: one per round, in order)."""

    label: str
    samples_ms: tuple[float, ...]
    device: str = "cpu"

    @property
    def runs(self) -> int:
        return len(self.samples_ms)

    @property
    def median_ms(self) -> float:
        return float(statistics.median(self.samples_ms))

    @property
    def p90_ms(self) -> float:
        """90th percentile, linear interpolation (numpy's default)."""
        return float(np.percentile(self.samples_ms, 90))

    @property
    def min_ms(self) -> float:
        return float(min(self.samples_ms))

    @property
    def busy(self) -> bool:
        """True when the median is more than ``BUSY_RATIO`` times the minimum: the machine was shared."""
        return self.median_ms > BUSY_RATIO * self.min_ms

    def __str__(self) -> str:
        return (
            f"{self.label}: median {self.median_ms:.3f} ms, p90 {self.p90_ms:.3f} ms "
            f"({self.runs} runs on {self.device})"
        )


@dataclass(frozen=True)
class Speedup:
    """Speed-up of one candidate over the baseline: median and spread of the per-round ratios."""

    median: float
    low: float  # 10th percentile of the per-round ratios
    high: float  # 90th percentile
    rounds: int

    @classmethod
    def from_ratios(cls, ratios: Sequence[float]) -> Speedup:
        low, high = np.percentile(ratios, SPREAD_PERCENTILES)
        return cls(float(statistics.median(ratios)), float(low), float(high), len(ratios))

    @property
    def verdict(self) -> str:
        """``FASTER`` or ``SLOWER`` only when the whole spread lies on one side of 1, else ``UNCLEAR``."""
        if self.low > 1:
            return FASTER
        if self.high < 1:
            return SLOWER
        return UNCLEAR

    def __str__(self) -> str:
        return f"×{self.median:.2f} ({self.low:.2f}–{self.high:.2f})"


def benchmark(
    fn: Callable[..., Any],
    inputs: Sequence[Any] | torch.Tensor,
    *,
    warmup: int = 3,
    runs: int = MIN_RUNS,
    label: str | None = None,
) -> Timing:
    """Time ``fn(*inputs)``: ``warmup`` untimed calls, then ``runs`` (>= 20) timed ones.

    The device (CPU or CUDA) is taken from the inputs' tensors. To compare callables, use ``compare``,
    which interleaves them.
    """
    _check_counts(warmup, runs)
    args = as_args(inputs)
    device = first_device(args)
    label = label or getattr(fn, "__name__", type(fn).__name__)
    start = _clock()
    samples = _time_rounds({label: fn}, args, device, warmup=warmup, runs=runs)[label]
    timing = Timing(label=label, samples_ms=samples, device=str(device))
    print(f"[benchmark] {timing}  [{_clock() - start:.1f} s]", flush=True)
    return timing


@dataclass
class Comparison:
    """Timings of several callables taken in the same rounds, with speed-ups against a baseline.

    ``timings[name].samples_ms[i]`` is ``name``'s time in round ``i``, so every candidate has one sample
    per round and per-round ratios are meaningful.
    """

    timings: dict[str, Timing]
    baseline: str
    device_info: str

    def __post_init__(self):
        if self.baseline not in self.timings:
            raise ValueError(f"baseline {self.baseline!r} is not one of the candidates {list(self.timings)}")
        runs = {name: t.runs for name, t in self.timings.items()}
        if len(set(runs.values())) != 1:
            raise ValueError(
                f"every candidate needs one sample per round, got {runs}: time them together with compare()"
            )

    @property
    def rounds(self) -> int:
        return self.timings[self.baseline].runs

    def ratios(self, name: str) -> tuple[float, ...]:
        """Per-round speed-ups: baseline time / ``name``'s time in the same round (> 1 is faster)."""
        base, other = self.timings[self.baseline].samples_ms, self._timing(name).samples_ms
        return tuple(b / o for b, o in zip(base, other, strict=True))

    def speedup(self, name: str) -> float:
        """Median per-round speed-up of ``name`` over the baseline: > 1 means faster than the baseline."""
        return self.speedup_interval(name).median

    def speedup_interval(self, name: str) -> Speedup:
        """Median and 10th-90th percentile of ``name``'s per-round speed-ups."""
        return Speedup.from_ratios(self.ratios(name))

    def verdict(self, name: str) -> str:
        """``"faster"``, ``"slower"`` or ``"no clear difference on this machine"``, from the spread."""
        return self.speedup_interval(name).verdict

    @property
    def busy(self) -> list[str]:
        """Candidates whose median is more than ``BUSY_RATIO`` times their minimum: a busy machine."""
        return [name for name, t in self.timings.items() if t.busy]

    def headline(self, name: str) -> str:
        """One sentence for a page: the verdict, the ratio with its spread, and a warning if it was busy."""
        if name == self.baseline:
            others = [n for n in self.timings if n != self.baseline]
            raise ValueError(f"{name!r} is the baseline; ask for the headline of another candidate: {others}")
        s, verdict = self.speedup_interval(name), self.verdict(name)
        subject = {
            FASTER: f"{name} is faster than {self.baseline}",
            SLOWER: f"{name} is slower than {self.baseline}",
            UNCLEAR: f"{name} and {self.baseline} show no clear difference on this machine",
        }[verdict]
        median_ms, base_ms = self.timings[name].median_ms, self.timings[self.baseline].median_ms
        sentence = (
            f"{subject}: ×{s.median:.2f} per round (10th–90th percentile ×{s.low:.2f}–×{s.high:.2f} over "
            f"{s.rounds} interleaved rounds), median {median_ms:.2f} ms against {base_ms:.2f} ms "
            f"on {self.device_info}."
        )
        return f"{sentence} {self._busy_warning()}".rstrip()

    def _busy_warning(self) -> str:
        if not self.busy:
            return ""
        which = ", ".join(f"{n} ×{self.timings[n].median_ms / self.timings[n].min_ms:.2f}" for n in self.busy)
        return (
            f"The machine was busy (median over minimum: {which}; above ×{BUSY_RATIO} means other jobs "
            "competed), so these ratios are unreliable: measure again on a quiet machine."
        )

    def _timing(self, name: str) -> Timing:
        if name not in self.timings:
            raise ValueError(f"{name!r} is not one of the candidates {list(self.timings)}")
        return self.timings[name]

    def _speedup_cell(self, name: str) -> str:
        return "baseline" if name == self.baseline else str(self.speedup_interval(name))

    def table(self):
        """A pandas DataFrame: one row per candidate, latencies in ms, speed-up vs the baseline."""
        import pandas as pd

        rows = {}
        for name, t in self.timings.items():
            s = self.speedup_interval(name)
            rows[name] = {
                "median_ms": t.median_ms,
                "p90_ms": t.p90_ms,
                "min_ms": t.min_ms,
                "runs": t.runs,
                f"speedup_vs_{self.baseline}": s.median,
                "speedup_p10": s.low,
                "speedup_p90": s.high,
                "verdict": "baseline" if name == self.baseline else s.verdict,
            }
        df = pd.DataFrame.from_dict(rows, orient="index")
        df.index.name = "candidate"
        return df

    def plot(self, ax=None, title: str | None = None):
        """Bar chart of median latency with p90 whiskers, the speed-up and its spread above each bar."""
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5)) if ax is None else (ax.figure, ax)
        names = list(self.timings)
        medians = [self.timings[n].median_ms for n in names]
        upper = [self.timings[n].p90_ms - self.timings[n].median_ms for n in names]
        bars = ax.bar(names, medians, yerr=[[0.0] * len(names), upper], capsize=6, color="#4c72b0")
        for bar, name in zip(bars, names, strict=True):
            ax.annotate(
                self._speedup_cell(name),
                (bar.get_x() + bar.get_width() / 2, self.timings[name].p90_ms),
                xytext=(0, 4),
                textcoords="offset points",
                ha="center",
                va="bottom",
            )
        ax.set_ylabel("latency per call (ms)\nbar = median, whisker = p90")
        ax.set_xlabel(f"candidate (label: speed-up vs {self.baseline} per round, median (p10–p90))")
        ax.set_ylim(0, max(t.p90_ms for t in self.timings.values()) * 1.25)
        header = f"{self.device_info}" + ("\nmachine busy: ratios unreliable" if self.busy else "")
        ax.set_title(f"{title}\n{header}" if title else header, fontsize=10)
        fig.tight_layout()
        return fig

    def __str__(self) -> str:
        lines = [
            f"Benchmark on {self.device_info} ({self.rounds} interleaved rounds, baseline: {self.baseline})"
        ]
        for name, t in self.timings.items():
            lines.append(
                f"  {t}  "
                + ("(baseline)" if name == self.baseline else f"speed-up {self._speedup_cell(name)}")
            )
        return "\n".join([*lines, self._busy_warning()]).rstrip()

    def _repr_markdown_(self) -> str:
        lines = [
            f"**Benchmark** on {self.device_info}, {self.rounds} interleaved rounds",
            "",
            f"| candidate | median (ms) | p90 (ms) | min (ms) | speed-up vs `{self.baseline}` (p10–p90) | verdict |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for name, t in self.timings.items():
            verdict = "baseline" if name == self.baseline else self.verdict(name)
            lines.append(
                f"| `{name}` | {t.median_ms:.3f} | {t.p90_ms:.3f} | {t.min_ms:.3f} | "
                f"{self._speedup_cell(name)} | {verdict} |"
            )
        warning = self._busy_warning()
        return "\n".join([*lines, "", f"**{warning}**"] if warning else lines)


def compare(
    candidates: Mapping[str, Callable[..., Any]],
    inputs: Sequence[Any] | torch.Tensor,
    *,
    baseline: str | None = None,
    warmup: int = 3,
    runs: int = MIN_RUNS,
) -> Comparison:
    """Time every candidate in this process on the same inputs, interleaved round by round.

    Each candidate is first called ``warmup`` times untimed; then, in each of ``runs`` rounds, every
    candidate is timed once, starting one place further along the list each round. ``baseline``
    defaults to ``"eager"`` if present, else the first candidate. Prints one line.
    """
    _check_counts(warmup, runs)
    if not candidates:
        raise ValueError("compare() needs at least one candidate, e.g. {'eager': model, 'aoti': compiled}")
    not_callable = [name for name, fn in candidates.items() if not callable(fn)]
    if not_callable:
        raise ValueError(
            f"candidates {not_callable} are not callable: pass the model or program, not its output"
        )
    baseline = baseline or ("eager" if "eager" in candidates else next(iter(candidates)))
    if baseline not in candidates:
        raise ValueError(f"baseline {baseline!r} is not one of the candidates {list(candidates)}")
    args = as_args(inputs)
    device = first_device(args)
    start = _clock()
    samples = _time_rounds(candidates, args, device, warmup=warmup, runs=runs)
    print(
        f"[compare] {', '.join(candidates)}: {runs} interleaved rounds after {warmup} warm-up calls each"
        f"  [{_clock() - start:.1f} s]",
        flush=True,
    )
    timings = {name: Timing(label=name, samples_ms=s, device=str(device)) for name, s in samples.items()}
    return Comparison(timings=timings, baseline=baseline, device_info=device_description(device))


def device_description(device: torch.device | str) -> str:
    """A one-line description of the hardware, for captions: numbers mean little without it."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"CUDA {torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    cpu = _cpu_model_name() or platform.processor() or platform.machine()
    # The book build sets a passive wait when two pages share the cores (casebook.build_records.share_cores).
    policy = os.environ.get(WAIT_POLICY)
    waits = f", {WAIT_POLICY}={policy}" if policy else ""
    return f"CPU {cpu}, {torch.get_num_threads()} threads{waits} (torch {torch.__version__})"


def _check_counts(warmup: int, runs: int) -> None:
    if runs < MIN_RUNS:
        raise ValueError(f"runs={runs}: use at least {MIN_RUNS} timed runs so median and p90 are meaningful")
    if warmup < 0:
        raise ValueError(f"warmup={warmup} must be >= 0 (0 skips the warm-up calls)")


def _time_rounds(
    candidates: Mapping[str, Callable[..., Any]],
    args: tuple[Any, ...],
    device: torch.device,
    *,
    warmup: int,
    runs: int,
) -> dict[str, tuple[float, ...]]:
    """Warm every candidate up, then time each once per round, rotating the order every round."""
    time_one = _cuda_timer(device) if device.type == "cuda" else _cpu_timer
    names = list(candidates)
    samples: dict[str, list[float]] = {name: [] for name in names}
    with torch.inference_mode():
        for name in names:
            for _ in range(warmup):
                candidates[name](*args)
        with exclusive_timing() as waited:
            if waited[0] >= 1:
                print(f"[timing] waited {waited[0]:.0f} s for another page's timed rounds", flush=True)
            for round_ in range(runs):
                first = round_ % len(names)
                for name in names[first:] + names[:first]:
                    samples[name].append(time_one(candidates[name], args))
    return {name: tuple(s) for name, s in samples.items()}


def _cpu_timer(fn: Callable[..., Any], args: tuple[Any, ...]) -> float:
    start = _clock()
    fn(*args)
    return (_clock() - start) * 1e3


def _cuda_timer(device: torch.device) -> Callable[[Callable[..., Any], tuple[Any, ...]], float]:
    """Time with CUDA events: host timers would only measure the kernel launches."""

    def time_one(fn: Callable[..., Any], args: tuple[Any, ...]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize(device)
        return float(start.elapsed_time(end))

    return time_one


def _cpu_model_name() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None
