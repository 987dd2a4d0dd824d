"""Shared pytest fixtures."""

import random

import pytest
import torch

from booklayout import REPO_ROOT


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(autouse=True)
def _same_random_state():
    """Each test starts from the same random state, whatever ran before it in its process (under
    pytest-xdist, which tests share a process changes from run to run)."""
    random.seed(0)
    torch.manual_seed(0)
