"""casebook.models.faster_rcnn: the photos it loads and the errors for photos it cannot use."""

import pytest
import torch

from casebook.models.faster_rcnn import load_image


def test_load_image_size_range_and_layout():
    square, tall = load_image("astronaut", 64), load_image("coffee", (96, 40))
    assert square.shape == (3, 64, 64) and tall.shape == (3, 96, 40)
    assert square.dtype == torch.float32 and square.is_contiguous()
    assert 0 <= square.min() and square.max() <= 1


def test_load_image_refuses_unknown_and_gray_images():
    with pytest.raises(ValueError, match="skimage.data has no image 'nope'; try one of"):
        load_image("nope", 64)
    with pytest.raises(ValueError, match="skimage.data.camera is not an RGB photo"):
        load_image("camera", 64)
