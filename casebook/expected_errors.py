"""Expected errors: every failure page runs the failing call inside `expect_error`.

The block must raise an exception of the stated type whose message contains the stated fragment;
otherwise the cell raises `AssertionError` and the book build fails. That is deliberate: the day a
PyTorch release changes the behaviour, the page that describes the old behaviour stops building
instead of silently going stale.
"""

from __future__ import annotations

import io
import re
import sys
import traceback
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field

from IPython.display import display

from casebook.display import ExpectedError

# The last lines of a partial graph are where tracing stopped; the rest can be hundreds of lines.
PARTIAL_GRAPH_LINES = 25


@dataclass
class CaughtError:
    """The exception a block raised, kept so the page can show and discuss it."""

    expected_type: type[BaseException]
    fragment: str
    exception: BaseException | None = field(default=None)
    stderr: str = ""

    @property
    def partial_graph(self) -> str | None:
        """The graph export had traced before it failed, when export attached one."""
        graph = getattr(self.exception, "partial_fx_graph", None)
        return str(graph) if graph is not None else None

    @property
    def message(self) -> str:
        return str(self.exception)

    def summary(self, max_lines: int = 12) -> str:
        """The error as the reader would see it at the bottom of a traceback, trimmed."""
        lines = traceback.format_exception_only(type(self.exception), self.exception)
        text = "".join(lines).rstrip().splitlines()
        if len(text) > max_lines:
            text = text[:max_lines] + [f"... ({len(text) - max_lines} more lines)"]
        return "\n".join(text)

    def where(self, frames: int = 3) -> str:
        """The innermost frames of the traceback: where in the library the error was raised."""
        tb = traceback.extract_tb(self.exception.__traceback__)
        return "".join(traceback.format_list(tb[-frames:])).rstrip()

    def raised_at(self, path_fragment: str) -> str:
        """The innermost traceback frame whose file path contains `path_fragment`, on one line.

        For a library, e.g. ``raised_at("/detectron2/")``, this is the library line that asked the
        question export could not answer: ``detectron2/layers/batch_norm.py:53 in forward: ...``
        (paths shown from ``site-packages/`` on). Raises ValueError when no frame matches.
        """
        frames = [
            f for f in traceback.extract_tb(self.exception.__traceback__) if path_fragment in f.filename
        ]
        if not frames:
            raise ValueError(
                f"no frame of the traceback is in a file whose path contains {path_fragment!r}; "
                f"the innermost frames are:\n{self.where()}"
            )
        frame = frames[-1]
        return f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno} in {frame.name}: {frame.line}"


def _qualified_name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


@contextmanager
def expect_error(
    expected_type: type[BaseException],
    fragment: str,
    *,
    show: bool = True,
    max_lines: int = 12,
    graph_lines: int = PARTIAL_GRAPH_LINES,
):
    """Assert that the block raises `expected_type` with `fragment` in its message.

    `fragment` is a plain substring, or a regular expression when wrapped as `re.compile(...)`.
    The caught error is printed (type, message trimmed to `max_lines`, then the last `graph_lines`
    lines of the graph export had traced before it failed, when it attached one; 0 hides them) and
    available as the yielded object's `.exception` for further assertions.
    """
    if max_lines < 1 or graph_lines < 0:
        raise ValueError(
            f"expect_error needs max_lines >= 1 and graph_lines >= 0, got max_lines={max_lines}, "
            f"graph_lines={graph_lines}"
        )
    caught = CaughtError(expected_type, fragment if isinstance(fragment, str) else fragment.pattern)
    # torch.export prints the partially traced graph to stderr once per nested wrapper; capture it so
    # the page shows it once, labelled, after the error.
    captured = io.StringIO()
    try:
        with redirect_stderr(captured):
            yield caught
    except BaseException as error:  # noqa: BLE001 - re-raised below unless it is the expected one
        if not isinstance(error, expected_type):
            raise AssertionError(
                f"expected {_qualified_name(expected_type)} but the block raised "
                f"{_qualified_name(type(error))}: {str(error)[:500]}"
            ) from error
        message = str(error)
        found = fragment.search(message) if isinstance(fragment, re.Pattern) else fragment in message
        if not found:
            raise AssertionError(
                f"{_qualified_name(type(error))} was raised, but its message no longer contains "
                f"{caught.fragment!r}; the page describing it is stale. Message:\n{message[:2000]}"
            ) from error
        caught.exception = error
    else:
        raise AssertionError(
            f"expected {_qualified_name(expected_type)} ({caught.fragment!r}) but the block ran without error: "
            "PyTorch's behaviour has changed and this page needs updating."
        )
    finally:
        caught.stderr = captured.getvalue()
    other_stderr = caught.stderr
    if caught.partial_graph:
        other_stderr = other_stderr.replace(caught.partial_graph, "").strip()
    if other_stderr:
        sys.stderr.write(other_stderr + "\n")
    if show:
        body = [caught.summary(max_lines)]
        if caught.partial_graph and graph_lines:
            traced = [line for line in caught.partial_graph.strip().splitlines() if line.strip()]
            body.append("\nGraph traced before the failure (export prints it to stderr), last lines:")
            if len(traced) > graph_lines:
                body.append(f"    ... ({len(traced) - graph_lines} earlier lines in .partial_graph)")
            body.append("\n".join(traced[-graph_lines:]))
        sys.stdout.flush()  # keep the cell's earlier prints above the error block
        display(
            ExpectedError(f"✗ raised as expected: {_qualified_name(type(caught.exception))}", "\n".join(body))
        )
