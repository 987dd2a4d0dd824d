"""`casebook.doctor.fake_constants`: a write through `.data` that strict export drops is named only
with its evidence (a fake constant the graph writes), and the step that would crash is skipped."""

import torch
from doctor_cases import CountsCallsThroughData
from torch import nn

from casebook.doctor import diagnose
from casebook.doctor.fake_constants import (
    fake_constants,
    state_eager_changes_alone,
    writes_a_fake_constant,
    writes_into,
)


class ReadsThroughData(nn.Module):
    """Reads a buffer through `.data` and writes nothing."""

    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.ones(()))

    def forward(self, x):
        return x + self.offset.data


class CountsCalls(CountsCallsThroughData):
    """The same counter, written without `.data`."""

    def forward(self, x):
        self.calls.add_(1)
        return x + self.calls


def _strict(model):
    return torch.export.export(model, (torch.ones(3),), strict=True)


def test_the_dropped_write_is_found_with_its_line():
    program = _strict(CountsCallsThroughData())
    names = fake_constants(program)
    assert names == ["lifted_tensor_0"]
    (row,) = writes_into(program, names)
    assert row["code"] == "self.calls.data.add_(1)" and row["op"] == "aten.add_.Tensor"


def test_eager_changes_the_buffer_the_program_leaves_and_the_model_is_left_as_it_was():
    model = CountsCallsThroughData()
    program = _strict(model)
    assert state_eager_changes_alone(model, program, (torch.ones(3),), {}) == ["calls"]
    assert model.calls.item() == 0  # neither the eager copy nor the program touched the model


def test_a_buffer_written_without_data_has_no_fake_constant_and_no_finding():
    model = CountsCalls()
    program = _strict(model)
    assert fake_constants(program) == []
    assert state_eager_changes_alone(model, program, (torch.ones(3),), {}) == []
    report = diagnose(CountsCalls(), (torch.ones(3),), strict=True)
    assert "data-write-dropped" not in report.kinds()
    assert any(step.name == "run_decompositions" and step.outcome == "passed" for step in report.steps)


def test_a_read_through_data_is_a_note_not_the_finding():
    program = _strict(ReadsThroughData())
    assert fake_constants(program) and writes_into(program, fake_constants(program)) == []
    assert not writes_a_fake_constant(program)
    assert writes_a_fake_constant(_strict(CountsCallsThroughData()))


def test_the_doctor_skips_run_decompositions_and_reports_the_finding():
    report = diagnose(CountsCallsThroughData(), (torch.ones(3),), strict=True)
    assert report.kinds() == ["data-write-dropped"], report
    (finding,) = report.findings
    assert any("`calls`" in line for line in finding.evidence), finding.evidence
    (skipped,) = [step for step in report.steps if step.outcome == "not run"]
    assert skipped.name == "run_decompositions" and "crashes" in skipped.detail


def test_a_read_through_data_is_a_note_and_run_decompositions_still_runs():
    # A program that only reads its fake constant decomposes; only a write crashes run_decompositions().
    report = diagnose(ReadsThroughData(), (torch.ones(3),), strict=True)
    assert "data-write-dropped" not in report.kinds()
    assert any("fake tensors" in note for note in report.notes), report.notes
    assert not [step.name for step in report.steps if step.outcome == "not run"]
