"""casebook.backends.onnx_runtime: reading an ONNX file and running it like the model, and the errors
for bad input."""

import pytest
import torch
from torch.export import Dim

from casebook.backends.onnx_runtime import OnnxRuntimeProgram, declared_inputs, operator_counts, opsets


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return self.norm(self.conv(x)).relu().mean(dim=(2, 3))


@pytest.fixture(scope="module")
def small_onnx(tmp_path_factory):
    torch.manual_seed(0)
    net = SmallNet().eval()
    program = torch.export.export(net, (torch.rand(2, 3, 8, 8),), dynamic_shapes=({0: Dim("batch", max=8)},))
    path = tmp_path_factory.mktemp("onnx") / "small.onnx"
    torch.onnx.export(program, dynamo=True, verbose=False).save(str(path))
    return net, path


@pytest.mark.slow
def test_reading_the_file(small_onnx):
    _, path = small_onnx
    counts = operator_counts(path)
    assert counts["Conv"] == 1 and "BatchNormalization" not in counts
    (dims,) = declared_inputs(path).values()
    assert isinstance(dims[0], str) and dims[1:] == [3, 8, 8]
    assert opsets(path)["ai.onnx"] >= 18


@pytest.mark.slow
def test_runs_with_parity_at_two_batches(small_onnx):
    net, path = small_onnx
    program = OnnxRuntimeProgram(path, threads=1)
    for batch in (1, 5):
        x = torch.rand(batch, 3, 8, 8)
        (got,) = program(x)
        torch.testing.assert_close(got, net(x), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_bad_inputs(small_onnx, tmp_path):
    _, path = small_onnx
    with pytest.raises(FileNotFoundError, match="no ONNX file at .*torch.onnx.export"):
        operator_counts(tmp_path / "missing.onnx")
    with pytest.raises(FileNotFoundError, match="no ONNX file at"):
        OnnxRuntimeProgram(tmp_path / "missing.onnx", threads=1)
    with pytest.raises(ValueError, match="threads must be a whole number >= 1, got 0"):
        OnnxRuntimeProgram(path, threads=0)
    with pytest.raises(ValueError, match="the graph takes 1 input"):
        OnnxRuntimeProgram(path, threads=1)(torch.rand(1, 3, 8, 8), torch.rand(1, 3, 8, 8))
