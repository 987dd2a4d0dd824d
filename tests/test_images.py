"""casebook.models.images: the two photo loaders (0-1 and 0-255) and their errors for photos they cannot use."""

import pytest
import torch

from casebook.models.images import load_image, sample_photo


def test_load_image_size_range_and_layout():
    square, tall = load_image("astronaut", 64), load_image("coffee", (96, 40))
    assert square.shape == (3, 64, 64) and tall.shape == (3, 96, 40)
    assert square.dtype == torch.float32 and square.is_contiguous()
    assert 0 <= square.min() and square.max() <= 1
    assert square.max() > 0.5  # [0, 1], not 0-255 divided twice


def test_photo_is_resized_float_0_255_in_the_requested_channel_order():
    rgb = sample_photo("coffee", (48, 64))
    bgr = sample_photo("coffee", (48, 64), channel_order="BGR")
    assert rgb.shape == (3, 48, 64) and rgb.dtype == torch.float32
    assert 0 <= rgb.min() and rgb.max() <= 255 and rgb.max() > 1
    assert torch.equal(rgb.flip(0), bgr)


def test_the_two_loaders_give_the_same_photo_in_their_two_scales():
    """Only the resize differs (scikit-image's and PyTorch's antialiasing): under 2% of the range on average."""
    difference = (load_image("coffee", (48, 64)) - sample_photo("coffee", (48, 64)) / 255).abs()
    assert difference.mean() < 0.02, difference.mean()


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("no_such_image", {}, "skimage.data has no image 'no_such_image'; try one of"),
        ("camera", {}, "skimage.data.camera is not an RGB photo"),
        ("coffee", {"channel_order": "RGBA"}, "channel_order must be 'RGB' or 'BGR'"),
    ],
)
def test_bad_requests_say_what_to_change(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        sample_photo(name, (8, 8), **kwargs)
    if "channel_order" not in kwargs:
        with pytest.raises(ValueError, match=message):
            load_image(name, 8)
