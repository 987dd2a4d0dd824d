"""See where torch.compile breaks a model into several graphs, two ways.

`torch._dynamo.explain` counts graphs and graph breaks and lists their reasons;
``TORCH_LOGS=graph_breaks`` logs every break as Dynamo meets it. `explain_graph_breaks` returns the
first as a small table row, `graph_break_log` captures the second in-process, so a notebook can show
and assert both. Neither compiles anything with Inductor.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
import torch._dynamo

_LOG_PREFIX = re.compile(r"^.*\[__graph_breaks\] ?")
_BREAK_HEADER = "Graph break in user code at"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def explain_graph_breaks(fn: Callable, *args) -> dict:
    """Run `torch._dynamo.explain(fn)(*args)` and summarize it as one table row.

    Keys: ``graphs`` (graph_count), ``graph breaks`` (graph_break_count) and ``break reasons``
    (the first line of each reason, joined with " | "). Call `torch._dynamo.reset()` between
    models so cached compilations from an earlier case do not leak into this one.
    """
    explanation = torch._dynamo.explain(fn)(*args)
    reasons = [_first_line(reason.reason) for reason in explanation.break_reasons]
    return {
        "graphs": explanation.graph_count,
        "graph breaks": explanation.graph_break_count,
        "break reasons": " | ".join(reasons),
    }


@dataclass
class GraphBreakLog:
    """The ``graph_breaks`` log lines captured while the block ran, without their prefixes."""

    lines: list[str] = field(default_factory=list)

    @property
    def breaks(self) -> int:
        """How many graph breaks were logged."""
        return sum(line.startswith(_BREAK_HEADER) for line in self.lines)

    def summary(self) -> str:
        """For each break: where it happened, the reason, and Dynamo's explanation."""
        kept, inside = [], False
        for line in self.lines:
            if line.startswith(_BREAK_HEADER):
                inside = True
            if not inside or not line.strip():
                continue
            kept.append(line)
            if line.lstrip().startswith("Explanation:"):
                inside = False
        return "\n".join(kept)


@contextlib.contextmanager
def graph_break_log() -> Iterator[GraphBreakLog]:
    """Capture what ``TORCH_LOGS=graph_breaks`` would print, for the duration of the block.

    Enables the artifact with `torch._logging.set_logs(graph_breaks=True)` and collects what the
    torch log handler writes to stderr. Anything else written to stderr in the block (warnings,
    for instance) is passed through to the real stderr. Logging is reset to the defaults afterwards.
    """
    log = GraphBreakLog()
    buffer = io.StringIO()
    real_stderr = sys.stderr
    torch._logging.set_logs(graph_breaks=True)
    try:
        with contextlib.redirect_stderr(buffer):
            yield log
    finally:
        torch._logging.set_logs()
        other = []
        for line in buffer.getvalue().splitlines():
            if "[__graph_breaks]" in line:
                log.lines.append(_LOG_PREFIX.sub("", line))
            else:
                other.append(line)
        if other:
            print("\n".join(other), file=real_stderr)
