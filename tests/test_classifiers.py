"""casebook.models.classifiers: the shipping pages' classifier responds to its input; bad photo lists say so."""

import pytest
import torch

from casebook.models.classifiers import mobilenet_v3_small_calibrated, photo_batch


def test_photo_batch_is_normalised_and_sized():
    batch = photo_batch(["astronaut", "coffee"])
    assert batch.shape == (2, 3, 224, 224) and batch.dtype == torch.float32
    assert -3 < batch.min() < 0 < batch.max() < 3


def test_the_classifier_tells_photos_apart_and_is_in_eval_mode():
    model = mobilenet_v3_small_calibrated()
    assert not model.training
    with torch.no_grad():
        logits = model(photo_batch())
    assert logits.shape == (4, 1000)
    assert (logits[0] - logits[1]).abs().max() > 1e-3


@pytest.mark.parametrize("names", [[], "astronaut"])
def test_photo_batch_needs_a_list_of_names(names):
    with pytest.raises(ValueError, match="non-empty list of photo names"):
        photo_batch(names)
