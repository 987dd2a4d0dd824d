"""casebook.models.images: sample photos as detector inputs."""

import pytest
import torch

from casebook.models.images import sample_photo


def test_photo_is_resized_float_0_255_in_the_requested_channel_order():
    rgb = sample_photo("coffee", (48, 64))
    bgr = sample_photo("coffee", (48, 64), channel_order="BGR")
    assert rgb.shape == (3, 48, 64) and rgb.dtype == torch.float32
    assert 0 <= rgb.min() and rgb.max() <= 255
    assert torch.equal(rgb.flip(0), bgr)


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("no_such_image", {}, "skimage.data has no image 'no_such_image'"),
        ("camera", {}, "is not an RGB photo"),
        ("coffee", {"channel_order": "RGBA"}, "channel_order must be 'RGB' or 'BGR'"),
    ],
)
def test_bad_requests_say_what_to_change(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        sample_photo(name, (8, 8), **kwargs)
