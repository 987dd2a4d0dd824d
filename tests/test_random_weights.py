"""casebook.models.random_weights: BatchNorm statistics re-estimated for random-weight models."""

import pytest
import torch
from torch import nn

from casebook.models.random_weights import DETECTORS, has_batchnorm, random_detector, reestimate_batchnorm


def test_statistics_become_those_of_the_batch_and_layers_end_in_eval():
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4)).train()
    batch = torch.randn(8, 3, 5, 5) * 3 + 1
    assert reestimate_batchnorm(model, batch) == 1
    features = model[0](batch)
    assert torch.allclose(model[1].running_mean, features.mean(dim=(0, 2, 3)), atol=1e-5)
    assert not model[1].training


def test_forward_selects_the_part_that_runs():
    model = nn.Sequential(nn.BatchNorm1d(2), nn.Linear(2, 1))
    reestimate_batchnorm(model, torch.tensor([[1.0, 2.0], [3.0, 4.0]]), forward=model[0])
    assert model[0].running_mean.tolist() == [2.0, 3.0]


def test_a_model_without_batchnorm_is_refused():
    with pytest.raises(ValueError, match="has no BatchNorm layer"):
        reestimate_batchnorm(nn.Linear(2, 2), torch.ones(1, 2))


@pytest.mark.slow
def test_random_detector_is_seeded_calibrated_and_checks_its_name():
    name = "fasterrcnn_mobilenet_v3_large_320_fpn"
    first, again = random_detector(name), random_detector(name)
    assert not first.training
    for (key, value), other in zip(first.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(value, other), key
    # calibrated: the running statistics are the photos', not the initial mean 0 and variance 1
    norm = next(m for m in first.backbone.modules() if isinstance(m, nn.BatchNorm2d))
    assert not torch.equal(norm.running_var, torch.ones_like(norm.running_var))
    assert not torch.equal(
        random_detector(name, seed=1).state_dict()["rpn.head.conv.0.0.weight"],
        first.state_dict()["rpn.head.conv.0.0.weight"],
    )
    assert "ssd300_vgg16" in DETECTORS and not has_batchnorm(random_detector("ssd300_vgg16"))
    with pytest.raises(ValueError, match="not a detection builder of torchvision.*choose one of: fasterrcnn"):
        random_detector("resnet50")
