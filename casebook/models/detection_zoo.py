"""Every detector builder in ``torchvision.models.detection``, built, exported and compared the same way.

The list is torchvision's own (``torchvision.models.list_models``), so a release that adds a builder
adds a row. Each model gets random weights (seed 0) with BatchNorm statistics re-estimated on four
photos where it has BatchNorm, the resize taken out of its transform (``_skip_resize``, as in the
Faster R-CNN case study: height and width can then stay symbolic), and one eager run before export
(it caches the RoI pooler's scales). Exports run under every patch of
:mod:`casebook.patches.torchvision`.

The accepted image size is read from the program: export with ``Dim.AUTO`` for height and width,
then :func:`size_range` returns the range export derived (a lower bound from the smallest feature
map, an upper bound where the architecture has one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..checked_program import CheckedProgram, input_contract
from ..introspect import symbol_range
from ..patches.torchvision import export_patches
from .images import load_image
from .random_weights import DETECTORS as DETECTORS  # the zoo's builders: pages read zoo.DETECTORS
from .random_weights import check_detector_name
from .records import record


def example_size(name: str) -> tuple[int, int]:
    """The (height, width) a detector is exported and compared at."""
    check_detector_name(name)
    return record(name).example_size


def build_detector(name: str, seed: int = 0) -> torch.nn.Module:
    """The model's record builds it (`casebook.models.records`: random weights, the backbone's
    BatchNorm statistics re-estimated on the calibration photos where it has BatchNorm); here its
    resize is switched off and it is warmed up. Takes images at their
    own size; its boxes are in that image's coordinates.
    """
    check_detector_name(name)
    model = record(name).build(seed)
    model.transform._skip_resize = True
    eager(model, example_image(name))  # caches the RoI pooler's scales, which would pin H and W
    return model


def example_image(name: str, photo: str = "astronaut") -> torch.Tensor:
    """The photo at the detector's example size, a float (3, H, W) tensor in [0, 1]."""
    return load_image(photo, example_size(name))


def eager(model: torch.nn.Module, image: torch.Tensor) -> dict[str, torch.Tensor]:
    """The model's detections for one image, with its resize off (the patch that honours ``_skip_resize``)."""
    with torch.inference_mode(), export_patches("skip_resize_in_eval"):
        return model([image])[0]


@dataclass(frozen=True)
class ExportRun:
    """One export of one detector: the program and how long ``torch.export.export`` took."""

    program: torch.export.ExportedProgram
    seconds: float
    """Wall-clock seconds: they grow with whatever else shares the machine."""
    cpu_seconds: float
    """CPU seconds of this process (all its threads): on one thread, what one core spends on the
    export, however busy the machine was."""
    dynamic: bool
    strict: bool


def export_detector(
    name: str, model: torch.nn.Module, image: torch.Tensor, *, dynamic: bool, strict: bool
) -> ExportRun:
    """Export under every patch, with the record's export arguments (``dynamic``: height and width
    ``Dim.AUTO``)."""
    arguments = record(name).export_arguments(dynamic)
    start, cpu_start = time.perf_counter(), time.process_time()
    with export_patches():
        program = torch.export.export(model, ([image],), strict=strict, **arguments)
    return ExportRun(program, time.perf_counter() - start, time.process_time() - cpu_start, dynamic, strict)


def size_range(program: torch.export.ExportedProgram) -> dict[str, tuple[int, int | None]]:
    """{"H": (min, max), "W": (min, max)} the program accepts; max None when export found no upper bound.

    A static dimension gives (size, size). Read from the program's range constraints, the bounds
    export derived while tracing (see :func:`casebook.checked_program.input_contract`).
    """
    _, contracts = input_contract(program)
    image = next(c for c in contracts if c is not None and c.name == "images[0]")
    return {
        label: (dim.size, dim.size) if dim.size is not None else (dim.low, dim.high)
        for label, dim in zip(("H", "W"), image.dims[1:], strict=True)
    }


def keypoint_canvas(program: torch.export.ExportedProgram) -> tuple[tuple, dict[str, tuple[int, int | None]]]:
    """The keypoint decoder's canvas in a program: its shape, (detections, 17, height, width), and
    {"H": (min, max), "W": (min, max)} of its height and width, max None when unbounded.

    The canvas is the decoder's one 4-D ``masked_fill`` (see
    :func:`casebook.patches.torchvision_heads.heatmaps_to_keypoints`); its height and width are read
    from data, so their bounds are the program's range constraints on those unbacked sizes.
    """
    shape = next(
        (
            node.meta["val"].shape
            for node in program.graph.nodes
            if node.target == torch.ops.aten.masked_fill.Scalar and node.meta["val"].dim() == 4
        ),
        None,
    )
    if shape is None:
        raise ValueError(
            "the program has no keypoint decoding canvas (a 4-D masked_fill): export Keypoint R-CNN, "
            "or a module that calls heatmaps_to_keypoints, under the patch heatmaps_to_keypoints_without_loop"
        )
    return tuple(shape), {
        label: symbol_range(program, size) for label, size in zip(("H", "W"), shape[2:], strict=True)
    }


INPUT_ADVICE = "A torchvision detector takes a list of float32 images of shape (3, H, W), values in [0, 1]."


def checked_detector(program: torch.export.ExportedProgram) -> CheckedProgram:
    """The exported detector behind a `CheckedProgram`: a bad image is refused with a readable error.

    The exported program runs a ``uint8`` image that eager torchvision refuses, and refuses an empty
    list, a second image or a size outside its range with errors that name no cause; the wrapper
    refuses each with what was wrong and what the program accepts, before anything runs.
    """
    return CheckedProgram(program, what_to_do=INPUT_ADVICE)
