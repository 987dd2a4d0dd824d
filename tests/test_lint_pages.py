"""scripts/lint_pages.sh: ruff on the code cells of pages, with page names in what it reports."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from booklayout import REPO_ROOT, page_source

SCRIPT = REPO_ROOT / "scripts" / "lint_pages.sh"
HEADER = page_source("graph_breaks").read_text().split("\n---\n")[0] + "\n---\n"


def lint(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, BIN=str(Path(sys.executable).parent))
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, check=False)


def test_a_missing_page_is_a_usage_error():
    result = lint("no/such/page.md")
    assert result.returncode == 2
    assert "no such page: no/such/page.md" in result.stderr


@pytest.mark.slow
def test_a_page_with_a_lint_error_is_named_with_its_cell(tmp_path):
    page = tmp_path / "unused.md"
    page.write_text(HEADER + "\n```{code-cell} ipython3\nimport os\n```\n")
    result = lint(str(page))
    assert result.returncode == 1
    assert f"{page}:cell 1:1:8: F401" in result.stdout
    assert "1 page(s) need fixing" in result.stderr and "make format" in result.stderr


@pytest.mark.slow
def test_a_clean_page_passes(tmp_path):
    page = tmp_path / "clean.md"
    page.write_text(HEADER + '\n```{code-cell} ipython3\nprint("hello")\n```\n')
    result = lint(str(page))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 page(s) clean" in result.stdout
