"""The doctor on failures it was never shown (`tests/doctor_unseen.py`), each modelled on a public report.

A case is right when the report's first finding is the entry the case expects: the root cause first.
A case the doctor still gets wrong says why in ``missed``, and its test expects the miss, so the day
the doctor learns it the test fails and the case moves to the right column.
"""

import pytest
import torch
from doctor_unseen import UNSEEN

from casebook import catalog
from casebook.doctor import diagnose


def _first_kind(report) -> str | None:
    return report.kinds()[0] if report.findings else None


@pytest.mark.parametrize("name", list(UNSEEN))
def test_the_doctor_names_the_cause_of_an_unseen_failure(name):
    case = UNSEEN[name]
    report = diagnose(**case.call())
    if case.missed:
        assert _first_kind(report) != case.expected, f"{name} is right now: clear its `missed`\n{report}"
        return
    assert _first_kind(report) == case.expected, f"{name}: expected {case.expected}\n{report}"
    assert "unclassified" not in report.kinds(), report


def test_every_case_cites_a_report_and_expects_an_entry_the_catalog_has():
    for name, case in UNSEEN.items():
        assert "#" in case.report and "/" in case.report, f"{name}: cite the report as owner/repo#number"
        if not case.missed and case.expected is not None:
            assert case.expected in catalog.BY_ID, f"{name}: no catalog entry {case.expected!r}"


def test_at_least_twenty_unseen_cases_and_the_doctor_is_right_on_most():
    right = [name for name, case in UNSEEN.items() if not case.missed]
    assert len(UNSEEN) >= 20
    assert len(right) / len(UNSEEN) >= 0.9, f"right on {len(right)} of {len(UNSEEN)}"


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
