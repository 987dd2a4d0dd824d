"""casebook.backends.executorch_xnnpack: lowering a small network, running the .pte with parity, the
backbone stand-in, and the errors for bad input."""

import os
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from casebook.backends import executorch_xnnpack as et  # noqa: E402
from casebook.backends.executorch_xnnpack import (  # noqa: E402
    BackboneOnExecuTorch,
    ExecuTorchProgram,
    backbone_replaced,
    lower_to_xnnpack,
    runtime_threads,
)
from casebook.backends.partition_figure import draw_partitions  # noqa: E402
from casebook.figures import MIN_FONT_PX, smallest_font_px  # noqa: E402


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.conv(x).relu().mean(dim=(2, 3))), self.conv(x)


@pytest.fixture(scope="module")
def lowered_net(tmp_path_factory):
    torch.manual_seed(0)
    net = SmallNet().eval()
    program = torch.export.export(net, (torch.rand(2, 3, 16, 16),))
    lowered = lower_to_xnnpack(program)
    return net, lowered, lowered.save(tmp_path_factory.mktemp("et") / "small.pte")


@pytest.mark.slow
def test_lowering_delegates_the_network_and_reports_it(lowered_net):
    _, lowered, path = lowered_net
    assert lowered.delegated_subgraphs >= 1 and lowered.delegated_nodes > 0
    delegated = dict(zip(lowered.operators["operator"], lowered.operators["in XNNPACK"], strict=True))
    assert delegated["aten_convolution_default"] >= 1 and "Total" not in delegated
    assert path.stat().st_size == len(lowered.pte) and "XNNPACK subgraph(s)" in str(lowered)


@pytest.mark.slow
def test_the_pte_runs_with_parity(lowered_net):
    net, _, path = lowered_net
    program = ExecuTorchProgram(path)
    x = torch.rand(2, 3, 16, 16)
    outputs = program(x)
    for got, want in zip(outputs, net(x), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert runtime_threads() >= 1


@pytest.mark.slow
def test_bad_inputs_to_the_helpers(lowered_net, tmp_path):
    _, lowered, _ = lowered_net
    with pytest.raises(TypeError, match="takes a torch.export.ExportedProgram, got SmallNet"):
        lower_to_xnnpack(SmallNet())
    with pytest.raises(ValueError, match="ends in .pte, got 'small.bin'"):
        lowered.save(tmp_path / "small.bin")
    with pytest.raises(FileNotFoundError, match="no .pte file at .*write one with XnnpackLowering.save"):
        ExecuTorchProgram(tmp_path / "missing.pte")


class CumsumBetweenConvolutions(torch.nn.Module):
    """XNNPACK has no cumulative sum: the partition is XNNPACK, portable, XNNPACK."""

    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Conv2d(3, 4, 3), torch.nn.Conv2d(4, 4, 3)

    def forward(self, x):
        return self.second(self.first(x).relu().cumsum(dim=1))


@pytest.mark.slow
def test_the_partition_is_read_in_graph_order_and_drawn():
    net = CumsumBetweenConvolutions().eval()
    x = torch.rand(1, 3, 12, 12)
    lowered = lower_to_xnnpack(torch.export.export(net, (x,)))
    kinds = [(s.kind, s.nodes) for s in lowered.segments]
    assert kinds == [("xnnpack", ()), ("portable", ("cumsum",)), ("xnnpack", ())]
    delegated = sum(s.op_count for s in lowered.segments if s.kind == "xnnpack")
    assert (lowered.delegated_subgraphs, lowered.delegated_nodes) == (2, delegated)
    figure = draw_partitions({"conv, relu, cumsum, conv": lowered.segments}, title="t")
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert "ExecuTorch\ncumsum" in texts and "XNNPACK subgraph" in texts
    assert "ExecuTorch's portable operators" in texts and "TensorRT engine" not in texts
    assert smallest_font_px(figure) >= MIN_FONT_PX
    torch.testing.assert_close(
        ExecuTorchProgram(lowered.save(Path(tempfile.mkdtemp()) / "c.pte"))(x)[0],
        net(x),
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.slow
def test_backbone_stand_in_returns_named_features_and_is_restored(lowered_net):
    net, _, path = lowered_net
    stand_in = BackboneOnExecuTorch(ExecuTorchProgram(path), ["logits", "features"])
    features = stand_in(torch.rand(2, 3, 16, 16))
    assert list(features) == ["logits", "features"]
    with pytest.raises(RuntimeError, match="returned 2 feature maps, the detector expects"):
        BackboneOnExecuTorch(ExecuTorchProgram(path), ["only one"])(torch.rand(2, 3, 16, 16))
    holder = torch.nn.Module()
    holder.backbone = net
    with pytest.raises(KeyError), backbone_replaced(holder, stand_in):
        assert holder.backbone is stand_in
        raise KeyError("the block fails")
    assert holder.backbone is net


def test_only_the_cpuinfo_lines_are_dropped(capfd):
    with et._without_cpuinfo_lines():
        os.write(2, b"[cpuinfo_utils.cpp:71] Reading file /sys/devices/soc0/image_version\n")
        os.write(2, b"[method.cpp:1243] Error resizing tensor at input 0\n")
        os.write(1, b"[cpuinfo_utils.cpp:125] CPU info and manual query on # of cpus dont match.\n")
    captured = capfd.readouterr()
    assert "cpuinfo" not in captured.err + captured.out
    assert "Error resizing tensor at input 0" in captured.err
