"""The custom operators of the custom-operators page compute what torchvision computes."""

import pytest
import torch
import torchvision

from casebook.models import detection_ops


def _boxes(count: int, seed: int, spread: float = 100.0):
    generator = torch.Generator().manual_seed(seed)
    corner = torch.rand(count, 2, generator=generator) * spread
    size = torch.rand(count, 2, generator=generator) * 49 + 1
    return torch.cat([corner, corner + size], 1), torch.rand(count, generator=generator)


@pytest.fixture(scope="module", autouse=True)
def _fakes():
    detection_ops.register_fake_kernels()


@pytest.mark.parametrize(("count", "spread"), [(0, 100.0), (1, 100.0), (40, 100.0), (200, 5.0)])
def test_numpy_nms_keeps_what_torchvision_keeps(count, spread):
    boxes, scores = _boxes(count, seed=count, spread=spread)
    for threshold in (0.3, 0.5, 0.7):
        kept = detection_ops.nms_numpy(boxes, scores, threshold)
        assert kept.dtype == torch.int64
        assert torch.equal(kept, torchvision.ops.nms(boxes, scores, threshold))


def test_cpp_box_iou_equals_torchvision_and_rejects_bad_shapes():
    a, _ = _boxes(7, seed=1)
    b, _ = _boxes(3, seed=2)
    torch.testing.assert_close(torch.ops.casebook_ext.box_iou(a, b), torchvision.ops.box_iou(a, b))
    assert torch.ops.casebook_ext.box_iou(a[:0], b).shape == (0, 3)
    with pytest.raises(RuntimeError, match=r"box_iou expects boxes of shape \(N, 4\) and \(M, 4\)"):
        torch.ops.casebook_ext.box_iou(a[:, :3], b)


@pytest.mark.parametrize("count", [0, 5])
def test_fake_kernels_agree_with_the_kernels(count):
    boxes, scores = _boxes(count, seed=3)
    tracks, _ = _boxes(2, seed=4)
    for op, args in [
        (torch.ops.casebook.nms_numpy.default, (boxes, scores, 0.5)),
        (torch.ops.casebook_ext.box_iou.default, (boxes, tracks)),
    ]:
        results = torch.library.opcheck(op, args)
        assert set(results.values()) == {"SUCCESS"}, (op, results)
