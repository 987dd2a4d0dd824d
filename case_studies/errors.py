"""Reproduce an export failure on purpose, and fail loudly if it no longer happens.

Every failure page in the book runs the failing call inside `expect_error`. The block must raise an
exception of the stated type whose message contains the stated fragment; otherwise the cell raises
`AssertionError` and the book build fails. That is deliberate: the day a PyTorch release changes the
behaviour, the page that describes the old behaviour stops building instead of silently going stale.
"""

from __future__ import annotations

import io
import re
import sys
import traceback
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field

# The last lines of a partial graph are where tracing stopped; the rest can be hundreds of lines.
_PARTIAL_GRAPH_LINES = 25


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


def _qualified_name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


@contextmanager
def expect_error(
    expected_type: type[BaseException], fragment: str, *, show: bool = True, max_lines: int = 12
):
    """Assert that the block raises `expected_type` with `fragment` in its message.

    `fragment` is a plain substring, or a regular expression when wrapped as `re.compile(...)`.
    The caught error is printed (type, message trimmed to `max_lines`) and available as the
    yielded object's `.exception` for further assertions.
    """
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
        print(f"✗ raised as expected: {_qualified_name(type(caught.exception))}\n")
        print(caught.summary(max_lines))
        if caught.partial_graph:
            graph_lines = caught.partial_graph.strip().splitlines()
            print("\nGraph traced before the failure (export prints it to stderr), last lines:")
            if len(graph_lines) > _PARTIAL_GRAPH_LINES:
                print(f"    ... ({len(graph_lines) - _PARTIAL_GRAPH_LINES} earlier lines in .partial_graph)")
            print("\n".join(graph_lines[-_PARTIAL_GRAPH_LINES:]))
