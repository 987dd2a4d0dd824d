#!/usr/bin/env bash
# Lint (or, with --fix, fix) the code cells of every page with ruff, the same rules as the package.
# jupytext hands each MyST page to ruff as a notebook, so ruff applies its notebook rules (imports at
# the top of a cell, not of the file) and reports "cell N:line:col".
# Usage: scripts/lint_pages.sh [--fix] [PAGE.md ...]   (default: every page of the book)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
fix=no
if [ "${1:-}" = "--fix" ]; then fix=yes; shift; fi
if [ "$#" -eq 0 ]; then
    mapfile -t pages < <(git ls-files '*.md' ':!README.md' ':!CONTRIBUTING.md')
else
    pages=("$@")
fi
ruff="$BIN/ruff"
failed=()
for page in "${pages[@]}"; do
    if [ ! -f "$page" ]; then
        echo "lint_pages: no such page: $page (give paths of MyST-markdown pages, e.g. notebooks/graph_breaks.md)" >&2
        exit 2
    fi
    if [ "$fix" = yes ]; then
        "$BIN/jupytext" --quiet --pipe-fmt ipynb \
            --pipe "$ruff check --fix-only -q --config pyproject.toml {}" \
            --pipe "$ruff format -q --config pyproject.toml {}" "$page"
    elif ! out=$("$BIN/jupytext" --quiet --pipe-fmt ipynb \
            --check "$ruff check -q --config pyproject.toml --output-format concise {}" \
            --check "$ruff format --check -q --config pyproject.toml {}" "$page" 2>&1); then
        # jupytext names its temporary notebook PAGE-xxxxxxxx.ipynb: report the page itself.
        echo "$out" | grep -v '^\[jupytext\]' | sed -E "s#[^ ]*-[a-z0-9_]{8}\.ipynb#$page#g"
        failed+=("$page")
    fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "lint_pages: ${#failed[@]} page(s) need fixing: ${failed[*]}" >&2
    echo "lint_pages: run 'make format' to apply ruff's fixes and formatting, then review the diff" >&2
    exit 1
fi
[ "$fix" = yes ] || echo "lint_pages: ${#pages[@]} page(s) clean"
