"""Shared pytest fixtures."""

import pytest

from booklayout import REPO_ROOT


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT
