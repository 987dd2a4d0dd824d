"""What the doctor found: findings in the order to fix them, the steps it ran, and notes.

A `Report` renders three ways: Markdown in a notebook, plain text in a terminal (``str``), and JSON
(`Report.to_json`) for scripts and CI.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from .. import catalog, toc

# Findings are listed most fundamental first: what stops export before what the program does wrong.
_RANK = {
    "eager": 0,
    "callable": 0,
    "export": 1,
    "strict": 2,
    "draft": 3,
    "training-mode": 4,
    "dynamic-dims": 4,
    "fake-constants": 4,
    "run": 5,
    "another size": 5,
    "parity": 6,
    "branches": 7,
    "decompose": 8,
    "save-load": 9,
    "runtime-asserts": 10,
    "tensorrt": 11,
}

# A cause and the symptoms it explains: when the cause is found, its symptoms are folded under it
# (a constant written in forward makes the program differ from eager, and from itself after a load).
EXPLAINS = {
    "constant-mutated": {"parity-mismatch"},
    "training-mode-baked": {"parity-mismatch"},
    "data-write-dropped": {"parity-mismatch"},
}

UNCLASSIFIED = "unclassified"
# Entries that name what was seen, not why: however sure the sighting, a cause goes before them.
SYMPTOMS = frozenset({"parity-mismatch"})
# The step that makes up inputs of its own (`casebook.doctor.input_variants`): what it finds is a
# hazard of inputs the reader did not give, so it goes after what the reader's own inputs met.
VARIANT_PROBE_STEP = "input dtypes and layouts"

# How a finding was established, strongest first; findings are ordered by it (`Report.add`).
CONFIRMED = "confirmed"  # the doctor applied the entry's fix and the failing step then passed
EVIDENCE = "evidence"  # a check saw it, or the stack or the graph shows the cause
MESSAGE_ONLY = "message only"  # the error's message matched the entry; nothing else was tested
NOT_IN_CATALOG = "not in the catalog"  # no entry matched: facts to search or report with, no cause
STRENGTHS = (CONFIRMED, EVIDENCE, MESSAGE_ONLY, NOT_IN_CATALOG)
NOT_IN_CATALOG_TITLE = "not in the book's catalog"
MESSAGE_ONLY_BASIS = "the error message matched this entry; the doctor did not test the cause"
GENERIC_FIX = (
    'run `torch.export.draft_export` to list every problem at once; `TORCH_LOGS="+dynamic"` shows where '
    "each symbol is created and each guard added; `TORCH_TRACE=/tmp/trace` and then `tlparse` give a "
    "browsable report; search the debugging playbook for the message"
)


# What `Report.to_json()` (and `python -m casebook.doctor --json`) prints, as a JSON Schema: the
# fields a script or a CI job may rely on. `tests/test_doctor.py` validates reports against it.
JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["model", "ok", "findings", "notes", "steps"],
    "additionalProperties": False,
    "properties": {
        "model": {"type": "string", "description": "the model's class name, or the name given"},
        "ok": {"type": "boolean", "description": "true when there are no findings"},
        "findings": {
            "type": "array",
            "description": "problems, root causes first",
            "items": {
                "type": "object",
                "required": [
                    "kind",
                    "title",
                    "page",
                    "fix",
                    "evidence",
                    "step",
                    "exception",
                    "strength",
                    "basis",
                    "related",
                ],
                "additionalProperties": False,
                "properties": {
                    "kind": {"type": "string", "description": "a catalog id, or 'unclassified'"},
                    "title": {"type": "string"},
                    "page": {"type": "string", "description": "the book page that reproduces and fixes it"},
                    "fix": {"type": "string", "description": "the fix, naming the API (Markdown)"},
                    "evidence": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "the error's first line, then provenance, where it happened, the "
                        "symptoms it explains",
                    },
                    "step": {"type": "string", "description": "the doctor step that met it"},
                    "strength": {
                        "enum": list(STRENGTHS),
                        "description": "how the cause was established: 'confirmed' (its fix applied, the "
                        "failing step passed), 'evidence' (a check saw it, or the stack or graph shows it), "
                        "'message only' (the message matched; nothing tested), 'not in the catalog'",
                    },
                    "basis": {
                        "type": "string",
                        "description": "how the doctor established it, in a sentence",
                    },
                    "related": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "pages about similar errors, listed as related, not as the cause",
                    },
                    "exception": {
                        "type": ["string", "null"],
                        "description": "the exception's qualified class name, when one was raised",
                    },
                },
            },
        },
        "notes": {"type": "array", "items": {"type": "string"}, "description": "facts that are not problems"},
        "steps": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "outcome", "seconds", "detail"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string"},
                    "outcome": {"enum": ["passed", "failed", "not run"]},
                    "seconds": {"type": "number", "minimum": 0},
                    "detail": {"type": "string"},
                },
            },
        },
    },
}


@dataclass
class Finding:
    """One problem: its catalog id (``kind``), the page that fixes it, the fix, and the evidence.

    ``evidence`` holds the error's first line (or what a check saw) and where it happened: the frame
    outside torch, and the reader's own frame when that one is in a library. ``step`` is the doctor
    step that met it; ``exception`` the raw exception, when there was one, and ``exception_name`` its
    qualified class name (kept when a finding comes back from a step run in a child process, whose
    exceptions stay there). ``strength`` says how the cause was established (`STRENGTHS`) and
    ``basis`` how, in a sentence; ``related`` lists pages about similar errors for a finding the
    catalog does not know (read as related, not as the cause).
    """

    kind: str
    title: str
    page: str
    fix: str
    evidence: list[str]
    step: str
    exception: BaseException | None = field(default=None, repr=False)
    exception_name: str | None = field(default=None, repr=False)
    strength: str = EVIDENCE
    basis: str = ""
    related: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.strength not in STRENGTHS:
            raise ValueError(f"unknown strength {self.strength!r}; one of {', '.join(STRENGTHS)}")
        if self.exception is not None and self.exception_name is None:
            kind = type(self.exception)
            self.exception_name = f"{kind.__module__}.{kind.__qualname__}"

    def without_exception(self) -> Finding:
        """A copy that can cross a process boundary: the exception's name stays, the object does not."""
        return replace(self, exception=None, evidence=list(self.evidence), related=list(self.related))

    @classmethod
    def from_entry(
        cls,
        entry: catalog.Entry,
        evidence: list[str],
        step: str,
        exception: BaseException | None = None,
        *,
        strength: str = EVIDENCE,
        basis: str = "",
    ) -> Finding:
        """A finding of `entry`; by default one a check of the doctor saw (`EVIDENCE`)."""
        basis = basis or (f"seen by the doctor's `{step}` check" if strength == EVIDENCE else "")
        return cls(
            entry.id,
            entry.title,
            entry.docname,
            entry.fix,
            evidence,
            step,
            exception,
            strength=strength,
            basis=basis,
        )

    def reclassify(self, entry: catalog.Entry, *, strength: str, basis: str) -> None:
        """Send this finding to `entry` instead: evidence showed another cause behind the same message."""
        self.kind, self.title, self.page, self.fix = entry.id, entry.title, entry.docname, entry.fix
        self.strength, self.basis = strength, basis

    def refute(self, title: str, basis: str) -> None:
        """The message matched this finding's entry, and a check contradicts that entry: the finding
        becomes "not in the book's catalog", with the entry's page listed as related, not as the cause."""
        related = [self.page, *self.related]
        self.kind, self.title, self.fix = UNCLASSIFIED, title, GENERIC_FIX
        self.page = toc.docname(catalog.PLAYBOOK_PAGE)
        self.strength, self.basis, self.related = NOT_IN_CATALOG, basis, related

    def strengthen(self, strength: str, basis: str) -> None:
        """Record a stronger way the finding's cause was established (a weaker one changes nothing)."""
        if STRENGTHS.index(strength) < STRENGTHS.index(self.strength):
            self.strength, self.basis = strength, basis

    @classmethod
    def unclassified(
        cls,
        title: str,
        evidence: list[str],
        step: str,
        exception: BaseException | None = None,
        fix: str = GENERIC_FIX,
        related: list[str] | None = None,
    ) -> Finding:
        """A problem no entry of the catalog describes: the playbook's generic steps, no cause named."""
        return cls(
            UNCLASSIFIED,
            title,
            toc.docname(catalog.PLAYBOOK_PAGE),
            fix,
            evidence,
            step,
            exception,
            strength=NOT_IN_CATALOG,
            basis="no entry of the book's catalog matches it; the facts above are for a search or a report",
            related=list(related or []),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "page": self.page,
            "fix": self.fix,
            "evidence": self.evidence,
            "step": self.step,
            "exception": self.exception_name,
            "strength": self.strength,
            "basis": self.basis,
            "related": self.related,
        }


@dataclass
class Step:
    """One thing the doctor ran: its outcome ("passed", "failed", "not run") and how long it took."""

    name: str
    outcome: str
    seconds: float = 0.0
    detail: str = ""


@dataclass(repr=False)
class Report:
    """The doctor's verdict on one model: ``ok`` when nothing was found.

    ``findings`` are problems, most fundamental first; ``notes`` are facts worth knowing that are not
    problems in themselves (the ranges of dynamic dimensions, the checks the program makes at run
    time); ``steps`` what ran, with timings; ``program`` the exported program, when export succeeded;
    ``wall_seconds`` the whole `diagnose` call.
    """

    model: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    program: Any = field(default=None, repr=False)
    wall_seconds: float | None = None  # set by `diagnose`: the whole call, child processes included

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def seconds(self) -> float:
        """How long the diagnosis took: the whole call when timed, else the sum of its steps."""
        if self.wall_seconds is not None:
            return self.wall_seconds
        return sum(step.seconds for step in self.steps)

    def kinds(self) -> list[str]:
        """The findings' catalog ids, in report order."""
        return [finding.kind for finding in self.findings]

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)
        self.order()

    def order(self) -> None:
        """A confirmed cause first, then causes shown by evidence, then the unproven (a message's
        match, or what the catalog does not know), then symptoms; within each, most fundamental
        first (`_RANK`): an export error the catalog does not know goes before what draft_export
        met after it."""
        self.findings.sort(key=_order_key)

    def fold_symptoms(self) -> None:
        """Root causes first: a finding another one explains (`EXPLAINS`) becomes evidence of it."""
        for cause in [f for f in self.findings if f.kind in EXPLAINS]:
            symptoms = [f for f in self.findings if f.kind in EXPLAINS[cause.kind]]
            for symptom in symptoms:
                cause.evidence.append(f"explains [{symptom.kind}]: {symptom.evidence[0]}")
                self.findings.remove(symptom)
            if symptoms:
                self.findings.remove(cause)
                self.findings.insert(0, cause)

    # ---------------------------------------------------------------- renderings
    def _verdict(self) -> str:
        if self.ok:
            return f"{self.model}: exports and runs clean ({self.seconds:.1f} s)"
        count = len(self.findings)
        return f"{self.model}: {count} finding{'s' * (count != 1)} ({self.seconds:.1f} s)"

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        out = [self._verdict(), ""]
        for number, finding in enumerate(self.findings, 1):
            out.append(f"{number}. [{finding.kind}] {finding.title}")
            out += [f"   {line}" for line in finding.evidence]
            out.append(f"   {finding.strength}: {_plain(finding.basis)}")
            out.append(f"   fix: {_plain(finding.fix)}")
            out.append(f"   read: {finding.page}")
            if finding.related:
                out.append(f"   related (not the cause): {', '.join(finding.related)}")
            out.append("")
        if self.notes:
            out.append("Notes:")
            out += [f"  - {_plain(note)}" for note in self.notes]
            out.append("")
        out.append("Steps:")
        out += [f"  {line}" for line in self._step_lines()]
        return "\n".join(out)

    def _step_lines(self) -> list[str]:
        """One line per step that ran; the steps that did not run share one line with the reason."""
        ran = [step for step in self.steps if step.outcome != "not run"]
        width = max((len(step.name) for step in ran), default=0)
        lines = [
            f"{step.name:<{width}}  {step.outcome:<6} {step.seconds:6.1f} s"
            + (f"  {step.detail}" if step.detail else "")
            for step in ran
        ]
        skipped: dict[str, list[str]] = {}
        for step in self.steps:
            if step.outcome == "not run":
                skipped.setdefault(step.detail, []).append(step.name)
        for reason, names in skipped.items():
            lines += [f"not run: {', '.join(names)}", f"  ({reason})"]
        return lines

    def _repr_markdown_(self) -> str:
        out = [f"**{_escape(self._verdict())}**", ""]
        for number, finding in enumerate(self.findings, 1):
            out.append(f"{number}. `{finding.kind}`: **{_escape(finding.title)}**")
            out += [f"   - {_code(line)}" for line in finding.evidence]
            out.append(f"   - *{finding.strength}*: {_escape(finding.basis)}")
            out.append(f"   - fix: {finding.fix}")
            # A path from the book's root: a link on the built site, and in Jupyter started at the root.
            out.append(f"   - read: [{finding.page}](/{finding.page}.md)")
            if finding.related:
                links = ", ".join(f"[{page}](/{page}.md)" for page in finding.related)
                out.append(f"   - related, not the cause: {links}")
        if self.notes:
            out += ["", "Notes:", ""] + [f"- {note}" for note in self.notes]
        out += ["", "Steps:", "", "```text", *self._step_lines(), "```"]
        return "\n".join(out)

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "ok": self.ok,
            "findings": [finding.as_dict() for finding in self.findings],
            "notes": self.notes,
            "steps": [
                {"name": s.name, "outcome": s.outcome, "seconds": round(s.seconds, 3), "detail": s.detail}
                for s in self.steps
            ],
        }

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.as_dict(), **({"indent": 2} | kwargs))


# Where a finding goes: a confirmed cause, then one with evidence, then the rest (a message's match and
# what the catalog does not know are equally unproven), then symptoms.
_PLACE = {CONFIRMED: 0, EVIDENCE: 1, MESSAGE_ONLY: 2, NOT_IN_CATALOG: 2}


def _order_key(finding: Finding) -> tuple[int, int]:
    place = 3 if finding.kind in SYMPTOMS or finding.step == VARIANT_PROBE_STEP else _PLACE[finding.strength]
    return place, _RANK.get(finding.step, len(_RANK))


def _plain(markdown: str) -> str:
    return markdown.replace("`", "")


def _escape(text: str) -> str:
    """Markdown-escape `text` outside its code spans (inside them, a backslash would show)."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans to keep
        parts = [text.replace("`", "'")]
    for index in range(0, len(parts), 2):
        for char in "\\*_[]<>":
            parts[index] = parts[index].replace(char, "\\" + char)
    return "`".join(parts)


def _code(line: str) -> str:
    """An evidence line in Markdown: as code, unless it holds code spans of its own."""
    return _escape(line) if "`" in line else f"`{line}`"
