"""casebook.models.records: one record per model, the per-model table over the family's defaults."""

import pytest
import torch

from casebook.models.random_weights import DETECTORS
from casebook.models.records import DETECTOR_DEFAULTS, MODELS, PARAMS, record


def test_every_detector_has_a_record_and_the_table_names_only_real_ones():
    assert set(DETECTORS) <= set(MODELS) and "mobilenet_v3_small" in MODELS
    assert set(PARAMS) <= set(DETECTORS), "a setting for a builder torchvision does not have"
    for name, settings in PARAMS.items():
        assert set(settings) <= set(DETECTOR_DEFAULTS), name


def test_a_record_reads_the_table_over_the_defaults():
    assert record("ssd300_vgg16").example_size == (304, 288)
    assert record("fasterrcnn_resnet50_fpn").example_size == DETECTOR_DEFAULTS["example_size"]
    assert record("ssd300_vgg16").calibration.startswith("none")
    assert set(record("maskrcnn_resnet50_fpn").tolerances) == {"masks"}
    assert record("retinanet_resnet50_fpn").tolerances == {}
    assert "one pixel below the range" in record("ssd300_vgg16").bad_input_exceptions


@pytest.mark.slow
def test_the_interface_builds_gives_inputs_and_export_arguments():
    detector = record("fasterrcnn_mobilenet_v3_large_320_fpn")
    (images,) = detector.example_inputs()
    assert len(images) == 1 and images[0].shape == (3, *detector.example_size)
    assert detector.export_arguments() == {}
    assert set(detector.export_arguments(dynamic=True)) == {"dynamic_shapes"}
    model = detector.build()
    assert not model.training
    with torch.no_grad():
        model(*detector.example_inputs())
    classifier = MODELS["mobilenet_v3_small"]
    (photos,) = classifier.example_inputs()
    assert photos.shape == (4, 3, 224, 224)
    program = torch.export.export(classifier.build(), (photos,), **classifier.export_arguments(dynamic=True))
    assert program.module()(photos[:1]).shape == (1, 1000)  # batch 1 inside the exported range


def test_an_unknown_model_lists_the_models():
    with pytest.raises(ValueError, match="no model 'yolo' in the book's records; the models are: fasterrcnn"):
        record("yolo")
