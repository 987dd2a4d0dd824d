"""The patch mechanism shared by every patch set: one `Patch` type, one context manager, one table."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

Undo = Callable[[], None]


def replace(owner: object, attribute: str, replacement: object) -> Undo:
    """Set ``owner.attribute = replacement`` and return the function that puts the original back.

    The original is read from ``owner.__dict__`` when it is defined there, so a ``staticmethod`` or
    ``classmethod`` is restored as the descriptor it was, not as the function it wraps. An attribute
    that ``owner`` only inherits (a class that uses its base class's ``forward``) is deleted again
    on undo, so the class inherits it as before.
    """
    inherited = attribute not in vars(owner)
    original = getattr(owner, attribute) if inherited else owner.__dict__[attribute]
    setattr(owner, attribute, replacement)

    def undo() -> None:
        if inherited:
            delattr(owner, attribute)
        else:
            setattr(owner, attribute, original)

    return undo


def undo_all(*undos: Undo) -> Undo:
    """One undo for several replacements, undone in reverse order."""

    def undo() -> None:
        for one in reversed(undos):
            one()

    return undo


@dataclass(frozen=True)
class Patch:
    """One export-safe change: what it replaces, the error it fixes, and how to install it.

    ``install()`` makes the change and returns its undo. ``replacement`` is the function a page
    shows (pages include its source with ``literalinclude``): its lines marked ``# export-safe`` are
    the ones that differ from the original.
    """

    name: str
    replaces: str
    fixes: str
    replacement: Callable[..., Any]
    install: Callable[[], Undo]

    def explain(self) -> str:
        """The first paragraph of the replacement's docstring and its lines marked ``# export-safe``."""
        summary = (inspect.getdoc(self.replacement) or "").split("\n\n")[0]
        changed = [
            line.strip() for line in inspect.getsource(self.replacement).splitlines() if "export-safe" in line
        ]
        return f"{self.name}: {summary}\n" + "\n".join(f"    {line}" for line in changed)


def check_names(patches: Mapping[str, Patch], names: tuple[str, ...]) -> tuple[str, ...]:
    """The chosen names (every patch when none are given), or a KeyError naming the unknown ones."""
    chosen = names or tuple(patches)
    unknown = [name for name in chosen if name not in patches]
    if unknown:
        raise KeyError(f"unknown patch(es) {unknown}; choose from {list(patches)}")
    return chosen


@contextmanager
def apply(patches: Mapping[str, Patch], *names: str) -> Iterator[tuple[str, ...]]:
    """Install the named patches of `patches` (all of them if none are named) inside the block.

    The originals are restored on exit, in reverse order, also when the block raises or when a
    later patch fails to install. Yields the applied names.
    """
    chosen = check_names(patches, names)
    undos: list[Undo] = []
    try:
        for name in chosen:
            undos.append(patches[name].install())
        yield chosen
    finally:
        for undo in reversed(undos):
            undo()


def patch_table(patches: Mapping[str, Patch]) -> str:
    """The patches as a Markdown table: name, what it replaces, the error it fixes."""
    rows = "\n".join(f"| `{p.name}` | `{p.replaces}` | {p.fixes} |" for p in patches.values())
    return "| patch | replaces | fixes |\n|---|---|---|\n" + rows
