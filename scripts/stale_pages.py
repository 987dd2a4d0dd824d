"""Drop the cached outputs of exactly the pages whose helper code changed.

Locally, Jupyter Book re-executes a page only when the page's own code cells change (jupyter-cache
in ``_build/.jupyter_cache``). A page's outputs also depend on the ``casebook`` modules it imports,
so when one of those changes, its cached outputs may no longer be what the code computes. This
script finds, for every page, the ``casebook`` modules its code cells import (and, transitively,
what those import), hashes their sources, and removes the cached outputs of the pages whose hash
changed since the last build. Pages that do not use the changed module keep their cache. Sphinx
re-reads (and so re-executes) a page only when its source is newer than its last read, so the
stale pages' sources are touched too; without that, their dropped outputs were never recomputed.

Usage: ``python scripts/stale_pages.py [--dry-run]`` (``make build`` runs it before building).
"""

from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import json
import re
import sys
from pathlib import Path

from casebook import REPO_ROOT

PACKAGE = "casebook"
CACHE = REPO_ROOT / "_build" / ".jupyter_cache"
DIGESTS = REPO_ROOT / "_build" / ".page-helper-digests.json"
# A module named in a string (``python -m casebook.backends.tensorrt._dryrun_worker``) is a dependency too.
_MODULE_IN_STRING = re.compile(rf"\b{PACKAGE}(?:\.\w+)+")


def module_path(name: str) -> Path | None:
    """The source file of package module `name`, or None when there is none."""
    base = REPO_ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported_modules(tree: ast.AST, current: str | None = None) -> set[str]:
    """Package modules named by the imports (and module-name strings) of a parsed source."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level and current is not None:
                parts = current.split(".")
                # `current` is a module; for a package __init__ the module name is the package.
                source = module_path(current)
                is_package = source is not None and source.name == "__init__.py"
                anchor = parts if is_package else parts[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.update(_MODULE_IN_STRING.findall(node.value))
    modules = set()
    for name in found:
        if name.split(".")[0] != PACKAGE:
            continue
        # `import casebook.a.b` also runs casebook/__init__ and casebook/a/__init__.
        parts = name.split(".")
        modules.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {m for m in modules if module_path(m) is not None}


@functools.cache
def _module_imports(name: str) -> frozenset[str]:
    """The package modules that module `name` imports directly (parsed once per run, not per page)."""
    source = module_path(name)
    return frozenset(_imported_modules(ast.parse(source.read_text(), filename=str(source)), name))


def closure(modules: set[str]) -> set[str]:
    """`modules` and every package module they import, transitively."""
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_module_imports(name) - seen)
    return seen


def page_code(page: Path) -> str:
    """The code cells of a MyST-markdown page, as one Python source."""
    import jupytext

    notebook = jupytext.read(page)
    return "\n\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")


def page_modules(page: Path) -> set[str]:
    try:
        tree = ast.parse(page_code(page), filename=str(page))
    except SyntaxError as error:
        raise SystemExit(
            f"stale_pages: {page}: a code cell is not valid Python ({error}); fix the cell"
        ) from error
    return closure(_imported_modules(tree))


def digest(modules: set[str]) -> str:
    hasher = hashlib.sha256()
    for name in sorted(modules):
        hasher.update(name.encode() + b"\0" + module_path(name).read_bytes() + b"\0")
    return hasher.hexdigest()


def pages() -> list[Path]:
    """The Markdown pages of the table of contents (``_toc.yml``)."""
    from casebook import toc

    found = (REPO_ROOT / f"{docname}.md" for docname in toc.docnames(REPO_ROOT))
    return sorted(path for path in found if path.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="list the stale pages, remove nothing")
    args = parser.parse_args(argv)

    current = {str(page.relative_to(REPO_ROOT)): digest(page_modules(page)) for page in pages()}
    previous = json.loads(DIGESTS.read_text()) if DIGESTS.is_file() else {}
    stale = [page for page, value in current.items() if previous.get(page) != value]
    if stale and CACHE.is_dir():
        from jupyter_cache import get_cache

        dropped = drop_cached_outputs(
            get_cache(CACHE), [REPO_ROOT / page for page in stale], dry_run=args.dry_run
        )
        if not args.dry_run:
            mark_for_rereading(dropped)
        for page in dropped:
            print(
                f"stale_pages: {page.relative_to(REPO_ROOT)}: helper code it imports changed; cached outputs dropped"
            )
    if not args.dry_run:
        DIGESTS.parent.mkdir(parents=True, exist_ok=True)
        DIGESTS.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    return 0


def mark_for_rereading(pages: list[Path]) -> None:
    """Touch the pages' sources so that Sphinx reads (and myst-nb executes) them again."""
    for page in pages:
        page.touch()


def drop_cached_outputs(cache, pages: list[Path], *, dry_run: bool = False) -> list[Path]:
    """Remove the cached executions of `pages` from a jupyter-cache; return the pages that had one.

    myst-nb caches each executed page under the page's absolute path (the record's ``uri``).
    """
    wanted = {str(page) for page in pages}
    dropped = []
    for record in cache.list_cache_records():
        if record.uri in wanted:
            dropped.append(Path(record.uri))
            if not dry_run:
                cache.remove_cache(record.pk)
    return sorted(set(dropped))


if __name__ == "__main__":
    sys.exit(main())
