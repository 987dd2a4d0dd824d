"""Capturing what PyTorch logs while a block runs, so a page shows the few lines that matter.

One mechanism for every log the book reads: `capture_log` attaches a collecting handler to a logger
for the duration of a block, keeps every message (and the stack logged with it, if any) and
restores the logger afterwards. Two uses of it:

- `shape_log` collects what `TORCH_LOGS="dynamic"` prints (symbols created, guards added) from the
  symbolic-shape engine's logger;
- `graph_break_log` collects what `TORCH_LOGS="graph_breaks"` prints (every break Dynamo meets).

`explain_graph_breaks` summarizes `torch._dynamo.explain`, the other way to see graph breaks.
Nothing here compiles with Inductor.
"""

from __future__ import annotations

import logging
import sysconfig
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch._dynamo
from torch._logging._internal import log_registry

SHAPE_LOGGER = "torch.fx.experimental.symbolic_shapes"
_BREAK_HEADER = "Graph break in user code at"

_LIBRARY_PATHS = ("site-packages", "<frozen", "<string>", sysconfig.get_paths()["stdlib"])


def _without_advice(line: str) -> str:
    return line.split(", for more info run with")[0].split(" (Could this error")[0]


@dataclass
class CapturedLog:
    """The messages a logger emitted while a block ran.

    `lines` holds one message per record; `stacks` maps a message to the Python stack logged with
    it, when the record carried one (the symbolic-shape engine does that only for the guard named by
    `TORCHDYNAMO_EXTENDED_DEBUG_GUARD_ADDED`, i.e.
    `torch.fx.experimental._config.extended_debug_guard_added`).
    """

    lines: list[str] = field(default_factory=list)
    stacks: dict[str, str] = field(default_factory=dict)
    split_lines: bool = False  # one list item per line of a multi-line message, not per record

    def matching(self, fragment: str) -> list[str]:
        """The lines containing `fragment`, without the trailing "for more info run with ..." advice."""
        return [_without_advice(line) for line in self.lines if fragment in line]

    def user_frames(self, fragment: str, *, skip: tuple[str, ...] = _LIBRARY_PATHS) -> list[str]:
        """The frames of the stack logged with the first line containing `fragment`, outside `skip`.

        Each frame is "file:line in function: code". Frames whose line contains one of `skip` (by
        default: installed packages, PyTorch included, the standard library and code compiled from
        strings) are left out, which leaves the model code that triggered the message.
        """
        stack = next((s for line, s in self.stacks.items() if fragment in line), "")
        frames = []
        lines = stack.splitlines()
        for i, text in enumerate(lines):
            text = text.strip()
            if not text.startswith("File ") or any(part in text for part in skip):
                continue
            where, _, function = text.removeprefix("File ").partition(", in ")
            path, _, lineno = where.partition(", line ")
            following = lines[i + 1].strip() if i + 1 < len(lines) else ""
            code = "" if following.startswith("File ") else following
            frame = f"{path.strip(chr(34))}:{lineno} in {function}"
            frames.append(f"{frame}: {code}" if code else frame)
        return frames


class _Collector(logging.Handler):
    def __init__(self, log: CapturedLog):
        super().__init__(level=logging.DEBUG)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.log.split_lines:
            self.log.lines.extend(message.splitlines())
        else:
            self.log.lines.append(message)
        if record.stack_info:
            self.log.stacks[message] = record.stack_info


@contextmanager
def capture_log(
    names: str | Sequence[str], level: int = logging.DEBUG, log: CapturedLog | None = None
) -> Iterator[CapturedLog]:
    """Collect what the logger(s) `names` emit at `level` or above inside the block, instead of printing it.

    Inside the block each logger logs into the yielded `CapturedLog` only (its own handlers are
    detached and it does not propagate); handlers, level and propagation are restored afterwards.
    """
    loggers = [logging.getLogger(name) for name in ([names] if isinstance(names, str) else names)]
    saved = [(logger.level, logger.propagate, list(logger.handlers)) for logger in loggers]
    log = log if log is not None else CapturedLog()
    collector = _Collector(log)
    for logger, (_, _, handlers) in zip(loggers, saved, strict=True):
        for handler in handlers:
            logger.removeHandler(handler)
        logger.addHandler(collector)
        logger.setLevel(level)
        logger.propagate = False
    try:
        yield log
    finally:
        for logger, (old_level, old_propagate, handlers) in zip(loggers, saved, strict=True):
            logger.removeHandler(collector)
            for handler in handlers:
                logger.addHandler(handler)
            logger.setLevel(old_level)
            logger.propagate = old_propagate


def shape_log(level: int = logging.INFO):
    """Collect the symbolic-shape log (what `TORCH_LOGS="dynamic"` prints) instead of printing it."""
    return capture_log(SHAPE_LOGGER, level)


@contextmanager
def guards_added() -> Iterator[list[str]]:
    """The guards export adds inside the block, one line each ("eval Eq(s0, 320) [guard added] at
    file:line in function (...)"), as `TORCH_LOGS="+dynamic"` would print them, but printed nowhere.

    The list is filled when the block ends, also when it raises (an export that fails still added
    guards before failing).
    """
    guards: list[str] = []
    try:
        with shape_log(logging.INFO) as log:
            yield guards
    finally:
        guards.extend(log.matching("[guard added]"))


# --------------------------------------------------------------------------------------------------
# Graph breaks
# --------------------------------------------------------------------------------------------------


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
class GraphBreakLog(CapturedLog):
    """The ``graph_breaks`` log lines captured while the block ran, one line per list item."""

    split_lines: bool = True

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


@contextmanager
def graph_break_log() -> Iterator[GraphBreakLog]:
    """Collect what ``TORCH_LOGS=graph_breaks`` would print, for the duration of the block.

    Switches the artifact on with `torch._logging.set_logs(graph_breaks=True)` and captures its
    loggers with `capture_log`; logging is reset to the defaults afterwards. An artifact has one
    logger per module that logs it (``torch._dynamo.symbolic_convert.__graph_breaks``, ...).
    """
    torch._logging.set_logs(graph_breaks=True)
    names = [name for name in log_registry.artifact_log_qnames if name.endswith(".__graph_breaks")]
    try:
        with capture_log(names, logging.DEBUG, GraphBreakLog()) as log:
            yield log
    finally:
        torch._logging.set_logs()
