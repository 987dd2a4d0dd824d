"""casebook.models.mvit: MViT for small clips."""

import pytest
import torch
import torchvision

from casebook.models.mvit import mvit_v2_s_for_clip


@pytest.mark.slow
def test_mvit_v2_s_for_clip_is_torchvisions_architecture_at_another_clip_size():
    torch.manual_seed(0)
    model = mvit_v2_s_for_clip(temporal_size=4, spatial_size=(32, 32), num_classes=5).eval()
    assert isinstance(model, torchvision.models.video.MViT)
    assert len(model.blocks) == 16  # mvit_v2_s's 16 multiscale blocks
    with torch.inference_mode():
        logits = model(torch.randn(1, 3, 4, 32, 32))
    assert logits.shape == (1, 5)
    # The patch was temporary: torchvision's builder is untouched afterwards.
    assert torchvision.models.video.mvit.MViT.__name__ == "MViT"
