"""Unseen cases on aten operators whose output size depends on the data (2026-12-02), each reduced to
the lines that matter and cited to a public report, written with the doctor's verdicts before any
code that handles them. Two of the operators the reports name have a kernel export can trace on
2.14.1 (`bincount`, `unique_consecutive`): those cases expect a clean report, so a doctor that
blames every data-dependent operator shows. `ctc_loss` has none; the catalog has no entry for an
aten operator without one (`operator-without-fake` is about the reader's own operators), so "not in
the book's catalog" was the right answer until it had (`aten-op-without-kernel`, the next commit).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from unseen_case import Unseen


class WeightedBincount(nn.Module):
    """pytorch/pytorch#147094 ([torch.export] Unsupported: dynamic shape operator:
    aten.bincount.default): the report's model, `x.bincount(weights)` with weights from `linspace`.

    2.14.1: exports (a meta kernel with an unbacked output size was added for the report,
    pytorch/pytorch#147129) and equals eager. Kept with expected=None."""

    def forward(self, x):
        weights = torch.linspace(0, 1, steps=5)
        return x.bincount(weights)


class GreedyCtcDecoder(nn.Module):
    """microsoft/onnxscript#1547 (a greedy CTC decoder, `argmax` then `torch.unique_consecutive`,
    failed to export with DynamicOutputShapeException): the decoder up to the label indices, blanks
    removed (the report joins them into a Python string, which no program returns).

    2.14.1: exports, with unbacked sizes for the runs and the kept labels; equals eager. Kept with
    expected=None."""

    def __init__(self, blank: int = 0):
        super().__init__()
        self.blank = blank

    def forward(self, emission):
        indices = torch.unique_consecutive(torch.argmax(emission, dim=-1))
        return indices[indices != self.blank]


class CtcHeadWithLoss(nn.Module):
    """A CTC head that returns its loss when given labels, as Transformers' `Wav2Vec2ForCTC.forward`
    does (`nn.functional.ctc_loss` on the log-probabilities): exported with labels, to evaluate the
    loss in the program. `aten._ctc_loss` is marked as an operator whose output size depends on the
    data (pytorch/pytorch#86293), and it has no kernel that traces it.

    2.14.1: non-strict export raises `DynamicOutputShapeException: aten._ctc_loss.Tensor`, strict
    `Unsupported: Dynamic shape operator (no meta kernel)`. An aten operator: unclassified while the
    catalog had no entry for those, `aten-op-without-kernel` since."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(8, 5)

    def forward(self, hidden, labels, input_lengths, label_lengths):
        log_probs = self.head(hidden).log_softmax(-1).transpose(0, 1)  # (time, batch, classes)
        return F.ctc_loss(log_probs, labels, input_lengths, label_lengths, blank=0, zero_infinity=True)


ATEN: dict[str, Unseen] = {
    "bincount-weights": Unseen(
        "pytorch/pytorch#147094",
        None,
        lambda: dict(model=WeightedBincount(), args=(torch.tensor([0, 4, 2, 4, 5]),)),
    ),
    "greedy-ctc-decoder": Unseen(
        "microsoft/onnxscript#1547",
        None,
        lambda: dict(model=GreedyCtcDecoder(), args=(torch.randn(12, 5),)),
    ),
    "ctc-loss-with-labels": Unseen(
        "pytorch/pytorch#86293",
        # was "unclassified" until the entry (committed before it)
        "aten-op-without-kernel",
        lambda: dict(
            model=CtcHeadWithLoss().eval(),
            args=(
                torch.randn(2, 10, 8),
                torch.tensor([[1, 2, 3], [2, 2, 4]]),
                torch.tensor([10, 9]),
                torch.tensor([3, 2]),
            ),
        ),
    ),
}
