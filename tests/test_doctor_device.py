"""The doctor's device step (casebook.doctor.other_device): what it runs, what it reports, what it leaves.

The finding on a model that keeps constants on the traced device is tested with the catalog's
reproduction (`tests/test_doctor_catalog.py`, `device-baked`).
"""

from __future__ import annotations

import pytest
import torch
from doctor_cases import REPRODUCTIONS
from torch import nn

from casebook.doctor import diagnose, other_device


def _step(report):
    (step,) = [step for step in report.steps if step.name == other_device.STEP]
    return step


class AddsPositions(nn.Module):
    def forward(self, x):
        return x + torch.arange(x.shape[-1], device=x.device, dtype=x.dtype)


class Gather(nn.Module):
    def forward(self, x):
        return x[x > 0.5]


def test_a_device_this_machine_lacks_is_stood_in_for_by_meta():
    expected = torch.device("cuda") if torch.cuda.is_available() else torch.device("meta")
    assert other_device.stand_in_for("cuda") == expected
    assert other_device.stand_in_for("cpu") == torch.device("cpu")


def test_a_model_of_parameters_and_buffers_moves_with_to_and_gives_no_finding():
    report = diagnose(
        nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).eval(), (torch.rand(2, 4),), device="cuda"
    )
    assert report.ok, report
    assert _step(report).outcome == "passed" and "the program runs on" in _step(report).detail


def test_a_device_argument_in_the_program_is_named_with_the_fix_that_runs():
    report = diagnose(AddsPositions(), (torch.rand(2, 5),), device="cuda")
    (finding,) = report.findings
    assert finding.kind == "device-baked"
    assert any("aten.arange" in line and "device=cpu" in line for line in finding.evidence), finding.evidence
    assert finding.evidence[-1] == "move_to_device_pass(program, device) runs on the same inputs"


@pytest.mark.slow
def test_the_doctor_leaves_the_program_on_its_device():
    report = diagnose(**REPRODUCTIONS["device-baked"]())
    (finding,) = [finding for finding in report.findings if finding.kind == "device-baked"]
    assert any(line.startswith("constant ") and "on cpu" in line for line in finding.evidence), (
        finding.evidence
    )
    assert {str(value.device) for value in report.program.constants.values()} == {"cpu"}


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the step runs on the GPU, not on meta")
def test_an_operator_meta_cannot_run_leaves_the_question_open_without_a_finding():
    report = diagnose(Gather(), (torch.rand(8),), device="cuda")
    assert report.ok, report
    step = _step(report)
    assert step.outcome == "passed" and step.detail.startswith("not decided on cuda (meta stands in)")


@pytest.mark.slow
def test_the_fix_is_checked_on_a_copy_that_keeps_an_input_named_input():
    # nn.Sequential's argument is called `input`; a deep copy of its program renames that placeholder,
    # and move_to_device_pass's validation would refuse the copy.
    from torchvision.transforms import v2

    model = nn.Sequential(v2.Normalize(mean=[0.5, 0.5], std=[0.2, 0.2]), nn.Flatten()).eval()
    report = diagnose(model, (torch.rand(2, 2, 3, 3),), device="cuda")
    (finding,) = [finding for finding in report.findings if finding.kind == "device-baked"]
    assert finding.evidence[-1] == "move_to_device_pass(program, device) runs on the same inputs", (
        finding.evidence
    )
