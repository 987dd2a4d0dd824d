"""The case study's Faster R-CNN, rebuilt in one call for the pages that ship it.

`case_studies/faster_rcnn_dynamic_hw.md` arrives at this model and this program one failure at a
time; the shipping pages start from the result. The recipe is the case study's, step for step:
torchvision's ``fasterrcnn_mobilenet_v3_large_fpn`` with random weights (seed 0) and BatchNorm
statistics re-estimated on four photos, the resize taken out of the model, one eager run to cache the
RoI pooler's scales, and a non-strict export under every patch of
:mod:`casebook.patches.torchvision` with height and width dynamic in [65, 1024].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.export import Dim

from ..patches.torchvision import export_patches
from .images import load_image
from .records import record

MIN_SIDE, MAX_SIDE = 65, 1024
"""The exported range of height and width: below 65 the top FPN level would be one pixel high."""


def calibrated_model(seed: int = 0) -> torch.nn.Module:
    """The case study's model: Faster R-CNN (MobileNetV3-FPN) as its record builds it
    (`casebook.models.records`: random weights, BatchNorm statistics re-estimated on the calibration
    photos, eval mode)."""
    return record("fasterrcnn_mobilenet_v3_large_fpn").build(seed)


@dataclass
class DynamicFasterRCNN:
    """The model (resize switched off), its dynamic-H/W program, and the example it was exported with."""

    model: torch.nn.Module
    program: torch.export.ExportedProgram
    example: tuple


def export_dynamic_hw(model: torch.nn.Module | None = None) -> DynamicFasterRCNN:
    """Export the case study's dynamic-H/W program (takes about half a minute on two cores).

    The model's transform gets ``_skip_resize = True``: the program takes images at their own size
    (65 to 1024 pixels a side) and returns boxes in that image's coordinates. An eager reference for it
    must therefore run under ``export_patches("skip_resize_in_eval")``, as the case study explains.
    """
    model = model if model is not None else calibrated_model()
    model.transform._skip_resize = True
    example = ([load_image("astronaut", 320)],)
    # One eager run caches the RoI pooler's scales; left to export, they would pin the image size.
    with torch.inference_mode(), export_patches():
        model(*example)
    height, width = Dim("H", min=MIN_SIDE, max=MAX_SIDE), Dim("W", min=MIN_SIDE, max=MAX_SIDE)
    with export_patches():
        program = torch.export.export(model, example, dynamic_shapes=([{1: height, 2: width}],), strict=False)
    return DynamicFasterRCNN(model, program, example)
