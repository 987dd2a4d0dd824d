"""Known noise: the warnings and log lines PyTorch prints on the CPU-only build machine that say
nothing about a page's lesson, and `hide_noise`, which hides them.

Each page's first cell (`casebook.page.setup_page`) hides them and lists what it hid, with the
reason; a page about one of them keeps it. Worker processes that a page starts hide them too.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass


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
