"""A check shared by the tests of torchvision's detectors: two lists of detections, bit for bit."""

from casebook.detection_parity import exact_differences


def assert_identical_detections(expected, actual):
    """Same number of images, and each image's detections identical: every output of the same dtype and
    values in the same order (`exact_differences` with no tolerance, no tie reordered or cut)."""
    assert len(expected) == len(actual)
    for want, got in zip(expected, actual, strict=True):
        differences = exact_differences(want, got, tolerances={})
        assert differences["reordered ties"] == differences["tied at the cut"] == 0, differences
