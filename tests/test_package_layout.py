"""The package's homes: TensorRT code in one subpackage, the build report's module read by nobody in
the package, and patch sets that never import model code from above them."""

import ast
from pathlib import Path

from casebook import REPO_ROOT

PACKAGE = REPO_ROOT / "casebook"


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, relative imports resolved against its package."""
    package = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_nothing_in_the_package_imports_the_build_report_module():
    importers = [
        str(path.relative_to(REPO_ROOT))
        for path in modules()
        if path.name != "build_times.py" and "casebook.build_times" in imported_modules(path)
    ]
    assert not importers, (
        f"{importers} import casebook.build_times, the build report's module: write what a build "
        "records with casebook.build_records instead"
    )


def test_tensorrt_code_lives_in_its_subpackage():
    outside = [
        str(path.relative_to(REPO_ROOT))
        for path in modules()
        if ("trt" in path.stem or "tensorrt" in path.stem) and "tensorrt" not in path.parent.parts
    ]
    assert not outside, f"{outside}: TensorRT modules go in casebook/backends/tensorrt/"


def test_patch_sets_do_not_import_model_code():
    upward = [
        str(path.relative_to(REPO_ROOT))
        for path in (PACKAGE / "patches").glob("*.py")
        if any(module.startswith("casebook.models") for module in imported_modules(path))
    ]
    assert not upward, f"{upward} import casebook.models: a patch of the book's own model lives beside it"
