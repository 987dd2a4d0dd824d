"""casebook.models.rfdetr_nano and casebook.patches.rfdetr: RF-DETR nano offline, its two export patches."""

import pytest
import torch
from torch.export import Dim

from casebook.models.records import record
from casebook.patches.rfdetr import PATCHES, export_patches

pytest.importorskip("rfdetr", reason="rfdetr is in requirements.txt: run `make install`")
from rfdetr.models.position_encoding import PositionEmbeddingSine  # noqa: E402
from rfdetr.utilities.tensors import NestedTensor  # noqa: E402


class PositionEncoding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoding = PositionEmbeddingSine(128, normalize=True).eval()

    def forward(self, features):
        no_padding = torch.zeros(features.shape[0], *features.shape[2:], dtype=torch.bool)
        return self.encoding(NestedTensor(features, no_padding, no_padding=True))


GRID = ({2: Dim("rows", min=2, max=64), 3: Dim("cols", min=2, max=64)},)


def test_the_size_keyed_cache_fails_export_and_the_patch_fixes_it_with_parity():
    module = PositionEncoding()
    with pytest.raises(TypeError, match="unhashable type: non-nested SymInt"):
        torch.export.export(module, (torch.rand(1, 8, 6, 7),), dynamic_shapes=GRID)
    with export_patches("position_cache_skipped"):
        program = torch.export.export(module, (torch.rand(1, 8, 6, 7),), dynamic_shapes=GRID)
    for rows, cols in [(6, 7), (2, 2), (64, 3), (9, 9)]:
        features = torch.rand(1, 8, rows, cols)
        torch.testing.assert_close(program.module()(features), module(features), rtol=0, atol=0)


def test_the_patches_are_undone_on_exit_and_eager_keeps_its_cache():
    original = PositionEmbeddingSine.forward
    module = PositionEncoding()
    with export_patches() as applied:
        assert applied == tuple(PATCHES)
        module(torch.rand(1, 8, 5, 5))  # eager inside the patch: the package's own forward, cached
    assert PositionEmbeddingSine.forward is original
    assert list(module.encoding._pos_cache)[0][0] == (1, 5, 5)


def test_an_unknown_patch_is_named():
    with pytest.raises(KeyError, match="unknown patch"):
        with export_patches("no_such_patch"):
            pass


def test_the_record_refuses_a_dynamic_export_it_does_not_have():
    nano = record("rfdetr_nano")
    assert nano.export_arguments() == {}
    with pytest.raises(ValueError, match="rfdetr_nano has no dynamic export in the book"):
        nano.export_arguments(dynamic=True)
