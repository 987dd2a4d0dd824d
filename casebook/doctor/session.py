"""One doctor run: the report being written, step timing, and turning exceptions into findings."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator

from .. import catalog
from ..introspect import suggested_fixes
from .frames import error_frames, where_lines
from .report import MESSAGE_ONLY, MESSAGE_ONLY_BASIS, NOT_IN_CATALOG_TITLE, Finding, Report, Step

NO_PROGRAM = "no exported program: fix the findings above first"
_NOT_RUN = object()  # `example_output` before the program ran (None is an output a model may return)


# Some first lines run on for a paragraph; evidence is for reading.
MAX_LINE = 240


def first_line(error: BaseException) -> str:
    """``Type: first line of the message``, shortened past MAX_LINE characters."""
    text = str(error).strip()
    line = f"{type(error).__name__}: {text.splitlines()[0] if text else '(no message)'}"
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"


def error_evidence(error: BaseException) -> list[str]:
    """The error's first line, what export said it specialized and suggests (constraint violations),
    and where it happened."""
    message = str(error)
    lines = [first_line(error)]
    for name, size in re.findall(
        r"You marked (.+?) as dynamic but your code specialized it to be a constant \((\d+)\)", message
    ):
        lines.append(f"{name} was declared dynamic; the code fixed it to {size}")
    fixes = suggested_fixes(message)
    if fixes:
        lines.append("export suggests: " + "; ".join(fixes))
    return lines + where_lines(error_frames(error))


class Session:
    """The report of one `diagnose` call and the bookkeeping every step shares."""

    def __init__(self, report: Report, progress: Callable[[Step], None] | None):
        self.report = report
        self.progress = progress
        self.example_output = _NOT_RUN  # what the program returned on the example inputs

    @property
    def ran_clean(self) -> bool:
        """The program ran on the example inputs without raising."""
        return self.example_output is not _NOT_RUN

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[Step]:
        """Time a step; the body may set ``outcome`` (default "passed") and ``detail``."""
        record = Step(name, "passed")
        start = time.perf_counter()
        try:
            yield record
        finally:
            record.seconds = time.perf_counter() - start
            self._log(record)

    def skip(self, name: str, reason: str) -> None:
        self._log(Step(name, "not run", 0.0, reason))

    def _log(self, record: Step) -> None:
        self.report.steps.append(record)
        if self.progress is not None:
            self.progress(record)

    def classified(self, error: BaseException, stage: str, step: str, context: str = "") -> Finding:
        """The catalog's finding for `error` raised at `stage`, or an unclassified one."""
        entry = catalog.classify(error, stage)
        evidence = error_evidence(error)
        if context:
            evidence[0] = f"{context} {evidence[0]}"
        if entry is None:
            title = f"{NOT_IN_CATALOG_TITLE}: {catalog.STAGES[stage]} raised {type(error).__name__}"
            related = [item.docname for item in catalog.related(error, stage)]
            return Finding.unclassified(title, evidence, step, error, related=related)
        return Finding.from_entry(
            entry, evidence, step, error, strength=MESSAGE_ONLY, basis=MESSAGE_ONLY_BASIS
        )

    def add(self, finding: Finding) -> None:
        """Add a finding; a second one of the same kind from the same step joins the first's evidence."""
        for existing in self.report.findings:
            if (
                existing.kind == finding.kind
                and existing.step == finding.step
                and finding.kind != "unclassified"
            ):
                existing.evidence += [line for line in finding.evidence if line not in existing.evidence]
                return
        self.report.add(finding)
