"""Where a call spends its time: PyTorch operators against everything else, per call.

A compiled program calls some PyTorch operators itself (convolutions, fallbacks) and runs generated
code for the rest; the profiler sees the operators and not the generated code. So `operator_time`
reports, per call, the time inside each PyTorch operator and the wall time, and the difference is the
time spent elsewhere: Python in eager mode, generated kernels in a compiled program.

The profiler's native library prints start/stop lines (and, without a GPU, a device-count error)
straight to the process's stderr; they are collected into `OperatorTime.native_log` instead.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from casebook.inputs import as_args


@contextmanager
def native_stderr_collected() -> Iterator[list[str]]:
    """Collect what native code writes to file descriptor 2 inside the block (Python's
    `sys.stderr` redirection cannot see it). The list is filled when the block ends."""
    lines: list[str] = []
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode(errors="replace").splitlines())


@dataclass
class OperatorTime:
    """Milliseconds per call: wall time, and the self time of each PyTorch operator."""

    label: str
    wall_ms: float
    operator_ms: dict[str, float]
    native_log: list[str] = field(default_factory=list, repr=False)

    @property
    def outside_operators_ms(self) -> float:
        """Wall time not spent inside any PyTorch operator."""
        return self.wall_ms - sum(self.operator_ms.values())

    def ms(self, *operators: str) -> float:
        """Time per call inside the named operators (missing ones count 0)."""
        return sum(self.operator_ms.get(name, 0.0) for name in operators)


def operator_time(
    fn: Callable[..., Any], inputs: Sequence[Any] | torch.Tensor, *, runs: int = 5, label: str = ""
) -> OperatorTime:
    """Profile `runs` calls of ``fn(*inputs)`` (after one warm-up call) on the CPU."""
    if runs < 1:
        raise ValueError(f"runs={runs}: profile at least one call")
    args = as_args(inputs)
    with torch.inference_mode():
        fn(*args)
        with native_stderr_collected() as native, profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            for _ in range(runs):
                fn(*args)
            wall = time.perf_counter() - start
    operators = {
        event.key: event.self_cpu_time_total / 1000 / runs
        for event in prof.key_averages()
        if event.self_cpu_time_total > 0
    }
    return OperatorTime(
        label or getattr(fn, "__name__", type(fn).__name__), wall * 1000 / runs, operators, native
    )
