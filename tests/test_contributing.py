"""CONTRIBUTING.md names real files, and README.md links to it.

Each recipe in CONTRIBUTING.md lists every file that a change touches. When a file is renamed or
removed, this test names the paths to update, so no recipe is left pointing nowhere. Paths are read
from inline code and links outside fenced blocks: the page skeleton and the shell examples are not
checked. Placeholders (`failures/your_page.md`, `<page dir>`) and build outputs (`_build/...`) are
skipped.
"""

import re
import subprocess

from booklayout import outside_fences
from casebook import REPO_ROOT

CONTRIBUTING = REPO_ROOT / "CONTRIBUTING.md"
README = REPO_ROOT / "README.md"
SUFFIXES = ("py", "md", "yml", "yaml", "txt", "toml", "sh", "json")
# A token made only of path characters, with a slash or a file name with one of the suffixes.
_PATH = re.compile(rf"[\w.*/-]*(/[\w.*/-]*|[\w-]\.({'|'.join(SUFFIXES)}))")
# Made by a build or a checkout, not committed: a fresh clone does not have them.
GENERATED = ("_build/", ".venv/", ".artifacts/")
PLACEHOLDERS = ("<", "your_")


def quoted_paths(text: str) -> set[str]:
    """Repository paths written in inline code or as link targets, outside fenced blocks."""
    prose = "\n".join(outside_fences(text))
    spans = re.findall(r"`([^`]+)`", prose) + re.findall(r"\]\(([^)\s]+)\)", prose)
    paths = set()
    for token in (token for span in spans for token in span.split()):
        token = token.split("::")[0]  # a pytest node id names its file
        if token.startswith(("/", "../", "http:", "https:", "#")) or token.startswith(GENERATED):
            continue
        if any(mark in token for mark in PLACEHOLDERS):
            continue
        if _PATH.fullmatch(token):
            paths.add(token)
    return paths


def exists(path: str) -> bool:
    if "*" in path:
        return any(REPO_ROOT.glob(path))
    return (REPO_ROOT / path).exists()


def test_the_parser_reads_paths_and_skips_placeholders_fences_and_build_outputs():
    text = "\n".join(
        [
            "Touch `casebook/catalog.py` and `_toc.yml`, see [the README](README.md).",
            "Not `failures/your_page.md`, `<page dir>/x.md`, `_build/html`, `.md`, `make unit`.",
            "Run `tests/test_catalog.py::test_x` and `scripts/lint_pages.sh failures/a.md`.",
            "````markdown",
            "```{code-cell} ipython3",
            "`casebook/inside_a_fence.py`",
            "```",
            "````",
            "After the fence: `tests/site/`.",
        ]
    )
    assert quoted_paths(text) == {
        "casebook/catalog.py",
        "_toc.yml",
        "README.md",
        "tests/test_catalog.py",
        "scripts/lint_pages.sh",
        "failures/a.md",
        "tests/site/",
    }


def test_every_path_in_contributing_exists():
    paths = quoted_paths(CONTRIBUTING.read_text(encoding="utf-8"))
    assert len(paths) >= 40, f"only {len(paths)} paths found in CONTRIBUTING.md: {sorted(paths)}"
    missing = sorted(path for path in paths if not exists(path))
    assert not missing, (
        f"CONTRIBUTING.md names paths that do not exist: {missing}. Update CONTRIBUTING.md: its "
        "recipes must list the files a change touches today."
    )


def test_readme_links_to_contributing():
    readme = README.read_text(encoding="utf-8")
    assert "](CONTRIBUTING.md)" in readme, "README.md must link to [CONTRIBUTING.md](CONTRIBUTING.md)"


def test_the_readme_layout_is_the_top_level_one_line_a_folder():
    readme = README.read_text(encoding="utf-8")
    table = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    named = {path.rstrip("/") for row in rows for path in re.findall(r"`([^`]+)`", row.split(" | ")[0])}
    assert all("/" not in path.rstrip("/") for path in named), f"the layout table names nested paths: {named}"
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    folders = {line.split("/", 1)[0] for line in tracked.stdout.splitlines() if "/" in line}
    missing = sorted(folder for folder in folders if not folder.startswith(".") and folder not in named)
    assert not missing, f"README.md's layout table has no line for {missing}: add one line a folder"
    assert {"book", "notebooks", "case_studies"} <= named


def test_every_recipe_ends_by_running_the_page_it_touched():
    recipes = CONTRIBUTING.read_text(encoding="utf-8").split("\n## Recipe ")[1:]
    assert len(recipes) >= 3
    for recipe in recipes:
        title = recipe.splitlines()[0]
        assert "make page PAGE=" in recipe, f"recipe {title!r} does not say to run `make page PAGE=...`"
