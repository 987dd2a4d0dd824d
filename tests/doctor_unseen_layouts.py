"""Unseen cases on inputs that differ from the example only in their dtype or memory layout, written
on 2026-12-01 from public reports before any doctor code handled them (issue 50: "probe dropped
input checks along more than one axis ... look at the example inputs themselves for what the program
will silently assume from them").

A no-op call on the example (`.contiguous()` on a contiguous tensor, `.float()` on a float32 one) is
traced as nothing, or as an assert on what the example was; eager still makes the conversion for
other inputs. Each model is the few lines of its report that matter, with what torch 2.14.1 did on
the CPU. They were committed expecting "unclassified", the book then having no page for either
cause, with the verdicts of the doctor of that commit (ff2c2f8: right, no cause named, no cause
named); they expect the entries added for them, `example-layout-assumed` and
`example-dtype-assumed`, since. A refusal the reader never met is a note of the report, not a
finding (a model that converts its input is not wrong), so the two cases without the failing call
stay missed.
"""

from __future__ import annotations

import torch
from torch import nn
from unseen_case import Unseen


class ElidedContiguousView(nn.Module):
    """pytorch/pytorch#186381 ([export] No-op contiguous() elided during tracing bakes trace-time
    layout into the graph): `x.contiguous().view(x.shape[0] * x.shape[1])`, exported on a contiguous
    (4, 8) example and called with `torch.randn(8, 4).t()`, as the report does.

    2.14.1: the graph is one `aten.view`; eager runs the transposed input, the program raises
    `RuntimeError: view size is not compatible with input tensor's size and stride`, in both export
    modes."""

    def forward(self, x):
        return x.contiguous().view(x.shape[0] * x.shape[1])


class FlattenHead(nn.Module):
    """pytorch/pytorch#186381 again, as a reader meets it: a classifier head flattening with
    `x.contiguous().view(x.size(0), -1)` (older CNNs' idiom), exported on a contiguous image batch;
    frames arrive channels-last (a decoder's HWC output permuted, or `to(memory_format=
    torch.channels_last)` for speed), which pytorch/executorch#21837 shows reaching a runtime. The
    reader passes no such input: the doctor has to try the layout itself.

    2.14.1: the convolution keeps the channels-last layout, the elided `contiguous` leaves a bare
    `view`, and the program raises `view size is not compatible` where eager runs; `reshape` in
    place of `.contiguous().view` exports as `aten.reshape` and runs, but `run_decompositions()` turns
    it back into that `view`."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU())
        self.fc = nn.Linear(8 * 16 * 16, 10)

    def forward(self, x):
        x = self.features(x)
        return self.fc(x.contiguous().view(x.size(0), -1))


class ScaledFrames(nn.Module):
    """pytorch/pytorch#151001 ([PT2] Model Functional Regression due to
    _insert_aten_to_metadata_assert_pass): the conversion at the top of `forward` becomes a dtype
    assert on the example's dtype. Here the model scales its own input (`x.float().div(255)`), is
    exported on a float32 example, and is fed the uint8 frames a video decoder gives; no such input
    is passed to the doctor.

    2.14.1: eager converts uint8 and runs; the program raises `RuntimeError: Tensor dtype mismatch!
    Expected: Float, Got: unsigned char`."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return self.conv(x.float().div(255))


LAYOUTS: dict[str, Unseen] = {
    "elided-contiguous-transposed-call": Unseen(
        "pytorch/pytorch#186381",
        "example-layout-assumed",
        lambda: dict(
            model=ElidedContiguousView(),
            args=(torch.randn(4, 8),),
            check_inputs=[(torch.randn(8, 4).t(),)],  # the report's call
        ),
    ),
    "channels-last-frames-flatten-head": Unseen(
        "pytorch/pytorch#186381",
        "example-layout-assumed",
        lambda: dict(model=FlattenHead().eval(), args=(torch.rand(2, 3, 32, 32),)),
        missed="no cause named: exports and runs clean, with a note that the program refuses "
        "channels-last frames eager runs; a refusal of an input the reader did not pass is no finding",
    ),
    "uint8-frames-scaled-in-forward": Unseen(
        "pytorch/pytorch#151001",
        "example-dtype-assumed",
        lambda: dict(model=ScaledFrames().eval(), args=(torch.rand(2, 3, 16, 16) * 255,)),
        missed="no cause named: exports and runs clean, with a note that the program refuses uint8 "
        "and float16, which eager converts; a refusal of an input the reader did not pass is no finding",
    ),
}
