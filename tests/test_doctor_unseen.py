"""The doctor on failures it was never shown (`tests/doctor_unseen.py`), each modelled on a public report.

A case is right when the report's first finding is the entry the case expects: the root cause first.
Each case runs in a forked child (`casebook.isolation.run_forked`), so a case that crashes torch
counts as a crash instead of ending the test run. A case the doctor still gets wrong records its
verdict in ``missed`` ("wrong page: ...", "crash: ..."), and its test expects that verdict, so the
day the doctor learns the case the test fails and the case moves to the right column; the numbers
`unseen_score` prints (precision and coverage) are kept honest by the same per-case checks.
"""

import pytest
import torch
from doctor_unseen import CRASH, RIGHT, UNSEEN, VERDICTS, score, verdict

from casebook import catalog
from casebook.doctor import diagnose
from casebook.isolation import run_forked

CASE_TIME_LIMIT_S = 180
STEP_TIME_LIMIT_S = 60  # below the case's limit, so a hung step is the doctor's finding, not a timeout here


def _report_in_a_child(name: str):
    def run():
        report = diagnose(**UNSEEN[name].call(), step_time_limit_s=STEP_TIME_LIMIT_S)
        return report.kinds(), str(report)

    return run_forked(run, timeout_s=CASE_TIME_LIMIT_S)


@pytest.fixture(scope="module")
def outcomes() -> dict:
    """Every case's result, run once for the module: (verdict, what the doctor said)."""
    results = {}
    for name, case in UNSEEN.items():
        forked = _report_in_a_child(name)
        if forked.ok:
            kinds, text = forked.value
            results[name] = (verdict(case, kinds), text)
        else:
            results[name] = (CRASH, forked.describe() + "\n" + forked.details[-2000:])
    return results


@pytest.mark.slow
@pytest.mark.parametrize("name", list(UNSEEN))
def test_the_doctor_names_the_cause_of_an_unseen_failure(name, outcomes):
    case = UNSEEN[name]
    found, said = outcomes[name]
    if case.missed:
        assert found != RIGHT, f"{name} is right now: clear its `missed`\n{said}"
        assert case.missed.startswith(found + ":"), f"{name}: the doctor's verdict is now {found!r}\n{said}"
        return
    assert found == RIGHT, f"{name}: expected {case.expected}, verdict {found}\n{said}"


@pytest.mark.slow
def test_unseen_score(outcomes):
    """Precision (right / (right + wrong page)) and coverage (right / all), printed for the log."""
    counts = score([found for found, _ in outcomes.values()])
    print(counts.line())
    assert counts == score([_recorded(case) for case in UNSEEN.values()]), counts.line()


def _recorded(case) -> str:
    return case.missed.split(":")[0] if case.missed else RIGHT


def test_every_case_cites_a_report_and_expects_an_entry_the_catalog_has():
    for name, case in UNSEEN.items():
        assert "#" in case.report and "/" in case.report, f"{name}: cite the report as owner/repo#number"
        if case.expected not in (None, "unclassified"):
            assert case.expected in catalog.BY_ID, f"{name}: no catalog entry {case.expected!r}"


def test_at_least_fifty_unseen_cases_each_with_a_verdict_the_score_knows():
    assert len(UNSEEN) >= 50, len(UNSEEN)
    for name, case in UNSEEN.items():
        assert _recorded(case) in VERDICTS, f"{name}: `missed` must start with one of {VERDICTS[1:]}"


def test_a_finding_explained_by_a_root_cause_is_folded_under_it():
    report = diagnose(**UNSEEN["counter-attribute-advanced"].call())
    assert report.kinds() == ["constant-mutated"], report
    assert any(line.startswith("explains [parity-mismatch]") for line in report.findings[0].evidence)


def test_the_provenance_of_an_int_names_the_input_it_reads():
    report = diagnose(**UNSEEN["int-of-item"].call())
    assert "provenance: " in report.findings[0].evidence[1]
    assert "reads the values of `count`" in report.findings[0].evidence[1], report


def test_provenance_through_a_size_only_is_not_a_value():
    class WidthOfInput(torch.nn.Module):
        """The width read back from a tensor of the input's shape; the input's values feed the
        output, not the int."""

        def forward(self, x):
            width = int(torch.as_tensor(x.shape)[-1])
            return torch.nn.functional.pad(x, (0, -width % 8)) + x.sum()

    report = diagnose(model=WidthOfInput(), args=(torch.rand(2, 5),))
    assert report.kinds() == ["data-dependent-int"], report
    assert "reads sizes packed into a tensor" in report.findings[0].evidence[1], report


@pytest.mark.slow
def test_a_custom_operator_from_a_module_is_a_note_naming_the_import():
    report = diagnose(**UNSEEN["custom-op-from-a-module"].call())
    assert report.ok, report
    (note,) = [note for note in report.notes if "must first import" in note]
    assert "`doctor_unseen`" in note and "torch.ops.casebook_unseen.scale_rows" in note, note
    assert "We failed to resolve torch.ops.casebook_unseen.scale_rows.default" in note, note
