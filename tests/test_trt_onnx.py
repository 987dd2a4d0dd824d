"""TensorRT for RTX's ONNX parser and builder (`casebook.backends.tensorrt.onnx_parser`), on tiny files."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from casebook.backends.tensorrt.engine import Profile
from casebook.backends.tensorrt.onnx_parser import build_from_onnx


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)).mean((2, 3))


class Nonzero(torch.nn.Module):
    def forward(self, x):
        return (x > 0).nonzero()


def _onnx(module, args, path, dynamic_shapes=None):
    program = torch.export.export(module, args, dynamic_shapes=dynamic_shapes)
    torch.onnx.export(program, dynamo=True, verbose=False).save(str(path))
    return path


@pytest.fixture(scope="module")
def dynamic_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "small.onnx"
    return _onnx(SmallNet().eval(), (torch.randn(2, 3, 8, 8),), path, ({0: Dim("batch", min=1, max=8)},))


@pytest.mark.slow
def test_a_dynamic_file_builds_with_its_profile(dynamic_onnx):
    build = build_from_onnx(dynamic_onnx, profiles={"x": Profile((1, 3, 8, 8), (2, 3, 8, 8), (8, 3, 8, 8))})
    assert build.parsed and build.built and build.parser_errors == ()
    assert build.engine_path == dynamic_onnx.with_suffix(".engine")
    assert build.engine_path.stat().st_size == build.engine_bytes > 0
    assert build.inputs == {"x": [-1, 3, 8, 8]} and "engine built" in str(build)


@pytest.mark.slow
def test_without_a_profile_the_builder_refuses_a_dynamic_file(dynamic_onnx, tmp_path):
    build = build_from_onnx(dynamic_onnx, engine_path=tmp_path / "none.engine")
    assert build.parsed and not build.built and not (tmp_path / "none.engine").exists()
    assert "no optimization profile has been defined" in build.builder_errors[0]


@pytest.mark.slow
def test_nonzero_stops_the_parser(tmp_path):
    build = build_from_onnx(_onnx(Nonzero(), (torch.randn(4, 4),), tmp_path / "nonzero.onnx"))
    (error,) = build.parser_errors
    assert not build.parsed and not build.built
    assert error.operator == "NonZero" and error.code == "UNSUPPORTED_NODE"
    assert "NonZero plugin creator version 1 was not found" in error.description
    # The registry it searched exists and holds plugins, only not this one.
    assert build.plugin_creators and not any(name.startswith("NonZero") for name in build.plugin_creators)


@pytest.mark.slow
def test_bad_input_is_refused_with_what_to_do(dynamic_onnx, tmp_path):
    with pytest.raises(FileNotFoundError, match="write one with torch.onnx.export"):
        build_from_onnx(tmp_path / "missing.onnx")
    with pytest.raises(TypeError, match="must be a casebook.backends.tensorrt.engine.Profile"):
        build_from_onnx(dynamic_onnx, profiles={"x": (1, 3, 8, 8)})
    with pytest.raises(ValueError, match=r"profiles name inputs the file does not have: \['image'\]"):
        build_from_onnx(
            dynamic_onnx, profiles={"image": Profile((1,), (1,), (1,))}, engine_path=tmp_path / "e"
        )
