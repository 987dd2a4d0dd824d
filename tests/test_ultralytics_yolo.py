"""casebook.models.ultralytics_yolo: Ultralytics kept offline, the head's cache, and clear errors.

The case study (case_studies/ultralytics_yolo11.md) proves the exports; these tests check the helpers.
"""

import os
import subprocess
import sys

import pytest
import torch

from casebook.models.records import record
from casebook.models.ultralytics_yolo import (
    ANCHOR_CACHE,
    detect_head,
    forget_anchor_cache,
    offline_environment,
    photos,
    ultralytics_onnx,
    yolo11n,
)


def test_the_offline_environment_turns_off_the_network_and_installs_and_names_a_config_folder(tmp_path):
    env = offline_environment(tmp_path / "settings")
    assert env["YOLO_OFFLINE"] == "1" and env["YOLO_AUTOINSTALL"] == "0" and env["YOLO_VERBOSE"] == "0"
    assert env["YOLO_CONFIG_DIR"] == str((tmp_path / "settings").resolve())


@pytest.mark.slow
def test_importing_after_ultralytics_was_imported_without_the_settings_says_to_restart():
    code = (
        "import ultralytics\n"
        "from casebook.models.ultralytics_yolo import import_ultralytics\n"
        "import_ultralytics()\n"
    )
    env = {name: value for name, value in os.environ.items() if not name.startswith("YOLO_")}
    env["YOLO_CONFIG_DIR"] = str(
        offline_environment()["YOLO_CONFIG_DIR"]
    )  # no settings file in the home folder
    env["YOLO_OFFLINE"] = "1"  # no DNS lookups from this test either
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert (
        "RuntimeError: ultralytics was imported before YOLO_AUTOINSTALL, YOLO_VERBOSE were set" in done.stderr
    )
    assert "restart the kernel" in done.stderr


@pytest.mark.slow
def test_yolo11n_is_built_as_yolo_builds_it_and_responds_to_its_input():
    model = yolo11n(seed=0)
    head = detect_head(model)
    assert not model.training and head.shape is None and head.anchors.numel() == 0  # no cache yet
    images = photos(320)
    with torch.no_grad():
        boxes_and_scores, _ = model(images)
    assert boxes_and_scores.shape == (4, 84, 2100)
    assert (boxes_and_scores[1:, 4:] - boxes_and_scores[:1, 4:]).abs().amax() > 0.005
    assert head.shape is not None  # the forward filled the cache ...
    forget_anchor_cache(model)
    assert head.shape is None and head.anchors.numel() == 0 and not set(ANCHOR_CACHE) & set(vars(head))
    forget_anchor_cache(model)  # ... and forgetting twice is harmless
    assert torch.equal(yolo11n(seed=0).model[0].conv.weight, model.model[0].conv.weight)  # seeded


def test_detect_head_refuses_a_model_that_is_not_a_yolo_detection_model():
    class NotYolo(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3))

    with pytest.raises(ValueError, match="NotYolo's last layer is Conv2d, not a YOLO Detect head"):
        detect_head(NotYolo())


@pytest.mark.parametrize("size", [0, 100, 320.0, "320"])
def test_ultralytics_onnx_refuses_a_size_that_is_not_a_multiple_of_the_stride(size):
    with pytest.raises(ValueError, match="image_size must be a multiple of 32"):
        ultralytics_onnx(torch.nn.Identity(), size)


def test_the_record_gives_two_photos_and_multiples_of_32():
    yolo = record("yolo11n")
    assert yolo.family == "ultralytics YOLO" and yolo.example_size == (320, 320)
    (images,) = yolo.example_inputs()
    assert images.shape == (2, 3, 320, 320)
    ((spec,),) = yolo.export_arguments(dynamic=True).values()
    assert spec[0].max == 16 and str(spec[2]) == "32*h32" and spec[2].min == 64
