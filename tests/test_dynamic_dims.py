"""Dynamic dims: MViT for small clips (casebook.models.mvit), suggested fixes and traced shapes (casebook.introspect)."""

import torch
import torchvision
from torch import nn
from torch.export import Dim

from casebook.introspect import suggested_fixes, user_input_shapes
from casebook.models.mvit import mvit_v2_s_for_clip

VIOLATION = """Constraints violated (h, w)! For more information, run with TORCH_LOGS="+dynamic".
  - Not all values of h = L['x'].size()[2] in the specified range 32 <= h <= 512 satisfy the generated guard ...
Suggested fixes:
  _h = Dim('_h', min=8, max=128)
  _w = Dim('_w', min=8, max=128)
  h = 4*_h
  w = 4*_w

The error above occurred when calling torch.export.export. If you would like to view some more information ..."""


def test_suggested_fixes_reads_the_block_and_stops_at_the_trailer():
    assert suggested_fixes(VIOLATION) == [
        "_h = Dim('_h', min=8, max=128)",
        "_w = Dim('_w', min=8, max=128)",
        "h = 4*_h",
        "w = 4*_w",
    ]


def test_suggested_fixes_without_a_block():
    assert suggested_fixes("Guard failed: x.size()[0] == 2") == []
    assert suggested_fixes("Suggested fixes:\n  batch = 1") == ["batch = 1"]


class _Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x):
        return self.linear(x)


def test_user_input_shapes_shows_numbers_and_symbols():
    static = torch.export.export(_Head(), (torch.randn(3, 4),))
    assert user_input_shapes(static) == {"x": "[3, 4]"}

    dynamic = torch.export.export(
        _Head(), (torch.randn(3, 4),), dynamic_shapes={"x": {0: Dim("batch", max=8)}}
    )
    shapes = user_input_shapes(dynamic)
    assert list(shapes) == ["x"]  # parameters are not user inputs
    symbol = shapes["x"].strip("[]").split(", ")[0]
    assert symbol.startswith("s") and shapes["x"] == f"[{symbol}, 4]"


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
