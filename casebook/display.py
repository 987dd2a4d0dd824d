"""How the book's own outputs look: expected errors styled as errors.

The object renders as HTML on the site (styled by `_static/casebook.css`) and as the same plain
text in a terminal or in a notebook front end without HTML.
"""

from __future__ import annotations

import html


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
