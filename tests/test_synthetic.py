"""casebook.models.synthetic: random detections for the pages that need boxes without a model."""

import torch

from casebook.models.synthetic import random_detections


def test_random_detections_are_valid_reproducible_boxes():
    boxes, scores, labels = random_detections(50, num_classes=4, score_range=(0.2, 0.3), seed=7)
    assert boxes.shape == (50, 4) and scores.shape == (50,) and labels.shape == (50,)
    assert boxes.dtype == torch.float32 and labels.dtype == torch.int64
    assert (boxes[:, 2] > boxes[:, 0]).all() and (boxes[:, 3] > boxes[:, 1]).all() and (boxes >= 0).all()
    assert ((scores >= 0.2) & (scores <= 0.3)).all()
    assert set(labels.tolist()) <= {0, 1, 2, 3}
    again = random_detections(50, num_classes=4, score_range=(0.2, 0.3), seed=7)
    assert all(torch.equal(a, b) for a, b in zip((boxes, scores, labels), again, strict=True))
