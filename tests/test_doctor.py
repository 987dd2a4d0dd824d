"""The export doctor: what its findings say, how the report renders, and how bad input is refused.

Which page each catalog entry is sent to is tested in `test_doctor_catalog.py`; this file tests the
evidence and the plumbing: the reader's own line, draft_export's extra sites, the order of findings,
the three renderings, `check_inputs`, and every usage error of `diagnose` and of the command line.
"""

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from doctor_cases import REPRODUCTIONS
from torch import nn
from torch.export import Dim

from casebook import toc
from casebook.doctor import DoctorUsageError, diagnose
from casebook.doctor.__main__ import main
from casebook.doctor.branches import branch_site


class TwoBranches(nn.Module):
    """Two data-dependent branches: export stops at the first, draft_export finds the second."""

    def forward(self, x):
        kept = x[x > 0]
        if kept.shape[0] > 2:
            kept = kept * 2
        if kept.sum() > 10:
            kept = kept / 2
        return kept


def test_evidence_names_the_readers_line_and_draft_export_finds_the_next_one():
    report = diagnose(TwoBranches(), (torch.tensor([1.0, -2.0, 3.0, 4.0]),))
    assert report.kinds() == ["data-dependent-guard"]
    evidence = report.findings[0].evidence
    assert evidence[0].startswith(
        "GuardOnDataDependentSymNode: Could not guard on data-dependent expression u0 > 2"
    )
    assert any(
        line.startswith("at tests/test_doctor.py:") and "if kept.shape[0] > 2:" in line for line in evidence
    )
    assert any("strict export fails too" in line for line in evidence)
    extra = [line for line in evidence if line.startswith("draft_export also found")]
    assert extra and "if kept.sum() > 10:" in extra[0], evidence
    assert [step.name for step in report.steps][:4] == [
        "eager",
        "export (non-strict)",
        "export (strict)",
        "draft_export",
    ]
    not_run = [step for step in report.steps if step.outcome == "not run"]
    assert {step.name for step in not_run} == {
        "training mode",
        "dynamic dims",
        "fake constants",
        "run + parity",
        "run_decompositions",
        "save/load",
        "load elsewhere",
        "runtime asserts",
        "custom operators",
        "size 1",
        "another size",
        "input dtypes and layouts",
    }


def test_a_specialized_dimension_is_located_in_the_code():
    report = diagnose(**REPRODUCTIONS["dynamic-dim-specialized"]())
    (finding,) = report.findings
    assert finding.evidence[0] == "`x.shape[0]` was asked to be Dim.AUTO; the program fixes it to 2"
    assert any(
        "draft_export: fixed at" in line and "x.reshape(2, -1)" in line for line in finding.evidence
    ), finding
    assert any("`x.shape[1]` (Dim.AUTO) is dynamic" in note for note in report.notes), report.notes


def test_a_size_one_example_is_named_as_the_cause():
    class Scale(nn.Module):
        def forward(self, x):
            return x * 2

    report = diagnose(Scale(), (torch.rand(1, 3),), dynamic_shapes=({0: Dim.AUTO},))
    (finding,) = report.findings
    assert finding.kind == "dynamic-dim-specialized"
    assert "export specializes sizes 0 and 1: use an example with size ≥ 2" in finding.evidence[1]


def test_a_branch_without_raise_is_a_note_not_a_finding():
    class WarnsInEager(nn.Module):
        def forward(self, x):
            if not torch.compiler.is_compiling():
                print("eager only")
            return x + 1

    report = diagnose(WarnsInEager(), (torch.rand(2),))
    assert report.ok, report
    assert any("skips the if-branch, which holds no raise or assert" in note for note in report.notes), (
        report.notes
    )


def test_findings_are_ordered_most_fundamental_first():
    report = diagnose(**REPRODUCTIONS["skipped-function"]())
    assert report.kinds() == ["skipped-function", "parity-mismatch"]
    assert any("non-strict export succeeds" in note for note in report.notes)


def test_check_inputs_compare_every_input_with_eager():
    report = diagnose(**REPRODUCTIONS["static-dim-guard"]())
    (finding,) = report.findings
    assert finding.evidence[0] == "on check input 0: AssertionError: Guard failed: x.size()[0] == 2"
    run_step = next(step for step in report.steps if step.name == "run + parity")
    assert run_step.outcome == "failed" and run_step.detail.startswith("1 of 2 input(s) equal to eager")


def test_report_renders_as_text_markdown_and_json():
    GUARDS_PAGE = toc.docname("data_dependent_guards")  # noqa: N806
    report = diagnose(**REPRODUCTIONS["data-dependent-guard"]())
    text = str(report)
    assert text.startswith("KeepIfEnough: 1 finding (")
    assert "1. [data-dependent-guard] Python branches on a value known only at run time" in text
    assert f"   read: {GUARDS_PAGE}" in text and "`" not in text.split("Steps:")[0].split("fix:")[1]
    markdown = report._repr_markdown_()
    assert "1. `data-dependent-guard`: **Python branches on a value known only at run time**" in markdown
    assert f"   - read: [{GUARDS_PAGE}](/{GUARDS_PAGE}.md)" in markdown
    assert "```text" in markdown
    data = json.loads(report.to_json())
    assert data["ok"] is False and data["model"] == "KeepIfEnough"
    (finding,) = data["findings"]
    assert finding["kind"] == "data-dependent-guard" and finding["page"] == GUARDS_PAGE
    assert finding["exception"] == "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode"
    assert {step["name"] for step in data["steps"]} >= {"eager", "export (non-strict)", "draft_export"}
    assert repr(report) == text


def test_the_doctor_prints_nothing_while_it_works(capfd):
    diagnose(**REPRODUCTIONS["data-dependent-guard"]())
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out[-500:], err[-500:])


def test_a_function_is_wrapped_with_its_signature_so_dynamic_shapes_still_apply():
    def scale(x, factor):
        return x * factor

    report = diagnose(
        scale, (torch.rand(3, 2), torch.tensor(2.0)), dynamic_shapes={"x": {0: Dim("n")}, "factor": None}
    )
    assert report.kinds() == ["non-module-callable"], report
    assert any("`x.shape[0]` (Dim('n')) is dynamic" in note for note in report.notes), report.notes
    builtin = diagnose(torch.relu, (torch.rand(3),))  # no Python signature: wrapped all the same
    assert builtin.kinds() == ["non-module-callable"], builtin


# ------------------------------------------------------------------ branch reading
@pytest.mark.parametrize(
    ("test", "skipped"),
    [
        ("not torch.compiler.is_compiling()", "the if-branch"),
        ("torch.compiler.is_compiling()", "the else-branch"),
        ("mask is None and not is_torchdynamo_compiling()", "the if-branch"),
        ("is_compiling() and strict", ""),
        ("not torch.compiler.is_exporting() or force", ""),
    ],
)
def test_branch_site_knows_which_branch_a_true_flag_rules_out(tmp_path, test, skipped):
    source = tmp_path / "model_code.py"
    source.write_text(
        f"def forward(x, mask=None, strict=False, force=False):\n    if {test}:\n        raise ValueError('bad')\n    else:\n        assert x\n"
    )
    site = branch_site(str(source), 2, "forward")
    assert site is not None and site.skipped == skipped
    expected = {"the if-branch": ("raise ValueError('bad')",), "the else-branch": ("assert x",), "": ()}
    assert site.raises == expected[skipped]
    assert branch_site(str(source), 3, "forward") is None  # the raise line asks no flag


# ------------------------------------------------------------------ usage errors of diagnose
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: diagnose("not a model", (torch.rand(2),)),
            "the model must be an nn.Module or a callable, got str",
        ),
        (
            lambda: diagnose(nn.ReLU(), torch.rand(2)),
            r"args must be a tuple of positional inputs, e.g. \(x,\), got Tensor",
        ),
        (
            lambda: diagnose(nn.ReLU(), (torch.rand(2),), [1]),
            "kwargs must be a dict of keyword inputs, got list",
        ),
        (
            lambda: diagnose(nn.ReLU(), (torch.rand(2),), check_inputs=[torch.rand(2)]),
            "check input 0: args must be a tuple",
        ),
        (
            lambda: diagnose(nn.ReLU(), (torch.rand(2),), check_inputs=[{"x": 1}]),
            "check input 0 is a dict with keys",
        ),
        (
            lambda: diagnose(nn.ReLU(), (torch.rand(2),), device="gpu0"),
            "device must name a torch device such as 'cuda' or 'cpu', got 'gpu0'",
        ),
        (
            lambda: diagnose(nn.Linear(3, 2), (torch.rand(2, 4),)),
            "the model raised RuntimeError: .* in eager mode on the example inputs: fix the inputs",
        ),
        (
            lambda: diagnose(nn.Linear(3, 2), (torch.rand(2, 3),), check_inputs=[(torch.rand(2, 5),)]),
            "in eager mode on check input 0",
        ),
    ],
)
def test_bad_arguments_are_refused_with_what_to_fix(call, message):
    with pytest.raises(DoctorUsageError, match=message):
        call()


class Scores(nn.Module):
    def forward(self, query, key):
        return query @ key.transpose(-1, -2)


def test_a_check_input_laid_out_unlike_the_example_is_a_finding_about_the_call():
    """Eager refuses the call too, but the reader makes it (pytorch/TensorRT#3020): the program's
    refusal names the layout, and the report says eager refused it."""
    query, key = torch.rand(2, 5, 4), torch.rand(2, 5, 4)
    report = diagnose(Scores(), (query, key), check_inputs=[([query, key],)])
    assert report.kinds() == ["kwarg-mismatch"], report
    first = report.findings[0].evidence[0]
    assert first.startswith(
        "on check input 0, laid out differently from the example inputs (eager raised TypeError"
    )
    assert "Trying to flatten user inputs with exported input tree spec" in "\n".join(
        report.findings[0].evidence
    )


# ------------------------------------------------------------------ the command line
FACTORIES = textwrap.dedent(
    """
    import torch

    class KeepIfEnough(torch.nn.Module):
        def forward(self, x):
            kept = x[x > 0]
            return kept * 2 if kept.shape[0] > 2 else kept

    def failing():
        return {"model": KeepIfEnough(), "args": (torch.tensor([1.0, -2.0, 3.0, 4.0]),)}

    def clean():
        return {"model": torch.nn.Linear(3, 2).eval(), "args": (torch.rand(4, 3),)}

    def raises():
        raise KeyError("weights.pt")

    def returns_list():
        return [torch.nn.ReLU()]

    def lacks_args():
        return {"model": torch.nn.ReLU(), "inputs": ()}

    def eager_fails():
        return {"model": torch.nn.Linear(3, 2), "args": (torch.rand(2, 5),)}

    NOT_A_FUNCTION = 3
    """
)


@pytest.fixture
def factories(tmp_path):
    path = tmp_path / "factories.py"
    path.write_text(FACTORIES)
    return path


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("factories.py", "expected FILE.py:FACTORY (e.g. models/net.py:make_example), got 'factories.py'"),
        ("missing.py:factory", "no such file: missing.py"),
        ("{dir}/factories.txt:factory", "is not a Python file (.py)"),
        (
            "factories.py:nope",
            "factories.py defines no 'nope'; functions it defines: KeepIfEnough, clean, eager_fails",
        ),
        ("factories.py:NOT_A_FUNCTION", "'NOT_A_FUNCTION' in factories.py is a int, not a function"),
        ("factories.py:raises", "raises() raised KeyError: 'weights.pt'"),
        (
            "factories.py:returns_list",
            "returns_list() returned a list; it must return a dict with the keys 'model' and 'args'",
        ),
        (
            "factories.py:lacks_args",
            "the dict lacks_args() returned lacks 'args' and has unknown key(s) 'inputs'",
        ),
        ("factories.py:eager_fails", "the model raised RuntimeError: .* in eager mode on the example inputs"),
        ("broken.py:factory", "importing broken.py raised SyntaxError"),
    ],
)
def test_cli_usage_errors_exit_2_with_one_line(factories, monkeypatch, capsys, target, message):
    import re

    (factories.parent / "broken.py").write_text("def factory(:\n")
    (factories.parent / "factories.txt").write_text("")
    monkeypatch.chdir(factories.parent)
    assert main([target.format(dir=factories.parent)]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    pattern = re.escape(message).replace(r"\.\*", ".*")  # messages are literal but for ".*"
    assert last.startswith("doctor: error: ") and re.search(pattern, last), err


def test_cli_unknown_option_is_a_usage_error(factories, monkeypatch, capsys):
    monkeypatch.chdir(factories.parent)
    assert main(["factories.py:clean", "--fast"]) == 2
    assert (
        "unrecognized arguments: --fast; usage: python -m casebook.doctor FILE.py:FACTORY"
        in capsys.readouterr().err
    )


@pytest.mark.slow
def test_cli_exit_codes_and_json(factories):
    """The real entry point, `python -m casebook.doctor`: 1 with findings, 0 when clean."""
    failing = subprocess.run(
        [sys.executable, "-m", "casebook.doctor", f"{factories}:failing", "--json", "--no-compare"],
        capture_output=True,
        text=True,
    )
    assert failing.returncode == 1, failing.stderr
    data = json.loads(failing.stdout)
    assert [f["kind"] for f in data["findings"]] == ["data-dependent-guard"]
    assert "  export (non-strict): failed" in failing.stderr  # progress, one line per step
    clean = subprocess.run(
        [sys.executable, "-m", "casebook.doctor", f"{factories}:clean"], capture_output=True, text=True
    )
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.startswith("Linear: exports and runs clean")


def test_without_an_engine_builder_the_build_step_says_how_to_install_one(monkeypatch):
    from casebook.backends.tensorrt import engine as trt_engine
    from casebook.doctor import program_steps

    monkeypatch.setattr(trt_engine, "installed_distribution", lambda: None)
    monkeypatch.setattr(program_steps, "check_tensorrt", lambda *args: None)  # the dry run is not the point
    report = diagnose(nn.Linear(4, 2), (torch.randn(3, 4),), tensorrt=True, compare=False, draft=False)
    (step,) = [step for step in report.steps if step.name == "TensorRT engine build"]
    assert step.outcome == "not run" and "make install TENSORRT=rtx" in step.detail
    assert report.ok


def test_a_dimension_the_program_ranges_from_1_to_4096_is_not_called_made_up():
    from casebook.backends.tensorrt.engine import InputProfile
    from casebook.doctor.program_steps import _program_range

    program = torch.export.export(
        nn.Linear(4, 2), (torch.randn(3, 4),), dynamic_shapes=({0: Dim("rows", min=1, max=4096)},)
    )
    assert _program_range(program, InputProfile("x", (1, 4), (3, 4), (4096, 4), "float32"))
    assert not _program_range(program, InputProfile("nms", (2,), (4097,), (8192,), "int64"))


def test_training_mode_without_mode_dependent_code_is_not_a_finding():
    from doctor_cases import Classifier

    report = diagnose(model=Classifier(), args=(torch.rand(3, 8),))  # never switched to eval mode
    assert report.ok, report
    (step,) = [step for step in report.steps if step.name == "training mode"]
    assert step.outcome == "passed" and "the eval-mode program is the same" in step.detail, step


def test_the_load_in_a_fresh_process_runs_only_for_programs_that_name_registrations():
    from doctor_cases import CLEAN

    (step,) = [step for step in diagnose(**CLEAN()).steps if step.name == "load elsewhere"]
    assert step.detail == "the program names no custom operator or pytree class" and step.seconds < 1, step


@pytest.mark.slow
def test_json_reports_follow_the_documented_schema():
    import jsonschema

    from casebook.doctor.report import JSON_SCHEMA

    jsonschema.Draft202012Validator.check_schema(JSON_SCHEMA)
    for case in ("data-dependent-guard", "constant-mutated", "load-needs-registration"):
        jsonschema.validate(json.loads(diagnose(**REPRODUCTIONS[case]()).to_json()), JSON_SCHEMA)
    from doctor_cases import CLEAN

    jsonschema.validate(json.loads(diagnose(**CLEAN()).to_json()), JSON_SCHEMA)


@pytest.mark.slow
def test_the_command_line_does_not_import_the_notebook_display():
    """The doctor runs in a terminal or CI: it needs parity (casebook.parity), not IPython, which only
    pages use to show an expected error (casebook.expected_errors)."""
    code = "import sys, casebook.doctor.__main__; print(sorted(m for m in sys.modules if m.startswith('IPython')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


class CropGridByInt(nn.Module):
    """`int()` of a size derived from a `8 * Dim` dimension: the program's range admits every
    multiple of 8 and a guard on `// 8` admits only the example's."""

    def forward(self, x):
        cells = int(x.shape[-1] // 8)
        return x[..., ::8] * torch.arange(cells, dtype=x.dtype)


def test_a_derived_dimension_is_tried_at_another_multiple_and_its_pin_is_named_with_evidence():
    report = diagnose(CropGridByInt(), (torch.rand(2, 48),), dynamic_shapes=({1: 8 * Dim("cells", max=32)},))
    assert report.kinds() == ["size-pinned-by-int"], str(report)
    finding = report.findings[0]
    assert finding.strength == "evidence"
    assert "`x.shape[1]` = 72" in finding.evidence[0]  # 8 * (6 + 3): a multiple the range admits
    assert "8*s" in finding.basis and "a guard refuses it" in finding.basis
