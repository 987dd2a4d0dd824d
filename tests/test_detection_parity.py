"""casebook.detection_parity: exact_differences (same kernels as eager, ties allowed) and matched_differences
(detections paired by nearest box), and the errors when they cannot be the same."""

import pytest
import torch

from casebook.detection_parity import exact_differences, matched_differences


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


def _detections(count, boxes_seed=0):
    generator = torch.Generator().manual_seed(boxes_seed)
    return {
        "boxes": torch.rand(count, 4, generator=generator) * 100,
        "labels": torch.randint(1, 91, (count,), generator=generator),
        "scores": torch.linspace(0.9, 0.1, count),
    }


def test_exact_differences_of_identical_results_reports_zero():
    result = _detections(5)
    assert exact_differences(result, dict(result)) == {
        "boxes": 0.0,
        "labels": 0.0,
        "scores": 0.0,
        "reordered ties": 0,
        "tied at the cut": 0,
    }


def test_exact_differences_accepts_different_detections_only_at_a_tie_on_the_last_score():
    expected = _detections(5)
    expected["scores"][-2:] = 0.1  # two detections tie at the last kept score
    actual = {key: value.clone() for key, value in expected.items()}
    actual["boxes"][-1] += 7  # the program kept another member of the tied group
    assert exact_differences(expected, actual)["tied at the cut"] == 1

    above = {key: value.clone() for key, value in expected.items()}
    above["boxes"][1] += 7
    with pytest.raises(
        AssertionError,
        match=r"differ from eager above the last kept score: detection 1 of 5 \(score 0.7\) is not",
    ):
        exact_differences(expected, above)


def test_exact_differences_pairs_equal_scores_that_come_in_another_order():
    expected = dict(_detections(6), masks=torch.rand(6, 1, 4, 4))
    expected["scores"][2:4] = 0.5  # two detections above the cut share a score
    order = torch.tensor([0, 1, 3, 2, 4, 5])
    actual = {key: value[order] for key, value in expected.items()}
    differences = exact_differences(expected, actual)
    assert (differences["reordered ties"], differences["tied at the cut"]) == (2, 0)
    assert differences["masks"] == 0.0  # compared with the paired detection, not the one at the same row

    actual["masks"] = actual["masks"].clone()
    actual["masks"][3] += 0.1  # the paired detection's mask differs
    with pytest.raises(AssertionError, match="masks"):
        exact_differences(expected, actual)


def test_exact_differences_rejects_other_scores_shapes_and_dtypes():
    expected = _detections(4)
    other_scores = dict(expected, scores=expected["scores"] + 1e-7)
    with pytest.raises(AssertionError, match="the scores differ from eager"):
        exact_differences(expected, other_scores)
    with pytest.raises(AssertionError, match=r"boxes: shape \(3, 4\), eager \(4, 4\)"):
        exact_differences(expected, dict(expected, boxes=expected["boxes"][:3]))
    with pytest.raises(AssertionError, match="labels: dtype torch.int32"):
        exact_differences(expected, dict(expected, labels=expected["labels"].int()))


def test_exact_differences_holds_masks_to_their_tolerance():
    expected = dict(_detections(2), masks=torch.rand(2, 1, 8, 8))
    close = dict(expected, masks=expected["masks"] + 5e-6)
    assert exact_differences(expected, close)["masks"] == pytest.approx(
        5e-6, rel=0.05
    )  # float32 rounding of x + 5e-6
    with pytest.raises(AssertionError, match="masks"):
        exact_differences(expected, dict(expected, masks=expected["masks"] + 2e-5))


def test_exact_differences_without_tolerances_holds_every_output_to_identity():
    expected = dict(_detections(2), masks=torch.rand(2, 1, 8, 8))
    close = dict(expected, masks=expected["masks"] + 5e-6)
    with pytest.raises(AssertionError, match="masks: differs from eager by up to"):
        exact_differences(expected, close, tolerances={})
    assert exact_differences(expected, dict(expected), tolerances={})["masks"] == 0.0
