"""Export, the other mode to compare, `draft_export`, and the branches export skipped."""

from __future__ import annotations

import contextlib
import re

import torch

from .. import catalog
from .branches import BranchSite, flag_spy
from .confirm import CONSTRAINT_ENTRIES, confirm_with_suggested_fixes
from .fake_constants import fake_constants
from .frames import Frame, draft_frames, error_frames
from .provenance import SIZES, VALUES, observer_behind, origin_at, origin_in_failed_trace
from .report import CONFIRMED, EVIDENCE, MESSAGE_ONLY, NOT_IN_CATALOG_TITLE, Finding
from .session import Session, first_line
from .shape_cache import check_shape_cache

# Evidence lists are for reading: beyond this many extra sites, say how many more there are.
MAX_EXTRA_SITES = 8
MAX_NOTES = 6


def _mode(strict: bool) -> tuple[str, str]:
    """(the mode's name in the report, the catalog stage its errors are classified at)."""
    return ("strict", "strict") if strict else ("non-strict", "export")


@contextlib.contextmanager
def _dynamo_reset_after(strict: bool):
    """Strict export leaves TorchDynamo caches behind; clear them so they do not leak into later steps."""
    try:
        yield
    finally:
        if strict:
            torch._dynamo.reset()


def try_export(module, args, kwargs, dynamic_shapes, strict: bool):
    """(program, None) or (None, the exception)."""
    with _dynamo_reset_after(strict):
        try:
            return torch.export.export(
                module, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict
            ), None
        except Exception as error:
            return None, error


def export(
    session: Session, module, args, kwargs, dynamic_shapes, *, strict: bool, compare: bool, draft: bool
):
    """Export in the chosen mode; on failure compare with the other mode and run `draft_export`.
    Returns the program, or None."""
    mode, stage = _mode(strict)
    # Strict export traces the flags with TorchDynamo, which must see the real functions.
    spy = contextlib.nullcontext([]) if strict else flag_spy()
    finding = None
    with session.step(f"export ({mode})") as record, spy as sites:
        program, error = try_export(module, args, kwargs, dynamic_shapes, strict)
        if error is not None:
            record.outcome = "failed"
            finding = _classified(session, error, stage, module)
            session.add(finding)
    report_branches(session, sites)
    if program is not None:
        return program

    def export_with(spec):
        return try_export(module, args, kwargs, spec, strict)

    def export_copy(forgetful):
        return try_export(forgetful, args, kwargs, dynamic_shapes, strict)

    if compare:
        program = export_other_mode(session, module, args, kwargs, dynamic_shapes, not strict, finding)
        if program is not None:
            refine_by_origin(finding, program)  # the other mode's program holds the read too
            check_shape_cache(session, finding, module, export_copy)
            confirm_with_suggested_fixes(session, finding, dynamic_shapes, export_with)
            session.report.order()
            return program
    else:
        session.skip(f"export ({_mode(not strict)[0]})", "compare=False")
    if draft:
        run_draft(session, module, args, kwargs, dynamic_shapes, strict, finding)
    else:
        session.skip("draft_export", "draft=False")
    refine_by_origin(finding)  # when no program got past the error
    check_shape_cache(session, finding, module, export_copy)
    confirm_with_suggested_fixes(session, finding, dynamic_shapes, export_with)
    session.report.order()  # the findings' strengths may have changed
    return None


def _classified(session: Session, error: BaseException, stage: str, module) -> Finding:
    """The export error's finding; one raised inside a quantization observer goes to that entry."""
    finding = session.classified(error, stage, "export")
    if finding.kind == "aten-op-without-kernel":
        _read_aten_operator(finding, str(error))
    observer = observer_behind(error, module)
    if observer is not None:
        finding.evidence.insert(1, f"raised inside the quantization observer {observer}")
        finding.reclassify(
            catalog.entry("quantization-observer"),
            strength=EVIDENCE,
            basis=f"the stack shows the error raised inside the quantization observer {observer}",
        )
    return finding


_ATEN_OP = re.compile(r"aten\.(\w+)\.(\w+)")


def _read_aten_operator(finding: Finding, message: str) -> None:
    """Evidence for an aten operator without a traceable kernel: the operator the message names is
    PyTorch's own, and tagged as one whose output size depends on the data when it is."""
    match = _ATEN_OP.search(message)
    packet = getattr(torch.ops.aten, match.group(1), None) if match else None
    overload = getattr(packet, match.group(2), None) if packet is not None else None
    if overload is None:
        return
    name = f"torch.ops.aten.{match.group(1)}.{match.group(2)}"
    tagged = torch.Tag.dynamic_output_shape in overload.tags
    finding.evidence.insert(
        1,
        f"{name} is PyTorch's own operator"
        + (", tagged `dynamic_output_shape`: its output size depends on the data" if tagged else ""),
    )
    finding.strengthen(
        EVIDENCE,
        f"the doctor looked {name} up: an aten operator"
        + (" tagged `dynamic_output_shape`" if tagged else "")
        + ", not one registered by your code",
    )


def export_other_mode(session: Session, module, args, kwargs, dynamic_shapes, strict: bool, finding: Finding):
    """The other export mode, to compare: the same problem joins the finding's evidence; another
    problem is a note (the reader's chosen mode is the one to fix)."""
    mode, stage = _mode(strict)
    with session.step(f"export ({mode})") as record:
        program, error = try_export(module, args, kwargs, dynamic_shapes, strict)
        if error is not None:
            record.outcome = "failed"
            other = _classified(session, error, stage, module)
            if _strict_export_tests_a_data_read(finding, strict):
                _refute_data_read(finding, error)
            if other.page == finding.page and other.kind != "unclassified":
                finding.evidence.append(f"{mode} export fails too: {first_line(error)}")
            else:
                read = f"see {other.page}" if other.kind != "unclassified" else "not in the catalog"
                session.report.notes.append(
                    f"{mode} export fails differently ({read}): `{first_line(error)}`"
                )
            return None
    session.report.notes.append(f"{mode} export succeeds: the checks below use the {mode} program")
    if _strict_export_tests_a_data_read(finding, strict):
        fakes = fake_constants(program)
        if fakes:
            names = ", ".join(f"`{name}`" for name in fakes)
            kept = "as a fake tensor" if len(fakes) == 1 else "as fake tensors"
            finding.evidence.append(f"strict export passes and keeps {names} {kept} (no values)")
            finding.strengthen(
                EVIDENCE,
                "strict export of the same model passes and its program holds a constant that is a fake "
                "tensor: what strict export makes of a read through `.data`",
            )
        else:
            _refute_data_read(finding, None)
    if finding is not None and _fixed_by_non_strict(finding) and not strict:
        finding.strengthen(
            CONFIRMED,
            "non-strict export of the same model passes: the cause is a call only strict export "
            "cannot trace (non-strict runs it once, at export, and bakes its result in)",
        )
    return program


def _strict_export_tests_a_data_read(finding: Finding | None, strict: bool) -> bool:
    """Whether this is strict export, tried after non-strict export raised `fake-constant`'s message:
    for a read through `.data`, strict export passes and keeps a fake constant; anything else says
    the message came from another cause (autograd inside `forward`, pytorch/pytorch#146719)."""
    return strict and finding is not None and finding.kind == "fake-constant"


def _refute_data_read(finding: Finding, strict_error: BaseException | None) -> None:
    what = (
        f"strict export fails too ({first_line(strict_error)})"
        if strict_error is not None
        else "strict export passes and keeps no fake constant"
    )
    finding.evidence.append(what)
    finding.refute(
        f"{NOT_IN_CATALOG_TITLE}: export found a fake tensor among the program's constants",
        f"the message is the one a read through `.data` gives, but {what}, where a read through `.data` "
        "exports in strict mode with a fake constant: another operation left the fake tensor (autograd "
        "inside `forward`, a custom kernel); search for the constant's name and the op that made it",
    )


def _fixed_by_non_strict(finding: Finding) -> bool:
    """A strict-export problem whose fix is to export non-strict (a skipped function, `.tolist()`)."""
    if finding.kind not in catalog.BY_ID:
        return False
    entry = catalog.entry(finding.kind)
    return entry.stages == ("strict",) and "non-strict" in entry.fix


def run_draft(session: Session, module, args, kwargs, dynamic_shapes, strict: bool, finding: Finding) -> None:
    with session.step("draft_export") as record, _dynamo_reset_after(strict):
        try:
            program = torch.export.draft_export(
                module, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict
            )
        except Exception as error:
            record.outcome = "failed"
            later = session.classified(error, _mode(strict)[1], "draft")
            if later.kind == "unclassified":  # draft_export runs the real kernels too: a run failure
                later = session.classified(error, "run", "draft")
            if first_line(error) == finding.evidence[0] or later.kind == finding.kind:
                record.detail = "stops at the same error"
            elif later.kind == "unclassified":
                record.detail = f"then fails: {first_line(error)}"
            else:  # draft_export got past the first problem and met the next one
                later.evidence[0] = "draft_export, past the first problem, then fails: " + later.evidence[0]
                record.detail = f"then fails: {later.kind}"
                session.add(later)
            return
        failures = program._report.failures
        record.detail = f"{len(failures)} problem(s)"
    refine_by_origin(finding, program)
    refine_by_guards(finding, failures)
    report_draft_failures(session, failures, finding, program)


# (entry chosen by the message, where the value came from) -> the entry of that cause.
_BY_ORIGIN = {
    ("data-dependent-int", VALUES): "data-dependent-value-int",
    ("data-dependent-guard", SIZES): "data-dependent-int",
}


def refine_by_origin(finding: Finding, program=None) -> None:
    """A data-dependent error's cause, from where the value it needed came from: the evidence gains
    the provenance, the finding the cause's entry. A program that got past the error (draft_export's,
    or the other mode's) names the inputs the read depends on; without one, the graph the failed
    export had traced still shows the read it stopped at."""
    already = any(line.startswith("provenance:") for line in finding.evidence)
    if finding.kind not in {key for key, _ in _BY_ORIGIN} or finding.exception is None or already:
        return
    frames = error_frames(finding.exception)
    if not frames:
        return
    origin = origin_at(program, frames[0]) if program is not None else None
    if origin is None:
        origin = origin_in_failed_trace(finding.exception)
    if origin is None:
        return
    finding.evidence.insert(1, origin.evidence(frames[0]))
    basis = "the traced graph shows where the value the code needed came from (the provenance line)"
    better = _BY_ORIGIN.get((finding.kind, origin.source))
    if better is not None:
        finding.reclassify(catalog.entry(better), strength=EVIDENCE, basis=basis)
    else:
        finding.strengthen(EVIDENCE, basis)


# A guard that holds only for multiples of a number: `Eq(2*TruncToInt(0.5*ToFloat(s1)), s0)` (a
# float scale of 0.5 and back), `Eq(2*((s0//2)), s0)`, `Eq(Mod(s0, 2), 0)`.
_MULTIPLE_GUARD = re.compile(
    r"\b(\d+)\*(?:TruncToInt|FloorToInt|floor)\(|\b(\d+)\*\(+\w+//\2\)|Mod\(\w+, (\d+)\)"
)


def refine_by_guards(finding: Finding, failures) -> None:
    """A constraint violation whose suggested fixes name no multiple, while a guard draft_export
    added holds only for multiples of a number: the code needs a multiple (`needs-a-multiple`)."""
    from torch.export._draft_export import FailureType

    if finding.kind != "constraints-violated":
        return
    for failure in failures:
        if failure.failure_type != FailureType.GUARD_ADDED:
            continue
        expression = failure.data["expr"]
        match = _MULTIPLE_GUARD.search(expression) if expression.startswith("Eq(") else None
        if match:
            factor = next(group for group in match.groups() if group)
            finding.evidence.insert(
                1, f"draft_export's guard `{expression}` holds only for multiples of {factor}"
            )
            finding.reclassify(
                catalog.entry("needs-a-multiple"),
                strength=EVIDENCE,
                basis=f"draft_export's guard `{expression}` holds only for multiples of {factor}",
            )
            return


def _draft_entry(failure, frame: Frame | None, program) -> str:
    from torch.export._draft_export import FailureType

    if failure.failure_type == FailureType.GUARD_ADDED:
        return "constraints-violated"
    # A relation (u0 > 2, Eq(u0, 0)) was a branch; anything else was needed as a plain int.
    key = (
        "data-dependent-guard"
        if re.search(r"[<>]|\b(Eq|Ne)\(", failure.data["expr"])
        else "data-dependent-int"
    )
    origin = origin_at(program, frame) if frame is not None else None
    return key if origin is None else _BY_ORIGIN.get((key, origin.source), key)


def report_draft_failures(session: Session, failures, finding: Finding, program) -> None:
    """Group draft_export's failures by catalog entry: sites of the export error's own entry join its
    evidence, other entries become findings of their own."""
    from torch.export._draft_export import FailureType

    groups: dict[str, tuple[Finding | None, list[str]]] = {}
    for failure in failures:
        data = failure.data
        if failure.failure_type in (FailureType.DATA_DEPENDENT_ERROR, FailureType.GUARD_ADDED):
            frames = draft_frames(data.get("user_stack", []))
            site = f"`{data['expr']}` at {frames[0]}" if frames else f"`{data['expr']}`"
            key = _draft_entry(failure, frames[0] if frames else None, program)
            if key == "constraints-violated" and finding.kind in CONSTRAINT_ENTRIES:
                key = finding.kind  # draft_export reports the violation's sites as guards it added
            elif finding.kind == "quantization-observer":
                key = finding.kind  # the observer's branches: the cause export named
            new = None if key == finding.kind else _draft_finding(key, failure)
        else:
            op = data.get("op", "?")
            if failure.failure_type == FailureType.MISSING_FAKE_KERNEL:
                key = _missing_fake_entry(op)
                site = f"torch.ops.{op} has no fake kernel (draft_export ran the real kernel instead)"
            else:
                key = "wrong-fake-kernel"
                site = f"torch.ops.{op}: fake kernel vs kernel: {data.get('reason')}"
            new = None if key == finding.kind else _draft_finding(key, failure)
        groups.setdefault(key, (new, []))[1].append(site)
    for new, sites in groups.values():
        target = new if new is not None else finding
        sites = [site for site in sites if not _already_shown(target.evidence, site)]
        if not sites:
            continue
        prefix = "draft_export: " if new is not None else "draft_export also found: "
        target.evidence += [prefix + site for site in sites[:MAX_EXTRA_SITES]]
        if len(sites) > MAX_EXTRA_SITES:
            target.evidence.append(
                f"... and {len(sites) - MAX_EXTRA_SITES} more (print `draft_export(...)._report`)"
            )
        if new is not None:
            session.add(new)


def _draft_finding(key: str, failure) -> Finding:
    """A finding for a problem draft_export met past the export error. An operator whose fake kernel
    is missing or wrong, draft_export ran and names: evidence. A guard it added, or a data-dependent
    expression, is matched to an entry by its kind alone: unproven."""
    from torch.export._draft_export import FailureType

    kind = failure.failure_type
    if kind in (FailureType.MISSING_FAKE_KERNEL, FailureType.MISMATCHED_FAKE_KERNEL):
        return Finding.from_entry(
            catalog.entry(key), [], "draft", basis="draft_export ran the operator's kernel and names it"
        )
    return Finding.from_entry(
        catalog.entry(key),
        [],
        "draft",
        strength=MESSAGE_ONLY,
        basis=f"draft_export's report lists it as {kind.name}; the doctor did not test the cause",
    )


def _missing_fake_entry(op: str) -> str:
    """The catalog entry for an operator without a fake kernel: PyTorch's own, a `custom_op` or a
    dispatcher one."""
    from torch._library.custom_ops import OPDEFS

    namespace, name = (op.split(".") + ["", ""])[:2]
    if namespace == "aten":
        return "aten-op-without-kernel"
    return "custom-op-without-fake" if f"{namespace}::{name}" in OPDEFS else "operator-without-fake"


def _already_shown(evidence: list[str], site: str) -> bool:
    """A draft site (`` `expr` at file:line in ...``) whose expression and place the evidence shows."""
    expression, _, where = site.partition(" at ")
    location = where.split(" in ")[0]
    return any(expression.strip("`") in line for line in evidence) and any(
        location in line for line in evidence
    )


def report_branches(session: Session, sites: list[BranchSite]) -> None:
    """Branches export skipped: a skipped raise or assert is a finding, any other branch a note."""
    notes = []
    for site in sites:
        if site.drops_a_check:
            evidence = [
                f"at {site.frame}",
                f"export answers True there and skips {site.skipped}, which holds: "
                + " | ".join(site.raises),
                "the exported program accepts inputs that eager PyTorch rejects",
            ]
            session.add(Finding.from_entry(catalog.entry("dropped-input-check"), evidence, "branches"))
        else:
            skipped = f"skips {site.skipped}" if site.skipped else "may take another branch"
            notes.append(
                f"under export, `{site.frame.code}` ({site.frame.location}) {skipped}, which holds no raise or assert"
            )
    session.report.notes += notes[:MAX_NOTES]
    if len(notes) > MAX_NOTES:
        session.report.notes.append(f"... and {len(notes) - MAX_NOTES} more branches that ask a compile flag")
