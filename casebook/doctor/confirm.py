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


# --------------------------------------------------------------------------------------------------
# A program that does not save for want of a serialization name
# --------------------------------------------------------------------------------------------------

NO_NAME = "NO_SERIALIZED_TYPE_NAME_FOUND"  # what torch records for a node registered without a name
SAVE_TIME_LIMIT_S = 120
# The entries of a save refused for want of a name: a class of one's own, or a structseq of torch's.
UNNAMED_CLASS_ENTRIES = frozenset({"pytree-serialization-name", "structseq-output"})


def unnamed_classes(program) -> list[type]:
    """The classes in the program's input and output structure that have no serialization name: a
    `NamedTuple` never registered with one, a pytree node registered without one."""
    import collections

    from torch.utils import _pytree as pytree

    found: list[type] = []

    def walk(spec) -> None:
        if spec.type is collections.namedtuple:  # a named tuple's spec keeps its class as the context
            if spec.context not in pytree.SUPPORTED_SERIALIZED_TYPES:
                found.append(spec.context)
        else:
            named = pytree.SUPPORTED_SERIALIZED_TYPES.get(spec.type)
            if named is not None and named.serialized_type_name == NO_NAME:
                found.append(spec.type)
        for child in spec.children():
            walk(child)

    walk(program.call_spec.in_spec)
    walk(program.call_spec.out_spec)
    return list(dict.fromkeys(found))


def confirm_serialization_name(finding: Finding, program) -> None:
    """Name the structure's unnamed classes and save again. Registrations are global, so it happens in
    a forked child; only named tuples are registered (a node registered without a name would have to
    be registered again with its functions, which is the reader's to do), so a program with other
    unnamed classes keeps the classes as evidence."""
    from ..isolation import run_forked

    if finding.kind not in UNNAMED_CLASS_ENTRIES:
        return
    classes = unnamed_classes(program)
    if not classes:
        return
    names = ", ".join(f"{cls.__module__}.{cls.__qualname__}" for cls in classes)
    finding.evidence.append(
        f"the program's inputs and outputs hold classes with no serialization name: {names}"
    )
    finding.strengthen(EVIDENCE, "the program's input and output structure holds the unnamed classes listed")
    if not all(_is_named_tuple(cls) for cls in classes):
        return
    forked = run_forked(lambda: _register_and_save(classes, program), timeout_s=SAVE_TIME_LIMIT_S)
    if forked.ok:
        finding.strengthen(
            CONFIRMED,
            "with each named tuple registered by `_register_namedtuple(cls, serialized_type_name=...)` "
            "(in a child process), the program saved and loaded",
        )
    else:
        finding.evidence.append(
            f"registered with a name, the program still does not save: {forked.describe()}"
        )


def _is_named_tuple(cls: type) -> bool:
    from torch.utils import _pytree as pytree

    return pytree.is_namedtuple_class(cls)


def _register_and_save(classes: list[type], program) -> bool:
    import io

    import torch
    from torch.utils import _pytree as pytree

    for cls in classes:
        pytree._register_namedtuple(cls, serialized_type_name=f"{cls.__module__}.{cls.__qualname__}")
    buffer = io.BytesIO()
    torch.export.save(program, buffer)
    buffer.seek(0)
    torch.export.load(buffer)
    return True
