"""How the doctor says it knows a cause: confirmed by its fix, shown by evidence, or the message only.

A finding carries its ``strength`` and a ``basis`` sentence in every rendering; causes come first,
the best established first, then symptoms and what the catalog does not know. A "Constraints
violated" error is confirmed by exporting again with the fixes export suggests
(`casebook.doctor.confirm`), and that is also how the doctor tells a `!= 1` guard that matters from
one that only shows up in the message.
"""

import pytest
import torch
from doctor_cases import REPRODUCTIONS
from torch import nn
from torch.export import Dim

from casebook import catalog
from casebook.doctor import diagnose
from casebook.doctor.report import (
    CONFIRMED,
    EVIDENCE,
    MESSAGE_ONLY,
    NOT_IN_CATALOG,
    STRENGTHS,
    Finding,
    Report,
)


class FixedHeight(nn.Module):
    """Adds a learned table of a fixed height: the height declared dynamic can only be 8."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.zeros(1, 8, 4))

    def forward(self, x):
        return x + self.table


class StridedTwice(nn.Module):
    """Two stride-8 convolutions, then a layer that only works on a map wider than 1 pixel: the
    guard says `!= 1`, and the suggested fixes (a range) are not enough."""

    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(1, 1, 8, stride=8), nn.Conv2d(1, 1, 8, stride=8))

    def forward(self, x):
        features = self.down(x)
        if features.shape[-1] != 1:
            return features.mean(-1)
        return features.sum(-1) * 2


class TiedByConcat(nn.Module):
    """Two widths tied by a linear layer over their concatenation: export suggests `y = 32 - x`,
    which torch's own helper cannot apply."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 2)

    def forward(self, x, y):
        return self.linear(torch.cat([x, y], dim=1))


def test_a_violation_whose_suggested_fix_makes_export_pass_is_confirmed():
    report = diagnose(FixedHeight(), (torch.randn(2, 8, 4),), dynamic_shapes=({1: Dim("h")},))
    first = report.findings[0]
    assert (first.kind, first.strength) == ("constraints-violated", CONFIRMED), str(report)
    assert "h = 8" in first.basis and "export passed" in first.basis
    assert any(step.name == "suggested fixes" and step.outcome == "passed" for step in report.steps)
    assert f"{CONFIRMED}: export passed" in str(report)


def test_a_fix_torch_cannot_apply_leaves_the_message_as_the_only_basis():
    report = diagnose(
        TiedByConcat(),
        (torch.randn(1, 10), torch.randn(1, 22)),
        dynamic_shapes=({1: Dim("x_dim")}, {1: Dim("y_dim")}),
    )
    first = report.findings[0]
    assert (first.kind, first.strength) == ("constraints-violated", MESSAGE_ONLY), str(report)
    step = next(step for step in report.steps if step.name == "suggested fixes")
    assert step.outcome == "failed" and "torch could not apply its own fixes" in step.detail


def test_a_not_one_guard_the_suggested_fixes_do_not_cure_keeps_its_page_with_evidence():
    report = diagnose(
        StridedTwice(), (torch.randn(1, 1, 256, 256),), dynamic_shapes=({3: Dim("w", max=4096)},)
    )
    first = report.findings[0]
    assert (first.kind, first.strength) == ("not-one-guard", EVIDENCE), str(report)
    assert "export still fails with the fixes it suggests" in first.basis


def test_a_not_one_guard_in_a_message_whose_fixes_pass_goes_to_the_size_the_code_fixes():
    """The `!= 1` pattern in the message, yet export passes with the suggested (static) sizes: the
    guard was not the cause, the size the code fixes was (meta-pytorch/segment-anything-fast#109)."""

    class FixedPositions(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, 4, 16, stride=16)
            self.positions = nn.Parameter(torch.zeros(1, 4, 4, 4))

        def forward(self, x):
            return self.patch(x) + self.positions

    report = diagnose(
        FixedPositions(),
        (torch.randn(2, 3, 64, 64),),
        dynamic_shapes=({0: Dim("batch"), 2: Dim("h"), 3: Dim("w")},),
    )
    first = report.findings[0]
    assert (first.kind, first.strength) == ("constraints-violated", CONFIRMED), str(report)


def test_the_not_one_guard_pattern_does_not_read_a_larger_number_as_one():
    entry = catalog.entry("not-one-guard")
    assert entry.regex.search("satisfy the generated guard (x.size()[2] // 16) != 1.")
    assert not entry.regex.search("satisfy the generated guard (8*(x.size()[3] // 2)) != 128.")


def test_an_error_the_catalog_does_not_know_is_said_so_with_related_pages():
    class Unknown(nn.Module):
        def forward(self, x):
            raise_in_export = torch.compiler.is_exporting()
            if raise_in_export:
                raise RuntimeError("a message no entry quotes")
            return x

    report = diagnose(Unknown(), (torch.randn(2),), compare=False, draft=False)
    first = report.findings[0]
    assert first.kind == "unclassified" and first.strength == NOT_IN_CATALOG
    assert first.title.startswith("not in the book's catalog: ")
    assert first.related and all("/" in page for page in first.related), first.related
    assert "related (not the cause): " in str(report)
    assert report.as_dict()["findings"][0]["related"] == first.related


def test_a_cause_goes_before_a_symptom_however_sure_the_symptom():
    report = Report("m")
    parity = Finding.from_entry(catalog.entry("parity-mismatch"), ["differs"], "parity")
    cause = Finding.from_entry(
        catalog.entry("skipped-function"), ["skipped"], "strict", strength=MESSAGE_ONLY, basis="matched"
    )
    report.add(parity)
    report.add(cause)
    assert report.kinds() == ["skipped-function", "parity-mismatch"]
    confirmed = Finding.from_entry(
        catalog.entry("constraints-violated"), ["v"], "export", strength=CONFIRMED, basis="passed"
    )
    report.add(confirmed)
    assert report.kinds()[0] == "constraints-violated"


def test_an_export_error_the_catalog_does_not_know_goes_before_a_guess_at_what_draft_met_after_it():
    report = Report("m")
    report.add(
        Finding.from_entry(
            catalog.entry("constraints-violated"), ["g"], "draft", strength=MESSAGE_ONLY, basis="b"
        )
    )
    report.add(Finding.unclassified("not in the book's catalog: export raised UserError", ["e"], "export"))
    assert report.kinds() == ["unclassified", "constraints-violated"]


def test_a_stronger_basis_replaces_a_weaker_one_and_never_the_reverse():
    finding = Finding.from_entry(
        catalog.entry("constraints-violated"), ["v"], "export", strength=MESSAGE_ONLY
    )
    finding.strengthen(EVIDENCE, "seen")
    finding.strengthen(MESSAGE_ONLY, "matched")
    assert (finding.strength, finding.basis) == (EVIDENCE, "seen")


def test_an_unknown_strength_is_refused_with_the_ones_there_are():
    with pytest.raises(ValueError, match="unknown strength 'sure'; one of confirmed, evidence"):
        Finding("k", "t", "p", "f", [], "export", strength="sure")
    assert STRENGTHS[0] == CONFIRMED


@pytest.mark.parametrize("entry_id", ["skipped-function", "tolist-float"])
def test_a_strict_export_problem_that_non_strict_export_passes_is_confirmed(entry_id):
    report = diagnose(**REPRODUCTIONS[entry_id]())
    first = report.findings[0]
    assert (first.kind, first.strength) == (entry_id, CONFIRMED), str(report)
    assert first.basis.startswith("non-strict export of the same model passes")


def test_a_device_baked_in_that_move_to_device_pass_cures_is_confirmed():
    report = diagnose(**REPRODUCTIONS["device-baked"]())
    found = next(finding for finding in report.findings if finding.kind == "device-baked")
    assert found.strength == CONFIRMED and "move_to_device_pass" in found.basis, str(report)


class TopClass(nn.Module):
    """Returns `topk` as it is: a structseq torch registers with no serialization name."""

    def forward(self, x):
        return x.softmax(-1).topk(2)


def test_a_program_that_saves_once_its_named_tuple_is_named_is_confirmed_and_nothing_stays_registered():
    from typing import NamedTuple

    from torch.utils import _pytree as pytree

    class Pair(NamedTuple):
        first: torch.Tensor
        second: torch.Tensor

    class ReturnsPair(nn.Module):
        def forward(self, x):
            return Pair(x + 1, x * 2)

    report = diagnose(ReturnsPair(), (torch.randn(2, 3),))
    first = report.findings[0]
    assert (first.kind, first.strength) == ("pytree-serialization-name", CONFIRMED), str(report)
    assert any("test_doctor_strength" in line and "Pair" in line for line in first.evidence)
    assert Pair not in pytree.SUPPORTED_SERIALIZED_TYPES  # registered in a child process only


def test_a_structseq_torch_registered_without_a_name_is_named_as_evidence():
    report = diagnose(TopClass(), (torch.randn(2, 5),))
    first = report.findings[0]
    assert (first.kind, first.strength) == ("structseq-output", EVIDENCE), str(report)
    assert any("torch.return_types.topk" in line for line in first.evidence)


class ForceFromEnergy(nn.Module):
    """`torch.autograd.grad` inside `forward` (pytorch/pytorch#146719): non-strict export gives the
    message a read through `.data` gives, and strict export fails instead of passing."""

    def forward(self, x):
        x.requires_grad_()
        return torch.autograd.grad(x.square().sum().sqrt(), [x])[0]


def test_a_read_through_data_is_shown_by_strict_export_keeping_a_fake_constant():
    report = diagnose(**REPRODUCTIONS["fake-constant"]())
    (finding,) = [f for f in report.findings if f.kind == "fake-constant"]
    assert finding.strength == EVIDENCE and "strict export of the same model passes" in finding.basis
    assert "strict export passes and keeps `lifted_tensor_0` as a fake tensor (no values)" in finding.evidence


def test_the_same_message_with_strict_export_failing_is_not_in_the_catalog_with_the_page_as_related():
    report = diagnose(ForceFromEnergy(), (torch.randn(3, 4),))
    assert report.kinds() == ["unclassified"], report
    finding = report.findings[0]
    assert finding.strength == NOT_IN_CATALOG
    assert finding.related[0] == catalog.entry("fake-constant").docname
    assert any(line.startswith("strict export fails too (") for line in finding.evidence)
    assert "a read through `.data` exports in strict mode with a fake constant" in finding.basis
