"""How the book's own outputs look: expected errors styled as errors, long text folded.

Each object renders as HTML on the site (styled by `_static/casebook.css`) and as the same plain
text in a terminal or in a notebook front end without HTML.
"""

from __future__ import annotations

import html

from IPython.display import display

# An output longer than this is summarized, with the full text folded under it.
FOLD_AFTER_LINES = 40


class ExpectedError:
    """An error a page raised on purpose: a red-edged block whose long lines wrap."""

    def __init__(self, title: str, body: str):
        self.title, self.body = title, body

    def _repr_html_(self) -> str:
        return (
            '<div class="casebook-expected-error">'
            f'<p class="casebook-expected-error-title">{html.escape(self.title)}</p>'
            f"<pre>{html.escape(self.body)}</pre></div>"
        )

    def __repr__(self) -> str:
        return f"{self.title}\n\n{self.body}"


class FoldedText:
    """`head` lines shown, the whole text behind a "show all N lines" toggle."""

    def __init__(self, text: str, *, head: int = 10, label: str = "lines"):
        if head < 1:
            raise ValueError(f"head={head}: show at least one line before the fold")
        self.lines = text.rstrip("\n").splitlines()
        self.head, self.label = head, label

    def _repr_html_(self) -> str:
        shown = html.escape("\n".join(self.lines[: self.head]))
        if len(self.lines) <= self.head:
            return f'<pre class="casebook-folded">{shown}</pre>'
        return (
            f'<div class="casebook-folded"><pre>{shown}</pre>'
            f"<details><summary>show all {len(self.lines)} {html.escape(self.label)}</summary>"
            f"<pre>{html.escape(chr(10).join(self.lines))}</pre></details></div>"
        )

    def __repr__(self) -> str:
        if len(self.lines) <= self.head:
            return "\n".join(self.lines)
        hidden = len(self.lines) - self.head
        return "\n".join(self.lines[: self.head] + [f"... ({hidden} more {self.label})"])


def show_lines(lines: list[str], *, head: int = 10, label: str = "lines") -> None:
    """Display `lines`; past `head` of them, the rest is folded."""
    display(FoldedText("\n".join(lines), head=head, label=label))
