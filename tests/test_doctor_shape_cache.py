"""The doctor's shape-cache check (`casebook.doctor.shape_cache`): a cause is named only when the copy
with its cached shapes forgotten frees the pinned dimensions; a `torch.Size` that does not pin them,
or whose loss breaks the model, gives no finding."""

import torch
from torch import nn
from torch.export import Dim

from casebook.doctor import diagnose
from casebook.doctor.shape_cache import STEP, cached_shapes, forget_cached_shapes, pinned_dims


class FixedReshape(nn.Module):
    """Pins its length by a reshape to a constant, and keeps an unrelated `torch.Size` (a note of the
    shape it was built for) that it never compares."""

    def __init__(self):
        super().__init__()
        self.built_for = torch.Size([2, 5])

    def forward(self, x):
        return x.reshape(2, 5) * 2


class ReshapesToItsShape(nn.Module):
    """Needs its `torch.Size`: forgetting it breaks the model, so the check concludes nothing."""

    def __init__(self):
        super().__init__()
        self.out_shape = torch.Size([10])

    def forward(self, x):
        return x.reshape(self.out_shape) + x.shape[1]


def _step(report):
    return next(step for step in report.steps if step.name == STEP)


def test_pinned_dims_reads_only_constant_fixes():
    message = (
        "Constraints violated (batch, h)!\nSuggested fixes:\n  batch = 2\n  _h = Dim('_h', min=2)\n"
        "  h = 32*_h\n  w = 320\n"
    )
    assert pinned_dims(message) == {"batch": 2, "w": 320}
    assert pinned_dims("Constraints violated (batch)!") == {}


def test_forgetting_keeps_configuration_and_the_original():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), FixedReshape())
    forgetful = forget_cached_shapes(model)
    assert [name for name, _, _ in cached_shapes(model)] == ["1.built_for"]
    assert forgetful[1].built_for is None and model[1].built_for == torch.Size([2, 5])
    assert forgetful[0].kernel_size == (3, 3)  # tuples are configuration, never forgotten


def test_a_size_that_does_not_pin_the_dims_is_not_named():
    report = diagnose(FixedReshape(), (torch.rand(2, 5),), dynamic_shapes=({1: Dim("length")},), draft=False)
    assert "shape-cache-pins-dims" not in report.kinds(), report
    assert "the same dimensions stay pinned" in _step(report).detail


def test_a_size_the_model_needs_is_not_named():
    report = diagnose(
        ReshapesToItsShape(), (torch.rand(2, 5),), dynamic_shapes=({0: Dim("batch")},), draft=False
    )
    assert "shape-cache-pins-dims" not in report.kinds(), report
    step = _step(report)
    assert step.outcome == "failed" and "export fails otherwise" in step.detail, step


def test_no_cached_size_no_step():
    report = diagnose(nn.Linear(5, 5), (torch.rand(1, 5),), dynamic_shapes=({0: Dim("batch")},), draft=False)
    assert STEP not in [step.name for step in report.steps]
