"""Helpers for the pages on data-dependent values and shapes ("unbacked" symbols such as `u0`).

- `runtime_asserts` lists the checks export left in a graph for facts it could not prove while
  tracing (`aten._assert_scalar` nodes, and the `sym_constrain_range*` nodes older releases used).
- `shape_log` captures what `TORCH_LOGS="dynamic"` would print (symbols created, guards added),
  so a page can show the few lines that explain an error instead of the whole log, and the user
  frames of the stack logged for the guard named by `TORCHDYNAMO_EXTENDED_DEBUG_GUARD_ADDED`.
- `random_detections` makes synthetic detector outputs (boxes, scores, labels) for NMS examples.
"""

from __future__ import annotations

import logging
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

SHAPE_LOGGER = "torch.fx.experimental.symbolic_shapes"

# Nodes through which an exported graph checks, at run time, what export assumed about a value.
_RANGE_TARGETS = (
    torch.ops.aten.sym_constrain_range_for_size.default,
    torch.ops.aten.sym_constrain_range.default,
)


def runtime_asserts(program) -> list[str]:
    """One line per runtime check in the graph of `program` (an ExportedProgram or GraphModule).

    An `aten._assert_scalar` node is shown by its message, which names the symbolic expression it
    checks (e.g. "Runtime assertion failed for expression u0 >= 0 on node 'ge'"). Subgraphs (the
    branches of `torch.cond`) are not searched.
    """
    lines = []
    for node in program.graph.nodes:
        if node.target is torch.ops.aten._assert_scalar.default:
            lines.append(str(node.args[1]))
        elif node.target in _RANGE_TARGETS:
            bounds = ", ".join(f"{key}={value}" for key, value in node.kwargs.items())
            lines.append(f"{node.target}({node.args[0]}, {bounds})")
    return lines


_LIBRARY_PATHS = ("site-packages", "<frozen", "<string>", sysconfig.get_paths()["stdlib"])


def _without_advice(line: str) -> str:
    return line.split(", for more info run with")[0].split(" (Could this error")[0]


@dataclass
class ShapeLog:
    """The messages the symbolic-shape engine logged while a block ran.

    `lines` holds one message per record; `stacks` maps a message to the Python stack logged with it,
    which the engine does only for the guard named by `TORCHDYNAMO_EXTENDED_DEBUG_GUARD_ADDED`
    (`torch.fx.experimental._config.extended_debug_guard_added`).
    """

    lines: list[str] = field(default_factory=list)
    stacks: dict[str, str] = field(default_factory=dict)

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
    def __init__(self, log: ShapeLog):
        super().__init__(level=logging.DEBUG)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.log.lines.append(message)
        if record.stack_info:
            self.log.stacks[message] = record.stack_info


@contextmanager
def shape_log(level: int = logging.INFO) -> Iterator[ShapeLog]:
    """Collect the symbolic-shape log (what `TORCH_LOGS="dynamic"` prints) instead of printing it.

    Inside the block the logger `torch.fx.experimental.symbolic_shapes` logs at `level` into the
    yielded `ShapeLog` only; its handlers, level and propagation are restored afterwards.
    """
    logger = logging.getLogger(SHAPE_LOGGER)
    saved = (logger.level, logger.propagate, list(logger.handlers))
    log = ShapeLog()
    collector = _Collector(log)
    for handler in saved[2]:
        logger.removeHandler(handler)
    logger.addHandler(collector)
    logger.setLevel(level)
    logger.propagate = False
    try:
        yield log
    finally:
        logger.removeHandler(collector)
        for handler in saved[2]:
            logger.addHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def random_detections(
    num_boxes: int,
    *,
    num_classes: int = 3,
    image_size: float = 640.0,
    max_box_size: float = 96.0,
    score_range: tuple[float, float] = (0.0, 1.0),
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Synthetic detector output: `(boxes, scores, labels)` for `num_boxes` candidates.

    Boxes are float32 `(x1, y1, x2, y2)` inside the image with `0 <= x1 < x2` and `0 <= y1 < y2`
    (the format torchvision's box ops expect), scores are uniform in `score_range`, labels are
    int64 class indices. The same seed gives the same tensors.
    """
    generator = torch.Generator().manual_seed(seed)
    top_left = torch.rand(num_boxes, 2, generator=generator) * (image_size - max_box_size)
    size = 4.0 + torch.rand(num_boxes, 2, generator=generator) * (max_box_size - 4.0)
    boxes = torch.cat([top_left, top_left + size], dim=1)
    low, high = score_range
    scores = low + (high - low) * torch.rand(num_boxes, generator=generator)
    labels = torch.randint(0, num_classes, (num_boxes,), generator=generator)
    return boxes, scores, labels
