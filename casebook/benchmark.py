"""Latency measurements that are fair enough to print in a book.

Every speed-up the book reports comes from here, so the rules are fixed in one place: candidates
are timed in the same process on the same inputs, after warm-up, under ``torch.inference_mode``,
with at least 20 timed runs so the median and p90 mean something. On CUDA, kernels run
asynchronously, so each run is timed with CUDA events and the device is synchronized; on CPU,
``time.perf_counter`` is used.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from casebook.inputs import as_args, first_device

MIN_RUNS = 20
_clock = time.perf_counter  # module attribute so tests can substitute a fake clock


@dataclass(frozen=True)
class Timing:
    """Latencies of one callable, in milliseconds per call."""

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

    def __str__(self) -> str:
        return (
            f"{self.label}: median {self.median_ms:.3f} ms, p90 {self.p90_ms:.3f} ms "
            f"({self.runs} runs on {self.device})"
        )


def benchmark(
    fn: Callable[..., Any],
    inputs: Sequence[Any] | torch.Tensor,
    *,
    warmup: int = 3,
    runs: int = MIN_RUNS,
    label: str | None = None,
) -> Timing:
    """Time ``fn(*inputs)``: ``warmup`` untimed calls, then ``runs`` (>= 20) timed ones.

    The device (CPU or CUDA) is taken from the inputs' tensors.
    """
    if runs < MIN_RUNS:
        raise ValueError(f"runs={runs}: use at least {MIN_RUNS} timed runs so median and p90 are meaningful")
    if warmup < 0:
        raise ValueError(f"warmup={warmup} must be >= 0")
    args = as_args(inputs)
    device = first_device(args)
    label = label or getattr(fn, "__name__", type(fn).__name__)
    time_one = _cuda_timer(device) if device.type == "cuda" else _cpu_timer
    start = _clock()
    with torch.inference_mode():
        for _ in range(warmup):
            fn(*args)
        samples = tuple(time_one(fn, args) for _ in range(runs))
    timing = Timing(label=label, samples_ms=samples, device=str(device))
    print(f"[benchmark] {timing}  [{_clock() - start:.1f} s]", flush=True)
    return timing


@dataclass
class Comparison:
    """Timings of several callables on the same inputs, with speed-ups against a baseline."""

    timings: dict[str, Timing]
    baseline: str
    device_info: str

    def speedup(self, name: str) -> float:
        """Baseline median divided by ``name``'s median: > 1 means faster than the baseline."""
        return self.timings[self.baseline].median_ms / self.timings[name].median_ms

    def table(self):
        """A pandas DataFrame: one row per candidate, latencies in ms, speed-up vs the baseline."""
        import pandas as pd

        rows = {
            name: {
                "median_ms": t.median_ms,
                "p90_ms": t.p90_ms,
                "min_ms": t.min_ms,
                "runs": t.runs,
                f"speedup_vs_{self.baseline}": self.speedup(name),
            }
            for name, t in self.timings.items()
        }
        df = pd.DataFrame.from_dict(rows, orient="index")
        df.index.name = "candidate"
        return df

    def plot(self, ax=None, title: str | None = None):
        """Bar chart of median latency with p90 whiskers and the speed-up written above each bar."""
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5)) if ax is None else (ax.figure, ax)
        names = list(self.timings)
        medians = [self.timings[n].median_ms for n in names]
        upper = [self.timings[n].p90_ms - self.timings[n].median_ms for n in names]
        bars = ax.bar(names, medians, yerr=[[0.0] * len(names), upper], capsize=6, color="#4c72b0")
        for bar, name in zip(bars, names, strict=True):
            ax.annotate(
                f"×{self.speedup(name):.2f}",
                (bar.get_x() + bar.get_width() / 2, self.timings[name].p90_ms),
                xytext=(0, 4),
                textcoords="offset points",
                ha="center",
                va="bottom",
            )
        ax.set_ylabel("latency per call (ms)\nbar = median, whisker = p90")
        ax.set_xlabel(f"candidate (×N = speed-up vs {self.baseline})")
        ax.set_ylim(0, max(t.p90_ms for t in self.timings.values()) * 1.25)
        ax.set_title(f"{title}\n{self.device_info}" if title else self.device_info, fontsize=10)
        fig.tight_layout()
        return fig

    def __str__(self) -> str:
        lines = [f"Benchmark on {self.device_info} (baseline: {self.baseline})"]
        for name, t in self.timings.items():
            lines.append(f"  {t}  speed-up ×{self.speedup(name):.2f}")
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        lines = [
            f"**Benchmark** on {self.device_info}",
            "",
            f"| candidate | median (ms) | p90 (ms) | runs | speed-up vs `{self.baseline}` |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, t in self.timings.items():
            lines.append(
                f"| `{name}` | {t.median_ms:.3f} | {t.p90_ms:.3f} | {t.runs} | ×{self.speedup(name):.2f} |"
            )
        return "\n".join(lines)


def compare(
    candidates: Mapping[str, Callable[..., Any]],
    inputs: Sequence[Any] | torch.Tensor,
    *,
    baseline: str | None = None,
    warmup: int = 3,
    runs: int = MIN_RUNS,
) -> Comparison:
    """Benchmark every candidate in this process, on the same inputs, one after the other.

    ``baseline`` defaults to ``"eager"`` if present, else the first candidate.
    """
    if not candidates:
        raise ValueError("compare() needs at least one candidate")
    baseline = baseline or ("eager" if "eager" in candidates else next(iter(candidates)))
    if baseline not in candidates:
        raise ValueError(f"baseline {baseline!r} is not one of the candidates {list(candidates)}")
    timings = {
        name: benchmark(fn, inputs, warmup=warmup, runs=runs, label=name) for name, fn in candidates.items()
    }
    return Comparison(
        timings=timings, baseline=baseline, device_info=device_description(first_device(as_args(inputs)))
    )


def device_description(device: torch.device | str) -> str:
    """A one-line description of the hardware, for captions: numbers mean little without it."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"CUDA {torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    cpu = _cpu_model_name() or platform.processor() or platform.machine()
    return f"CPU {cpu}, {torch.get_num_threads()} threads (torch {torch.__version__})"


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
