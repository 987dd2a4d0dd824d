"""The first cell of every executed page: a visible version stamp, and known noise silenced.

`setup_page()` does two things a reader should not have to think about:

- it shows a one-line stamp (the versions that produced the page) with the full environment folded
  under it, so a reader comparing their own error with the page sees at a glance what ran;
- it hides the few warnings and log lines that PyTorch prints on this CPU-only build machine and
  that say nothing about the page's lesson (`KNOWN_NOISE`). A page that discusses one of them keeps
  it with ``setup_page(keep=[...])``. The stamp's folded part lists what was hidden and why.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Iterable

import torch

from casebook.env import environment
from casebook.noise import KNOWN_NOISE, hide_noise


def stamp_text(env: dict[str, str], date: datetime.date) -> str:
    """The one-line version stamp."""
    device = "CUDA" if torch.cuda.is_available() else "CPU only"
    return (
        f"Executed {date.isoformat()} with torch {env['torch']}, torchvision {env['torchvision']}, "
        f"Python {env['Python']} ({device}, {env['CPU cores']} cores)"
    )


class PageStamp:
    """What `setup_page` displays: rendered as HTML on the site, as plain text elsewhere."""

    def __init__(self, env: dict[str, str], hidden: list[str], date: datetime.date):
        self.env, self.hidden, self.date = env, hidden, date

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in self.env.items()
        )
        noise = "".join(
            f"<li><code>{html.escape(KNOWN_NOISE[name].pattern.replace(chr(92), ''))}</code>: "
            f"{html.escape(KNOWN_NOISE[name].why)}</li>"
            for name in self.hidden
        )
        return (
            '<div class="casebook-version-stamp">'
            f"<p>{html.escape(stamp_text(self.env, self.date))}</p>"
            "<details><summary>Full environment, and the warnings hidden on this page</summary>"
            f"<table><thead><tr><th>component</th><th>version</th></tr></thead><tbody>{rows}</tbody></table>"
            f"<p>Hidden as noise (see <code>casebook/noise.py</code>):</p><ul>{noise}</ul>"
            "</details></div>"
        )

    def __repr__(self) -> str:
        return stamp_text(self.env, self.date)


def setup_page(keep: Iterable[str] = ()) -> PageStamp:
    """Hide known noise (except `keep`) and return the page's version stamp, to display."""
    hidden = hide_noise(keep)
    return PageStamp(environment(), hidden, datetime.date.today())
