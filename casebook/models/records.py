"""The book's models, one record each (`MODELS`), and what differs from one to another in one table.

Every record offers the same small interface: ``build(seed)`` (random weights, made to respond to
its input), ``example_inputs()`` and ``export_arguments(dynamic)``. What differs between models of
one family (an example size, a tolerance, an input the eager model refuses in its own way, how its
random weights were calibrated) is written once, in `PARAMS`, over the family's defaults, the way
torchvision's tests keep ``_model_params``. The detection zoo, the Faster R-CNN case study's model,
the shipping pages' classifier, the doctor's page and the YOLO11 case study build their models here; the RF-DETR case study's
model has its record too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export import Dim

from ..detection_parity import TOLERANCES
from .classifiers import IMAGE_SIZE, mobilenet_v3_small_calibrated, photo_batch
from .images import load_image
from .random_weights import DETECTORS, random_detector
from .rfdetr_nano import RESOLUTION as RFDETR_RESOLUTION
from .rfdetr_nano import photos as rfdetr_photos
from .rfdetr_nano import rfdetr_nano
from .ultralytics_yolo import photos, yolo11n

DETECTOR_DEFAULTS: Mapping[str, Any] = {
    "example_size": (320, 256),  # (height, width): not square, on purpose
    "tolerances": {},
    "bad_input_exceptions": {},
    "calibration": "BatchNorm statistics re-estimated on the four calibration photos at 256 x 256",
}
"""What every torchvision detector of the book has unless `PARAMS` says otherwise."""

PARAMS: Mapping[str, Mapping[str, Any]] = {
    "ssd300_vgg16": {
        "example_size": (304, 288),  # SSD300's extra layers need about 300 pixels a side
        # Its eager model fails one pixel below its range too, in a convolution.
        "bad_input_exceptions": {
            "one pixel below the range": (RuntimeError, "Kernel size can't be greater than actual input size")
        },
        "calibration": "none: SSD300's VGG has no BatchNorm",
    },
    "ssdlite320_mobilenet_v3_large": {"example_size": (320, 288)},
    # Outputs the RoI-head patches compute with other arithmetic than eager (detection_parity.TOLERANCES)
    "maskrcnn_resnet50_fpn": {"tolerances": {"masks": TOLERANCES["masks"]}},
    "maskrcnn_resnet50_fpn_v2": {"tolerances": {"masks": TOLERANCES["masks"]}},
    "keypointrcnn_resnet50_fpn": {"tolerances": {"keypoints_scores": TOLERANCES["keypoints_scores"]}},
}
"""Per model, where it differs from its family's defaults."""


@dataclass(frozen=True)
class ModelRecord:
    """One model of the book: how to build it, its example inputs and export arguments, its settings."""

    name: str
    family: str
    example_size: tuple[int, int]  # (height, width) of the example image
    calibration: str  # how its random weights were made to respond to their input
    # per output: (rtol, atol) where the exported program may differ from eager (empty: identical)
    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    # per bad input: what eager raises where it differs from the family's expectation (detector_inputs)
    bad_input_exceptions: Mapping[str, tuple] = field(default_factory=dict)
    _build: Callable[[int], torch.nn.Module] = field(repr=False, default=None)
    _example_inputs: Callable[[], tuple] = field(repr=False, default=None)
    _dynamic_shapes: Any = field(repr=False, default=None)

    def build(self, seed: int = 0) -> torch.nn.Module:
        """The model with random weights drawn after ``torch.manual_seed(seed)``, calibrated, in eval mode."""
        return self._build(seed)

    def example_inputs(self) -> tuple:
        """The positional arguments it is exported and checked with."""
        return self._example_inputs()

    def export_arguments(self, dynamic: bool = False) -> dict[str, Any]:
        """``torch.export.export`` keywords besides the model and inputs: ``dynamic_shapes`` when
        ``dynamic``, else none (a static program). A ValueError for ``dynamic`` on a model the book
        exports only statically."""
        if dynamic and self._dynamic_shapes is None:
            raise ValueError(
                f"{self.name} has no dynamic export in the book (its page says why); "
                "call export_arguments() for its static program"
            )
        return {"dynamic_shapes": self._dynamic_shapes} if dynamic else {}


def _detector(name: str) -> ModelRecord:
    settings = {**DETECTOR_DEFAULTS, **PARAMS.get(name, {})}
    height, width = settings["example_size"]
    return ModelRecord(
        name,
        "torchvision detector",
        (height, width),
        settings["calibration"],
        settings["tolerances"],
        settings["bad_input_exceptions"],
        _build=lambda seed: random_detector(name, seed),
        _example_inputs=lambda: ([load_image("astronaut", (height, width))],),
        # a list of one image: its height and width, as large as export can prove
        _dynamic_shapes=([{1: Dim.AUTO, 2: Dim.AUTO}],),
    )


MODELS: Mapping[str, ModelRecord] = {
    **{name: _detector(name) for name in DETECTORS},
    "mobilenet_v3_small": ModelRecord(
        "mobilenet_v3_small",
        "torchvision classifier",
        (IMAGE_SIZE, IMAGE_SIZE),
        "BatchNorm statistics re-estimated on the four calibration photos at 224 x 224",
        _build=mobilenet_v3_small_calibrated,
        _example_inputs=lambda: (photo_batch(),),
        _dynamic_shapes=({0: Dim("batch", min=1, max=16)},),  # as the shipping pages export it
    ),
    # Ultralytics' YOLO11 nano from its package (case_studies/ultralytics_yolo11): its dynamic export
    # also needs the head's cache switched off (`Detect.dynamic = True` on the copy that is exported)
    "yolo11n": ModelRecord(
        "yolo11n",
        "ultralytics YOLO",
        (320, 320),
        "BatchNorm statistics re-estimated on the four calibration photos at 320 x 320",
        _build=yolo11n,
        _example_inputs=lambda: (photos(320)[:2],),
        _dynamic_shapes=(
            {0: Dim("batch", max=16), 2: 32 * Dim("h32", min=2, max=40), 3: 32 * Dim("w32", min=2, max=40)},
        ),
    ),
    # RF-DETR nano from Roboflow's package (case_studies/rfdetr_nano): static, one program per size;
    # its dynamic height and width need casebook.patches.rfdetr and still pin the size (the page)
    "rfdetr_nano": ModelRecord(
        "rfdetr_nano",
        "rfdetr DETR",
        (RFDETR_RESOLUTION, RFDETR_RESOLUTION),
        "none: the random network's scores and boxes already differ from photo to photo (the page)",
        _build=rfdetr_nano,
        _example_inputs=lambda: (rfdetr_photos(RFDETR_RESOLUTION)[:1],),
        _dynamic_shapes=None,
    ),
}


def record(name: str) -> ModelRecord:
    """The record of ``name``; a clear error listing the models for an unknown name."""
    if name not in MODELS:
        raise ValueError(f"no model {name!r} in the book's records; the models are: {', '.join(MODELS)}")
    return MODELS[name]
