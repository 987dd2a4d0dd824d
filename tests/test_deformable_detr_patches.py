"""The position embedding rewritten for TensorRT's slice converter gives the original's values."""

import pytest
import torch

from casebook.models import deformable_detr
from casebook.models.deformable_detr_patches import PATCHES, sine_position_embedding, tensorrt_patches


@pytest.mark.parametrize("shape", [(1, 8, 5, 7), (2, 8, 7, 5), (1, 16, 1, 9), (1, 4, 6, 1), (3, 8, 4, 4)])
def test_the_rewrite_gives_the_original_embedding(shape):
    feature = torch.rand(shape)
    expected = deformable_detr.sine_position_embedding(feature, shape[1] // 2)
    assert torch.equal(sine_position_embedding(feature, shape[1] // 2), expected)


def test_the_patch_is_installed_inside_the_block_only():
    original = deformable_detr.sine_position_embedding
    with tensorrt_patches("last_row_by_index"):
        assert deformable_detr.sine_position_embedding is sine_position_embedding
    assert deformable_detr.sine_position_embedding is original


def _negative_start_slices(embedding) -> int:
    dynamic = {2: torch.export.Dim("h", min=2, max=64), 3: torch.export.Dim("w", min=2, max=64)}
    program = torch.export.export(_Embed(embedding), (torch.rand(1, 8, 6, 10),), dynamic_shapes=(dynamic,))
    return sum(
        node.target == torch.ops.aten.slice.Tensor and isinstance(node.args[2], int) and node.args[2] < 0
        for node in program.graph.nodes
        if len(node.args) > 2
    )


def test_the_rewrite_has_no_slice_from_a_negative_start():
    assert _negative_start_slices(deformable_detr.sine_position_embedding) == 2  # rows and columns
    assert _negative_start_slices(sine_position_embedding) == 0
    assert PATCHES["last_row_by_index"].explain().count("export-safe") == 2


class _Embed(torch.nn.Module):
    def __init__(self, embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, feature):
        return self.embedding(feature, feature.shape[1] // 2)
