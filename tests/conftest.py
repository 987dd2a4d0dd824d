"""Shared pytest fixtures."""

import os
import random

import pytest
import torch

from booklayout import REPO_ROOT
from casebook.build_times import share_threads


def pytest_configure(config):
    """Under pytest-xdist, each worker gets its share of the cores (`share_threads`): two workers of
    two threads each on two cores slow every parallel operator down, as two pages at a time would."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        torch.set_num_threads(share_threads(int(workers)))  # the environment is for its subprocesses


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(autouse=True)
def _same_random_state():
    """Each test starts from the same random state, whatever ran before it in its process (under
    pytest-xdist, which tests share a process changes from run to run)."""
    random.seed(0)
    torch.manual_seed(0)
