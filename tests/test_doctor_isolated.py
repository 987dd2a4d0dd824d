"""The doctor's steps in forked children (`casebook.doctor.isolated`): a crash, a hang or an escaped
exception in a step is a finding, the report goes on, and every step starts from the same state."""

import ctypes
import inspect
import sys
import time

import pytest
import torch
from torch import nn

from casebook.doctor import DoctorUsageError, diagnose, isolated
from casebook.doctor.__main__ import main
from casebook.doctor.report import Finding, Report
from casebook.doctor.session import Session


def _session() -> tuple[Session, list]:
    logged = []
    return Session(Report("Model"), logged.append), logged


def test_what_a_step_adds_in_the_child_comes_back_and_progress_runs_here():
    session, logged = _session()

    def step():
        with session.step("run + parity") as record:
            record.detail = "1 of 1 input(s) equal to eager"
        session.add(Finding.unclassified("a problem", ["first line"], "run", RuntimeError("boom")))
        session.report.notes.append("a note")
        session.example_output = torch.ones(2)

    isolated.run_step(session, "run + parity", step, time_limit_s=60)
    report = session.report
    assert [f.title for f in report.findings] == ["a problem"] and report.notes == ["a note"]
    assert report.findings[0].exception is None
    assert report.findings[0].as_dict()["exception"] == "builtins.RuntimeError"  # the name crossed over
    assert [s.name for s in logged] == ["run + parity"] and torch.equal(session.example_output, torch.ones(2))


def test_findings_made_before_the_step_keep_their_exception():
    session, _ = _session()
    before = Finding.unclassified("export failed", ["RuntimeError: boom"], "export", RuntimeError("boom"))
    session.add(before)

    def step():
        session.report.findings[0].evidence.append("more evidence from the step")

    isolated.run_step(session, "run + parity", step, time_limit_s=60)
    (finding,) = session.report.findings
    assert finding is before and isinstance(finding.exception, RuntimeError)
    assert finding.evidence == ["RuntimeError: boom", "more evidence from the step"]


def test_a_segmentation_fault_in_a_step_is_a_finding_with_the_line_and_a_reproduction():
    session, logged = _session()

    def crashes_in_the_readers_code():
        ctypes.string_at(0)

    isolated.run_step(session, "run_decompositions", crashes_in_the_readers_code, time_limit_s=60)
    (finding,) = session.report.findings
    assert (
        finding.kind == "unclassified" and finding.title == "torch crashed in `run_decompositions`: SIGSEGV"
    )
    assert (
        finding.evidence[0] == "the child process running the `run_decompositions` step was killed by SIGSEGV"
    )
    assert any("in crashes_in_the_readers_code" in line for line in finding.evidence), finding.evidence
    assert not any("site-packages" in line for line in finding.evidence), finding.evidence  # no machine paths
    assert "reproduce: program.run_decompositions()" in finding.evidence
    assert "python -X faulthandler" in finding.fix
    assert [(s.name, s.outcome, s.detail) for s in logged] == [
        ("run_decompositions", "failed", "killed by SIGSEGV")
    ]


def test_a_step_past_its_time_limit_is_stopped_and_reported():
    session, _ = _session()
    start = time.monotonic()
    isolated.run_step(session, "save/load", lambda: time.sleep(60), time_limit_s=1)
    (finding,) = session.report.findings
    assert finding.title.startswith("`save/load` still running after") and time.monotonic() - start < 30
    assert "--step-time-limit" in finding.fix


def test_an_exception_that_escapes_a_step_is_a_finding_naming_the_step():
    session, _ = _session()

    def buggy_step():
        raise KeyError("kwargs")

    isolated.run_step(session, "dynamic dims", buggy_step, time_limit_s=60)
    (finding,) = session.report.findings
    assert finding.title == "the doctor's `dynamic dims` step raised KeyError"
    assert finding.evidence[0] == "the `dynamic dims` step raised KeyError: 'kwargs'"
    assert any("in buggy_step" in line for line in finding.evidence), finding.evidence


def test_a_step_whose_result_cannot_cross_runs_again_here_with_a_note():
    session, _ = _session()
    ran_here = []

    def step():
        session.example_output = lambda: None  # a function does not pickle
        ran_here.append(torch.get_num_threads())

    isolated.run_step(session, "run + parity", step, time_limit_s=60)
    assert ran_here == [1] and callable(session.example_output)  # here, on one thread as in a child
    (note,) = session.report.notes
    assert note.startswith("the `run + parity` step ran in this process: its results cannot cross"), note


def test_a_program_that_did_not_run_stays_not_run_after_a_step():
    """The marker for "no output yet" is an object of this process: a step that did not run the
    example must not bring back a copy of it that reads as an output."""
    session, _ = _session()
    isolated.run_step(session, "run_decompositions", lambda: None, time_limit_s=60)
    assert not session.ran_clean


class BatchNormWithoutStatistics(nn.Module):
    """`native_batch_norm` in inference mode with no running statistics: the CPU kernel dereferences
    them and the process dies (pytorch/pytorch#194014, on 2.14.1)."""

    def forward(self, x):
        return torch.ops.aten.native_batch_norm(x, None, None, None, None, False, 0.1, 1e-5)[0]


@pytest.mark.slow
def test_a_model_that_crashes_torch_in_eager_gets_a_report_naming_its_line():
    report = diagnose(BatchNormWithoutStatistics(), (torch.randn(2, 2, 4, 4),))
    assert report.kinds() == ["unclassified"], report
    finding = report.findings[0]
    assert finding.title == "torch crashed in `eager`: SIGSEGV"
    assert any(line.startswith("at ") and line.endswith(" in forward") for line in finding.evidence), report
    assert [s.name for s in report.steps if s.outcome == "not run"] == ["export"]


class CountsCalls(nn.Module):
    """A buffer advanced on every call (a decoding step counter, a running statistic)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return x * self.calls


@pytest.mark.slow
def test_a_model_that_writes_its_state_is_compared_call_for_call_and_left_as_it_was():
    model = CountsCalls()
    report = diagnose(model, (torch.ones(3),), check_inputs=[(torch.ones(3),), (torch.full((3,), 2.0),)])
    assert report.ok, report
    assert "3 of 3 input(s) equal to eager" in str(report)
    assert model.calls.item() == 0  # the doctor ran copies: the reader's model is as it was


class KeepIfEnough(nn.Module):
    def forward(self, x):
        kept = x[x > 0]
        return kept * 2 if kept.shape[0] > 2 else kept


@pytest.mark.slow
def test_isolate_false_runs_in_this_process_with_the_same_findings():
    """For a debugger; there the steps run on the model and the program themselves, so the same
    starting state holds only with isolation on."""
    example = (torch.tensor([1.0, -2.0, 3.0, 4.0]),)
    here = diagnose(KeepIfEnough(), example, isolate=False)
    assert here.kinds() == diagnose(KeepIfEnough(), example).kinds() == ["data-dependent-guard"], here


@pytest.mark.parametrize("limit", [0, -1, "10", float("inf"), float("nan"), True])
def test_a_time_limit_that_is_not_a_positive_finite_number_is_refused(limit):
    with pytest.raises(
        DoctorUsageError, match="step_time_limit_s must be a positive, finite number of seconds"
    ):
        diagnose(nn.ReLU(), (torch.ones(2),), step_time_limit_s=limit)


@pytest.mark.slow
def test_with_cuda_started_every_step_runs_here_and_a_note_says_why(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    report = diagnose(CountsCalls(), (torch.ones(3),))
    assert any(note.startswith("CUDA is initialized in this process") for note in report.notes), report


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "expected a positive, finite number"),
        ("inf", "expected a positive, finite number"),
        ("soon", "expected a number"),
    ],
)
def test_cli_step_time_limit_must_be_a_positive_number(value, message, capsys):
    assert main(["factories.py:clean", "--step-time-limit", value]) == 2
    err = capsys.readouterr().err
    assert "argument --step-time-limit" in err and message in err, err


def test_steps_whose_work_runs_in_workers_already_are_steps_diagnose_has():
    """The TensorRT steps run here (their builds are in worker processes, and a worker started in a
    child would be started again for every step): the names must be the ones `diagnose` uses."""
    source = inspect.getsource(sys.modules["casebook.doctor.diagnose"])  # the package re-exports the function
    for name in isolated.IN_WORKERS_ALREADY:
        assert f'"{name}"' in source, name
