"""The versions table every executed page shows."""

import torch

from casebook.env import environment, versions_table


def test_environment_names_the_pinned_stack():
    env = environment()
    assert env["torch"] == torch.__version__
    assert {"Python", "torchvision", "torch-tensorrt", "detectron2", "transformers", "Accelerator"} <= set(
        env
    )
    if not torch.cuda.is_available():
        assert env["Accelerator"].startswith("CPU only")


def test_versions_table_is_markdown():
    lines = versions_table().splitlines()
    assert lines[:2] == ["| component | version |", "|---|---|"]
    assert len(lines) == 2 + len(environment())
