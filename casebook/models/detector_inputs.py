"""Eight inputs a reader gets wrong, and what eager, an exported detector and its `CheckedProgram`
each do with them.

`EXPECTED` is the claim; `bad_input_outcomes` runs every case three ways and fails on any
difference (a call that should raise and runs, another exception type, another message).
"""

from __future__ import annotations

import re

import torch

from ..expected_errors import expect_error
from ..patches.torchvision import export_patches
from .detection_zoo import checked_detector
from .images import load_image
from .records import record


def bad_inputs(name: str, low: int) -> dict[str, list[torch.Tensor]]:
    """The eight cases for one builder; ``low`` is the smallest height and width its program
    accepts. The photo is taken near that size, not square (the cases that run cost less)."""
    image = load_image("astronaut", (low, low + 31))
    width = image.shape[2]
    return {
        "uint8 pixels, 0 to 255": [(image * 255).to(torch.uint8)],
        "float64": [image.double()],
        "channels last, (H, W, 3)": [image.permute(1, 2, 0).contiguous()],
        "a batch (1, 3, H, W) in the list": [image[None]],
        "grayscale, (1, H, W)": [image[:1]],
        "an empty list": [],
        "two images": [image, image],
        "one pixel below the range": [load_image("astronaut", (low - 1, width))],
    }


RUNS = None
"""The call returns detections."""

# The first layer that meets a float64 image raises; its wording depends on the layer.
FLOAT64_ERROR = r"expected scalar type Double but found Float|Input type \(double\) and bias type \(float\)"
GUARD_ON_CHANNELS = r"Guard failed: images\[0\].size\(\)\[0\] == 3"
FLATTEN_ERROR = "Trying to flatten user inputs with exported input tree spec"

EXPECTED: dict[str, tuple] = {  # case: (eager, exported program, CheckedProgram)
    "uint8 pixels, 0 to 255": (
        (TypeError, "Expected input images to be of floating type"),
        RUNS,
        (TypeError, r"images\[0\] is torch.uint8; the program was exported for torch.float32"),
    ),
    "float64": (
        (RuntimeError, FLOAT64_ERROR),
        (RuntimeError, FLOAT64_ERROR),
        (TypeError, r"images\[0\] is torch.float64"),
    ),
    "channels last, (H, W, 3)": (
        (RuntimeError, r"The size of tensor a \(\d+\) must match the size of tensor b \(3\)"),
        (AssertionError, GUARD_ON_CHANNELS),
        (ValueError, r"images\[0\].shape\[0\] is \d+; the program accepts exactly 3"),
    ),
    "a batch (1, 3, H, W) in the list": (
        (ValueError, "images is expected to be a list of 3d tensors"),
        (AssertionError, GUARD_ON_CHANNELS),
        (ValueError, r"images\[0\] has shape \(1, 3, \d+, \d+\), 4 dimensions; the program takes 3"),
    ),
    "grayscale, (1, H, W)": (
        RUNS,
        (AssertionError, GUARD_ON_CHANNELS),
        (ValueError, r"images\[0\].shape\[0\] is 1; the program accepts exactly 3"),
    ),
    "an empty list": (
        (IndexError, "list index out of range"),
        (ValueError, FLATTEN_ERROR),
        (ValueError, "images must be a list of 1, got a list of 0"),
    ),
    "two images": (
        RUNS,
        (ValueError, FLATTEN_ERROR),
        (ValueError, "images must be a list of 1, got a list of 2"),
    ),
    "one pixel below the range": (
        RUNS,
        (AssertionError, r"Guard failed: images\[0\].size\(\)\[1\] >= \d+"),
        (ValueError, r"images\[0\].shape\[1\] is \d+; the program accepts \d+ (to \d+|or more)"),
    ),
}
"""Each case: what (eager, the exported program, its CheckedProgram) do, as ``RUNS`` or
(exception type, message pattern). The same for every torchvision detector, except where a model's
record says its eager model raises otherwise (``bad_input_exceptions`` in `casebook.models.records`)."""


def outcome(call, images: list[torch.Tensor], expected) -> str:
    """Run ``call(images)`` and check it against ``expected``; what happened, on one line."""
    if expected is RUNS:
        with torch.inference_mode(), export_patches("skip_resize_in_eval"):
            call(images)
        return "runs"
    error_type, pattern = expected
    with expect_error(error_type, re.compile(pattern), show=False) as caught:
        with torch.inference_mode(), export_patches("skip_resize_in_eval"):
            call(images)
    return f"{error_type.__name__}: {caught.message.splitlines()[0][:110]}"


def bad_input_outcomes(
    name: str, model: torch.nn.Module, program: torch.export.ExportedProgram, low: int
) -> dict[str, tuple[str, str, str]]:
    """Every case of `bad_inputs` given to eager, the program and its CheckedProgram, each checked
    against `EXPECTED`; {case: (eager, program, CheckedProgram) outcomes}."""
    calls = (model, program.module(), checked_detector(program))
    found = {}
    for case, images in bad_inputs(name, low).items():
        eager_raises = record(name).bad_input_exceptions.get(case)
        expected = EXPECTED[case] if eager_raises is None else (eager_raises, *EXPECTED[case][1:])
        found[case] = tuple(outcome(call, images, want) for call, want in zip(calls, expected, strict=True))
    return found
