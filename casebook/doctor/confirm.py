"""Confirm a cause by its fix: apply what the catalog entry says to do and export again.

A message is not a cause. "Constraints violated" has several (a size the code fixes, a multiple it
needs, a feature map it assumes is not 1 pixel), and the message alone does not say which. When
export names the fix itself ("Suggested fixes: h = 64"), the doctor applies it with torch's own
`refine_dynamic_shapes_from_suggested_fixes` and exports again:

- export passes: the finding is *confirmed*, with the fixes that made it pass as its basis. The
  `not-one-guard` entry is the case where those fixes are *not* enough, so a `!= 1` guard in a message
  whose fixes do pass was not the cause: the finding goes to `constraints-violated`, confirmed.
- export still fails: `not-one-guard` keeps its page with that as evidence; for the others the
  message stays the only basis, and the report says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import catalog
from ..introspect import suggested_fixes
from .report import CONFIRMED, EVIDENCE, Finding
from .session import Session, first_line

STEP = "suggested fixes"
# The entries of export's "Constraints violated" message, which carries "Suggested fixes" when it can.
CONSTRAINT_ENTRIES = frozenset({"constraints-violated", "needs-a-multiple", "not-one-guard"})
# Applying one round of fixes can reveal the next violation, which suggests its own fixes.
MAX_ROUNDS = 2


def confirm_with_suggested_fixes(
    session: Session,
    finding: Finding | None,
    dynamic_shapes: Any,
    export_again: Callable[[Any], tuple[Any, BaseException | None]],
) -> None:
    """Export again with the `dynamic_shapes` export suggests (`export_again(spec)` returns
    ``(program, None)`` or ``(None, error)``) and record what that says about `finding`'s cause."""
    if finding is None or finding.kind not in CONSTRAINT_ENTRIES or finding.exception is None:
        return
    from torch.export.dynamic_shapes import refine_dynamic_shapes_from_suggested_fixes

    message, spec, applied = str(finding.exception), dynamic_shapes, []
    with session.step(STEP) as record:
        for _ in range(MAX_ROUNDS):
            fixes = suggested_fixes(message)
            if not fixes:
                break
            try:
                # Only the fix lines: the helper reads everything after "Suggested fixes:" as fixes.
                spec = refine_dynamic_shapes_from_suggested_fixes(
                    "Suggested fixes:\n" + "\n".join(f"  {line}" for line in fixes), spec
                )
            except Exception as error:  # torch's helper cannot apply every fix it prints (`y = 32 - x`)
                record.outcome = "failed"
                record.detail = f"torch could not apply its own fixes: {first_line(error)}"
                return
            applied += fixes
            _, error = export_again(spec)
            if error is None:
                record.detail = f"export passes with {'; '.join(applied)}"
                _confirmed(finding, applied)
                return
            message = str(error)
            if "Constraints violated" not in message:
                break
        record.outcome = "failed"
        record.detail = (
            f"export still fails with {'; '.join(applied)}" if applied else "the message suggests no fix"
        )
    if finding.kind == "not-one-guard" and applied:
        finding.strengthen(
            EVIDENCE,
            "the message holds a `!= 1` guard, and export still fails with the fixes it suggests "
            f"({'; '.join(applied)}), as this entry says it will",
        )


def _confirmed(finding: Finding, applied: list[str]) -> None:
    basis = f"export passed once the doctor applied the fixes export suggests: {'; '.join(applied)}"
    if finding.kind == "not-one-guard":  # that entry is the case where these fixes are not enough
        finding.reclassify(
            catalog.entry("constraints-violated"),
            strength=CONFIRMED,
            basis=basis + " (so the `!= 1` guard in the message was not what stopped it)",
        )
    else:
        finding.strengthen(CONFIRMED, basis)
    finding.evidence.append(f"export passes with: {'; '.join(applied)}")
