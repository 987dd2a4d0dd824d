"""matched_differences: detections paired by nearest box, and the errors when they cannot be the same."""

import pytest
import torch

from casebook.detection_parity import matched_differences


def detections(boxes, labels, scores):
    return {
        "boxes": torch.tensor(boxes, dtype=torch.float32).reshape(-1, 4),
        "labels": torch.tensor(labels, dtype=torch.int64),
        "scores": torch.tensor(scores, dtype=torch.float32),
    }


def test_swapped_ranks_are_paired_and_counted():
    expected = detections([[0, 0, 10, 10], [20, 20, 30, 30]], [1, 2], [0.9, 0.9])
    actual = detections([[20, 20, 30.01, 30], [0, 0, 10, 10]], [2, 1], [0.9, 0.90001])
    result = matched_differences(expected, actual)
    assert result["detections"] == 2 and result["ranks swapped"] == 2
    assert result["max |box diff| px"] == pytest.approx(0.01, abs=1e-4)
    assert result["max |score diff|"] == pytest.approx(1e-5, abs=1e-6)


def test_one_box_with_two_labels_pairs_by_label():
    expected = detections([[0, 0, 10, 10], [0, 0, 10, 10]], [1, 2], [0.9, 0.8])
    actual = detections([[0, 0, 10, 10], [0, 0, 10, 10]], [2, 1], [0.8, 0.9])
    result = matched_differences(expected, actual)
    assert result["detections"] == 2 and result["ranks swapped"] == 2
    assert result["max |box diff| px"] == 0.0 and result["max |score diff|"] == 0.0


def test_zero_detections_on_both_sides():
    empty = detections([], [], [])
    assert matched_differences(empty, empty) == {
        "detections": 0,
        "ranks swapped": 0,
        "max |box diff| px": 0.0,
        "max |score diff|": 0.0,
    }


def test_different_counts_labels_or_pairings_are_refused():
    one = detections([[0, 0, 10, 10]], [1], [0.5])
    two = detections([[0, 0, 10, 10], [0, 0, 10, 10]], [1, 1], [0.5, 0.4])
    with pytest.raises(AssertionError, match="different number of detections: 1 expected, 2 actual"):
        matched_differences(one, two)
    with pytest.raises(AssertionError, match="another label"):
        matched_differences(one, detections([[0, 0, 10, 10]], [3], [0.5]))
    apart = detections([[0, 0, 10, 10], [100, 100, 110, 110]], [1, 1], [0.5, 0.4])
    with pytest.raises(AssertionError, match="paired with the same box"):
        matched_differences(apart, two)


def test_a_result_without_boxes_says_what_to_pass():
    with pytest.raises(KeyError, match="the actual result has no boxes"):
        matched_differences(detections([], [], []), {"labels": torch.zeros(0), "scores": torch.zeros(0)})
