"""Ultralytics YOLO11 from its own package (``ultralytics==8.4.190``), offline, with random weights.

Ultralytics reads its settings from the environment when it is first imported: `import_ultralytics`
sets them first, so that nothing is looked up on the network (``YOLO_OFFLINE``: no ``is_online()`` DNS
lookups), nothing is installed behind the reader's back (``YOLO_AUTOINSTALL``), its settings file is
written under the build folder instead of the home folder (``YOLO_CONFIG_DIR``) and its banners stay
off the page (``YOLO_VERBOSE``). ``YOLO("yolo11n.yaml")`` builds the network from the yaml the package
ships: no weights are downloaded.

The detection head keeps a cache, written by ``forward``: the feature-map shape it last decoded boxes
for (``Detect.shape``) and the anchors and strides for it (``Detect.anchors``, ``Detect.strides``). The
case study is about what that cache does to export; `forget_anchor_cache` puts a head back to the
state ``YOLO(...)`` builds it in.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

from .. import REPO_ROOT
from .images import CALIBRATION_PHOTOS, load_image
from .random_weights import reestimate_batchnorm

CONFIG = "yolo11n.yaml"
"""The model: YOLO11 nano, detection, 80 classes, built from the yaml inside the package."""

CONFIG_DIR = REPO_ROOT / "_build" / "ultralytics"
"""Where Ultralytics writes its settings file: the book's build folder, not the reader's home."""

ANCHOR_CACHE = ("shape", "anchors", "strides")
"""The attributes ``Detect._get_decode_boxes`` writes on the head when the input's shape changes."""


def offline_environment(config_dir: str | os.PathLike[str] = CONFIG_DIR) -> dict[str, str]:
    """The environment variables that keep Ultralytics offline, quiet and out of the home folder."""
    return {
        "YOLO_OFFLINE": "1",
        "YOLO_AUTOINSTALL": "0",
        "YOLO_CONFIG_DIR": str(Path(config_dir).resolve()),
        "YOLO_VERBOSE": "0",
    }


def import_ultralytics(config_dir: str | os.PathLike[str] = CONFIG_DIR) -> ModuleType:
    """``import ultralytics`` with `offline_environment` set first (a variable the reader set wins).

    Raises RuntimeError when ultralytics was imported before without these settings: they are read
    once, at import, so setting them later changes nothing.
    """
    wanted = offline_environment(config_dir)
    if "ultralytics" in sys.modules:
        differing = sorted(name for name, value in wanted.items() if os.environ.get(name) is None)
        if differing:
            raise RuntimeError(
                f"ultralytics was imported before {', '.join(differing)} were set, and it reads them only "
                "at import: call import_ultralytics() before anything imports ultralytics (restart the kernel)"
            )
    Path(wanted["YOLO_CONFIG_DIR"]).mkdir(parents=True, exist_ok=True)
    for name, value in wanted.items():
        os.environ.setdefault(name, value)
    import ultralytics

    return ultralytics


def detect_head(model: nn.Module) -> nn.Module:
    """The ``Detect`` head of a YOLO ``DetectionModel`` (its last layer)."""
    head = model.model[-1]
    if not hasattr(head, "_get_decode_boxes"):
        raise ValueError(
            f"{type(model).__name__}'s last layer is {type(head).__name__}, not a YOLO Detect head"
        )
    return head


def forget_anchor_cache(model: nn.Module) -> None:
    """Remove the head's cached shape, anchors and strides, so that the class defaults show through
    (``shape = None``, empty anchors): the head as ``YOLO(...)`` builds it, before any forward."""
    head = detect_head(model)
    for name in ANCHOR_CACHE:
        head.__dict__.pop(name, None)


def yolo11n(seed: int = 0) -> nn.Module:
    """YOLO11n's ``DetectionModel`` (``YOLO("yolo11n.yaml").model``) with random weights drawn after
    ``torch.manual_seed(seed)``, in eval mode.

    Its BatchNorm statistics are re-estimated on the book's four photos at 320 x 320: with the initial
    statistics every image gets the same scores to 1e-4, and parity would prove nothing. The head's
    anchor cache, which that forward filled, is then forgotten: the model is as a reader builds it.
    """
    ultralytics = import_ultralytics()
    torch.manual_seed(seed)
    model = ultralytics.YOLO(CONFIG).model.eval()
    reestimate_batchnorm(model, photos(320))
    forget_anchor_cache(model)
    return model


def photos(size: int | tuple[int, int], names: tuple[str, ...] = CALIBRATION_PHOTOS) -> torch.Tensor:
    """A batch of the book's photos at ``size`` (an int: square; else (height, width)), RGB in [0, 1]:
    the input a YOLO ``DetectionModel`` takes (Ultralytics' predictor letterboxes and divides by 255
    before it)."""
    return torch.stack([load_image(name, size) for name in names])


def ultralytics_onnx(model: nn.Module, image_size: int, folder: str | os.PathLike[str] | None = None) -> Path:
    """Ultralytics' own ONNX export of ``model`` (``YOLO(...).export(format="onnx")``), static, batch 1,
    ``image_size`` square, on the CPU, without ``onnxslim`` (which is not installed, and would be
    installed at run time otherwise). Returns the file's path.

    The exporter copies the model, folds BatchNorm into the convolutions and writes
    ``<yaml name>.onnx`` in the working folder; it runs here in ``folder`` (default: a new folder under
    the build folder), so nothing lands beside the page.
    """
    if not isinstance(image_size, int) or image_size < 32 or image_size % 32:
        raise ValueError(
            f"image_size must be a multiple of 32 of at least 32 (YOLO's stride), got {image_size!r}"
        )
    ultralytics = import_ultralytics()
    yolo = ultralytics.YOLO(CONFIG)
    yolo.model = model
    if folder is None:
        (REPO_ROOT / "_build").mkdir(exist_ok=True)
        folder = tempfile.mkdtemp(prefix="ultralytics_onnx_", dir=REPO_ROOT / "_build")
    with contextlib.chdir(folder):
        written = yolo.export(format="onnx", imgsz=image_size, simplify=False, dynamic=False, device="cpu")
    return Path(folder) / written  # an absolute `written` stays as it is
