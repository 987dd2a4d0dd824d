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
import logging
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from casebook.env import environment


@dataclass(frozen=True)
class Noise:
    """A warning or log message that is hidden on pages that are not about it."""

    pattern: str  # regular expression matched at the start of the message
    why: str
    category: type[Warning] | None = None  # a `warnings` warning ...
    logger: str | None = None  # ... or a log message of this logger


KNOWN_NOISE: dict[str, Noise] = {
    "no-cuda-runtime": Noise(
        pattern="No CUDA runtime is found",
        why="torch's C++ extension module looks for a CUDA toolkit when it is imported; "
        "the build machine has none and nothing on the page compiles CUDA code.",
        logger="torch.utils.cpp_extension",
    ),
    "unable-to-find-user-code": Noise(
        pattern="Unable to find user code corresponding to",
        why="logged when an export that the page expects to fail stops on an unbacked symbol; "
        "the error the page shows already names the line.",
        logger="torch.fx.experimental.symbolic_shapes",
    ),
    "meshgrid-indexing": Noise(
        pattern=r"torch\.meshgrid: in an upcoming release",
        why="library code (detectron2) calls torch.meshgrid without `indexing=`; it does not change "
        "what is exported.",
        category=UserWarning,
    ),
    "strict-export-side-effects": Noise(
        pattern="While compiling, we found certain side effects happened",
        why="strict export (TorchDynamo) notes that torchvision's anchor generators write to "
        "attributes while traced; the pages that export detectors strictly compare the program "
        "with eager.",
        category=UserWarning,
    ),
    "onednn-tf32": Noise(
        pattern="TF32 acceleration on top of oneDNN is available for Intel GPUs",
        why="torch.backends.mkldnn.flags(enabled=False) also sets oneDNN's TF32 switch, which "
        "warns on a build without Intel GPU support; the shipping pages switch oneDNN off only so "
        "that a convolution's fake kernel does not bound the batch while the program is lowered.",
        category=UserWarning,
    ),
    "torchao-enum-constant": Noise(
        pattern=r"<enum '\w+'> is an Enum subclass and is now natively supported",
        why="torchao 0.18 registers one of its enums as a pytree constant when it is imported, which "
        "PyTorch 2.14 no longer needs; nothing on the page depends on it.",
        logger="torch.utils._pytree",
    ),
    "create-unbacked-symint": Noise(
        pattern="`create_unbacked_symint` is deprecated",
        why="torchvision's fake kernels for nms and roi_align use a deprecated PyTorch API; the "
        "data-dependent guards chapter explains what it does.",
        category=FutureWarning,
    ),
}


class _DropMessages(logging.Filter):
    def __init__(self, pattern: str):
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


_installed_log_filters: list[tuple[logging.Logger, logging.Filter]] = []
_installed_warning_filters: list[tuple] = []


def hide_noise(keep: Iterable[str] = ()) -> list[str]:
    """Hide every entry of `KNOWN_NOISE` except those named in `keep`; return the hidden names."""
    keep = list(keep)
    unknown = [name for name in keep if name not in KNOWN_NOISE]
    if unknown:
        raise ValueError(f"unknown noise name(s) {unknown}: choose from {sorted(KNOWN_NOISE)}")
    for logger, log_filter in _installed_log_filters:  # calling twice replaces, never stacks
        logger.removeFilter(log_filter)
    _installed_log_filters.clear()
    for warning_filter in _installed_warning_filters:
        if warning_filter in warnings.filters:
            warnings.filters.remove(warning_filter)
    _installed_warning_filters.clear()
    warnings._filters_mutated()  # the module caches its lookups; tell it the filters changed
    hidden = [name for name in KNOWN_NOISE if name not in keep]
    for name in hidden:
        noise = KNOWN_NOISE[name]
        if noise.category is not None:
            warnings.filterwarnings("ignore", message=noise.pattern, category=noise.category)
            _installed_warning_filters.append(warnings.filters[0])
        if noise.logger is not None:
            logger = logging.getLogger(noise.logger)
            log_filter = _DropMessages(noise.pattern)
            logger.addFilter(log_filter)
            _installed_log_filters.append((logger, log_filter))
    return hidden


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
            f"<p>Hidden as noise (see <code>casebook/page.py</code>):</p><ul>{noise}</ul>"
            "</details></div>"
        )

    def __repr__(self) -> str:
        return stamp_text(self.env, self.date)


def setup_page(keep: Iterable[str] = ()) -> PageStamp:
    """Hide known noise (except `keep`) and return the page's version stamp, to display."""
    hidden = hide_noise(keep)
    return PageStamp(environment(), hidden, datetime.date.today())
