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


def test_the_seed_alone_decides_the_weights_and_the_callers_random_state_is_kept():
    state = torch.random.get_rng_state()
    first, again, other = (mobilenet_v3_small_calibrated(seed) for seed in (0, 0, 1))
    assert torch.equal(torch.random.get_rng_state(), state)
    weight = "features.0.0.weight"
    assert torch.equal(first.state_dict()[weight], again.state_dict()[weight])
    assert not torch.equal(first.state_dict()[weight], other.state_dict()[weight])


@pytest.mark.parametrize("names", [[], "astronaut"])
def test_photo_batch_needs_a_list_of_names(names):
    with pytest.raises(ValueError, match="non-empty list of photo names"):
        photo_batch(names)
