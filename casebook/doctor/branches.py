"""Code that asks whether it is being exported, and what export therefore skips.

Libraries (transformers, torchvision, detectron2) and models guard eager-only work with
``if not torch.compiler.is_compiling():``: input checks that would branch on tensor values, warnings,
debugging. During non-strict export these flags are True, so the exported program never contains
that branch. Harmless for a warning; for an input check it means the program silently accepts inputs
that eager PyTorch rejects.

`flag_spy` records every call that answered True while a block ran (non-strict export only: strict
export traces the flags with TorchDynamo), and `branch_site` reads the caller's source to find the
``if`` that consulted it and whether the branch export skipped raises or asserts.
"""

from __future__ import annotations

import ast
import functools
import itertools
import linecache
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch._dynamo
import torch._dynamo.external_utils
import torch._utils

from .frames import Frame, frame_at, is_user_code

# The functions code calls to ask "am I being compiled or exported?", by owner and attribute name.
FLAG_FUNCTIONS = (
    (torch.compiler, "is_compiling"),
    (torch.compiler, "is_exporting"),
    (torch._dynamo, "is_compiling"),
    (torch._dynamo.external_utils, "is_compiling"),
    (torch._utils, "is_compiling"),
)
_FLAG_NAMES = {name for _, name in FLAG_FUNCTIONS} | {"is_torchdynamo_compiling", "is_torchdynamo_exporting"}
# How far out from the flag's caller to look for the `if` (transformers wraps the flag in a helper).
_MAX_WRAPPERS = 3


@dataclass(frozen=True)
class BranchSite:
    """An ``if`` whose test asked a compile/export flag, and what export skipped there."""

    frame: Frame
    skipped: str  # "the if-branch", "the else-branch", or "" when the test mixes the flag with `or`
    raises: tuple[str, ...]  # the raise/assert statements in the skipped branch, as source

    @property
    def drops_a_check(self) -> bool:
        return bool(self.raises)


def _caller_frames(start) -> Iterator:
    frame = start
    while frame is not None:
        yield frame
        frame = frame.f_back


def _record(sites: dict, python_frame) -> None:
    """Find the `if` (at most a few wrapper frames out) that asked the flag, once per source line."""
    # Lazily: torch's own code asks the flags often during export, and the stack is deep.
    outside = (f for f in _caller_frames(python_frame) if is_user_code(f.f_code.co_filename))
    for candidate in itertools.islice(outside, _MAX_WRAPPERS):
        path, line = candidate.f_code.co_filename, candidate.f_lineno
        site = _cached_site(path, line, candidate.f_code.co_name, len(linecache.getlines(path)))
        if site is not None:
            sites[(path, line)] = site
            return


@functools.lru_cache(maxsize=1024)
def _cached_site(path: str, line: int, function: str, size: int) -> BranchSite | None:
    return branch_site(path, line, function)


@contextmanager
def flag_spy() -> Iterator[list[BranchSite]]:
    """Record, while the block runs, every ``if`` outside torch that a compile/export flag answered
    True for. The list is filled when the block ends, also when it raises."""
    sites: dict[tuple[str, int], BranchSite] = {}
    originals = [
        (owner, name, getattr(owner, name)) for owner, name in FLAG_FUNCTIONS if hasattr(owner, name)
    ]

    def spying(original):
        @functools.wraps(original)
        def flag(*args, **kwargs):
            answer = original(*args, **kwargs)
            if answer:
                _record(sites, sys._getframe(1))
            return answer

        return flag

    found: list[BranchSite] = []
    for owner, name, original in originals:
        setattr(owner, name, spying(original))
    try:
        yield found
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
        found.extend(sites.values())


@functools.lru_cache(maxsize=256)
def _parse(path: str, size: int) -> ast.Module | None:
    try:
        return ast.parse("".join(linecache.getlines(path)))
    except (SyntaxError, ValueError):
        return None


def _asks_flag(node: ast.AST) -> ast.Call | None:
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            function = call.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            if name in _FLAG_NAMES:
                return call
    return None


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _skipped_branch(test: ast.expr, call: ast.Call) -> str:
    """Which branch a True flag rules out: ``not flag()`` (alone or in an ``and``) rules out the
    if-branch, ``flag()`` alone the else-branch; anything mixed with ``or`` is not decided here."""
    parents = _parents(test)
    node, negated = call, False
    while node is not test:
        parent = parents[node]
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
            negated = not negated
        elif isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.Or):
            return ""
        elif isinstance(parent, ast.BoolOp) and not negated:
            return ""  # `flag() and x`: neither branch is ruled out
        node = parent
    return "the if-branch" if negated else "the else-branch"


def branch_site(path: str, line: int, function: str) -> BranchSite | None:
    """The ``if`` statement at `path`:`line` whose test calls a compile/export flag, or None."""
    lines = linecache.getlines(path)
    if not lines:
        return None
    tree = _parse(path, len(lines))
    if tree is None:
        return None
    candidates = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.If | ast.IfExp) and node.test.lineno <= line <= (node.test.end_lineno or 0)
    ]
    for node in sorted(candidates, key=lambda n: n.lineno, reverse=True):
        call = _asks_flag(node.test)
        if call is None:
            continue
        skipped = _skipped_branch(node.test, call)
        if skipped == "the if-branch":
            body = node.body if isinstance(node, ast.If) else [node.body]
        elif skipped == "the else-branch":
            body = node.orelse if isinstance(node, ast.If) else [node.orelse]
        else:
            body = []
        raises = tuple(
            ast.get_source_segment("".join(lines), statement) or type(statement).__name__
            for part in body
            for statement in ast.walk(part)
            if isinstance(statement, ast.Raise | ast.Assert)
        )
        return BranchSite(frame_at(path, node.test.lineno, function), skipped, raises)
    return None
