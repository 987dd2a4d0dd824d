"""The doctor's AOTInductor step (casebook.doctor.aoti_package): which inputs it probes, and when it skips.

The step's findings on a compiled package are tested with the catalog's reproductions
(`tests/test_doctor_catalog.py`, `aoti-unchecked-inputs` and `aoti-size-one-refused`).
"""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from casebook.checked_program import input_contract
from casebook.doctor import aoti_package, diagnose
from casebook.doctor.__main__ import main


class MaskedSum(torch.nn.Module):
    def forward(self, x, mask):
        return (x * mask).sum(-1)


def test_each_symbol_whose_range_includes_one_is_cut_to_one_in_every_input_that_carries_it():
    batch = Dim("batch", min=1, max=8)
    args = (torch.rand(3, 5), torch.ones(3, 5))
    program = torch.export.export(MaskedSum(), args, dynamic_shapes=({0: batch}, {0: batch}))
    [(label, cut)] = aoti_package._cut_to_one(input_contract(program)[1], args)
    assert label == "x.shape[0]" and [tuple(t.shape) for t in cut] == [(1, 5), (1, 5)]


def test_a_range_that_starts_at_two_is_not_cut():
    args = (torch.rand(3, 5), torch.ones(3, 5))
    batch = Dim("batch", min=2, max=8)
    program = torch.export.export(MaskedSum(), args, dynamic_shapes=({0: batch}, {0: batch}))
    assert aoti_package._cut_to_one(input_contract(program)[1], args) == []


def test_the_wrong_inputs_are_the_first_float32_input_as_float64_and_as_a_transposed_view():
    args = (torch.rand(3, 5), torch.ones(3, 5))
    program = torch.export.export(MaskedSum(), args)
    (dtype_label, as_float64), (layout_label, transposed) = aoti_package._wrong_inputs(
        input_contract(program)[1], args
    )
    assert dtype_label == "`x` as float64" and as_float64[0].dtype == torch.float64
    assert as_float64[1] is args[1]  # the other input unchanged
    assert layout_label == "`x` as a transposed view (strides (1, 3))"
    assert torch.equal(transposed[0], args[0]) and not transposed[0].is_contiguous()


def test_an_integer_input_alone_gives_no_wrong_input_and_a_vector_no_transposed_view():
    class Count(torch.nn.Module):
        def forward(self, x):
            return x.sum()

    whole = (torch.arange(6),)
    assert aoti_package._wrong_inputs(input_contract(torch.export.export(Count(), whole))[1], whole) == []
    vector = (torch.rand(6),)
    labels = [
        label
        for label, _ in aoti_package._wrong_inputs(
            input_contract(torch.export.export(Count(), vector))[1], vector
        )
    ]
    assert labels == ["`x` as float64"]


def test_keyword_inputs_skip_the_step_with_the_reason():
    class Scaled(torch.nn.Module):
        def forward(self, x, *, scale):
            return x * scale

    report = diagnose(Scaled(), (torch.rand(2, 3),), {"scale": torch.tensor(2.0)}, aoti=True)
    [step] = [step for step in report.steps if step.name == aoti_package.STEP]
    assert step.outcome == "not run" and "positional inputs only" in step.detail


@pytest.fixture
def factory(tmp_path):
    path = tmp_path / "factories.py"
    path.write_text(
        "import torch\n\ndef clean():\n    return {'model': torch.nn.ReLU(), 'args': (torch.rand(2),)}\n"
    )
    return path


def test_the_command_line_passes_aoti(factory, monkeypatch):
    seen = {}

    def fake_diagnose(*args, **kwargs):
        seen.update(kwargs)
        return diagnose(torch.nn.ReLU(), (torch.rand(2),))

    monkeypatch.setattr("casebook.doctor.diagnose", fake_diagnose)  # imported by main when it runs
    monkeypatch.chdir(factory.parent)
    assert main(["factories.py:clean", "--aoti"]) == 0
    assert seen["aoti"] is True and seen["tensorrt"] is False
