"""Shared pytest fixtures."""

import random
import warnings

import pytest
import torch

from booklayout import REPO_ROOT
from casebook.noise import KNOWN_NOISE, hide_noise


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(autouse=True)
def _same_random_state():
    """Each test starts from the same random state, whatever ran before it in its process (under
    pytest-xdist, which tests share a process changes from run to run)."""
    random.seed(0)
    torch.manual_seed(0)


@pytest.fixture
def restore_noise_filters():
    """For tests that hide the known noise (`setup_page`, `hide_noise`): the warning filters are
    restored and the log filters removed afterwards."""
    with warnings.catch_warnings():
        yield
    hide_noise(keep=list(KNOWN_NOISE))
