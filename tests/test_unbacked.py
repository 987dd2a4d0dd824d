"""Unbacked symbols: runtime asserts (casebook.introspect), the shape log (casebook.logs), synthetic detections."""

import logging

import torch
import torch.fx.experimental._config as shape_config

from casebook.introspect import runtime_asserts
from casebook.logs import SHAPE_LOGGER, shape_log
from casebook.models.synthetic import random_detections


class FirstRows(torch.nn.Module):
    def forward(self, feats, length):
        return feats.narrow(0, 0, length.item())


class Steps(torch.nn.Module):
    def forward(self, x):
        return torch.linspace(0.0, 1.0, x.shape[0])  # `steps` is an int: specialises x.shape[0]


def test_runtime_asserts_lists_the_assert_scalar_messages():
    program = torch.export.export(FirstRows(), (torch.randn(6, 4), torch.tensor(3)))
    asserts = runtime_asserts(program)
    assert any("u0 >= 0" in line for line in asserts)
    assert any("u0 <= 6" in line for line in asserts)


def test_runtime_asserts_is_empty_without_data_dependence():
    program = torch.export.export(torch.nn.Linear(3, 2), (torch.randn(2, 3),))
    assert runtime_asserts(program) == []


def test_shape_log_collects_instead_of_printing_and_restores_the_logger(capfd):
    logger = logging.getLogger(SHAPE_LOGGER)
    before = (logger.level, logger.propagate, list(logger.handlers))
    with shape_log() as log:
        torch.export.export(FirstRows(), (torch.randn(6, 4), torch.tensor(3)))
    assert log.matching("create_unbacked_symint u0")
    assert all("for more info run with" not in line for line in log.matching("runtime_assert"))
    assert "create_unbacked_symint" not in capfd.readouterr().err
    assert (logger.level, logger.propagate, list(logger.handlers)) == before


def test_user_frames_point_at_the_line_that_added_a_guard():
    x = torch.randn(5)
    with shape_log() as log:
        torch.export.export(Steps(), (x,), dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    guard = log.matching("[guard added]")[0].split(" [guard added]")[0].removeprefix("eval ")
    with shape_config.patch(extended_debug_guard_added=guard), shape_log() as log:
        torch.export.export(Steps(), (x,), dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    frames = log.user_frames(guard)
    assert frames and __file__ in frames[-1] and "torch.linspace" in frames[-1]
    assert all("site-packages" not in frame for frame in frames)


def test_random_detections_are_valid_reproducible_boxes():
    boxes, scores, labels = random_detections(50, num_classes=4, score_range=(0.2, 0.3), seed=7)
    assert boxes.shape == (50, 4) and scores.shape == (50,) and labels.shape == (50,)
    assert boxes.dtype == torch.float32 and labels.dtype == torch.int64
    assert (boxes[:, 2] > boxes[:, 0]).all() and (boxes[:, 3] > boxes[:, 1]).all() and (boxes >= 0).all()
    assert ((scores >= 0.2) & (scores <= 0.3)).all()
    assert set(labels.tolist()) <= {0, 1, 2, 3}
    again = random_detections(50, num_classes=4, score_range=(0.2, 0.3), seed=7)
    assert all(torch.equal(a, b) for a, b in zip((boxes, scores, labels), again, strict=True))


def test_guards_added_collects_guard_lines_and_prints_nothing(capsys):
    import torch

    from casebook.logs import guards_added

    class Reshape(torch.nn.Module):
        def forward(self, x):
            return x.reshape(-1) if x.shape[0] > 3 else x

    with guards_added() as guards:
        torch.export.export(Reshape(), (torch.randn(8, 2),), dynamic_shapes=({0: torch.export.Dim.AUTO},))
    assert any("[guard added]" in line and "s" in line for line in guards), guards
    assert not any("for more info run with" in line for line in guards)
    assert "[guard added]" not in capsys.readouterr().err
