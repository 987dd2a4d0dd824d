"""A check shared by the tests of torchvision's detectors: two lists of detections, bit for bit."""

import torch


def assert_identical_detections(expected, actual):
    """Same number of images, the same keys per image, and each output of the same dtype and values."""
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual, strict=True):
        assert want.keys() == got.keys()
        for key in want:
            assert want[key].dtype == got[key].dtype, key
            assert torch.equal(want[key], got[key]), key
