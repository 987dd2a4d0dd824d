"""casebook.backends.routes: one small program down every CPU route, parity of each with eager, what
each file is tied to, the C++ timings, and the errors for bad input."""

import pytest
import torch

from casebook import REPO_ROOT
from casebook.backends import routes as routes_module
from casebook.backends.executorch_xnnpack import runtime_threads
from casebook.backends.registry import BACKENDS
from casebook.backends.routes import ROUTES, build_routes, cpp_latency, flat


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        features = self.conv(x).relu()
        return {"logits": self.head(features.mean(dim=(2, 3))), "features": features}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    torch.manual_seed(0)
    net = SmallNet().eval()
    x = torch.rand(1, 3, 16, 20)
    threads = runtime_threads()
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        routes = build_routes(
            net, torch.export.export(net, (x,)), tmp_path_factory.mktemp("routes"), threads=threads
        )
    finally:
        torch.set_num_threads(previous)
    return net, x, routes, threads


@pytest.mark.slow
def test_every_route_is_built_loaded_and_agrees_with_eager(built):
    net, x, routes, _ = built
    assert list(routes) == [
        "eager",
        *(BACKENDS[name].route for name in ROUTES),
    ]  # the registry's CPU backends
    assert len(routes) == 6
    expected = flat(net)(x)
    assert [tuple(t.shape) for t in expected] == [(1, 4), (1, 8, 16, 20)]  # the dict's order
    for name, route in routes.items():
        assert route.needs and route.tied_to, name
        if route.run is None:
            continue
        got = route.run(x)
        assert len(got) == len(expected), name
        for want, have in zip(expected, got, strict=True):
            torch.testing.assert_close(have, want, rtol=1e-4, atol=1e-4, msg=name)
    for name, route in routes.items():
        if name != "eager":
            assert route.artifact.is_file() and route.size_mib > 0 and route.build_seconds > 0, name


@pytest.mark.slow
def test_each_file_says_what_ties_it(built):
    _, _, routes, _ = built
    assert routes["ExportedProgram"].tied_to.startswith("export schema ")
    assert torch.__version__.split("+")[0] in routes["AOTInductor (Python)"].tied_to
    assert routes["AOTInductor (C++)"].artifact == routes["AOTInductor (Python)"].artifact
    assert routes["ExecuTorch + XNNPACK"].tied_to.startswith("file format ET")
    pin = next(
        line
        for line in (REPO_ROOT / "requirements.txt").read_text().splitlines()
        if line.startswith("executorch==")
    )
    assert routes["ExecuTorch + XNNPACK"].tied_to.endswith(f"read by executorch {pin.split('==')[1]}")
    assert routes["ONNX Runtime"].tied_to.startswith("opset ")


@pytest.mark.slow
def test_cpp_latency_reports_timings_and_the_outputs(built):
    net, x, routes, threads = built
    timed = cpp_latency(routes["AOTInductor (C++)"].artifact, [x], threads=threads, repeat=3)
    assert 0 < timed.min_ms <= timed.median_ms and timed.load_ms > 0 and timed.first_run_ms > 0
    torch.testing.assert_close(list(timed.outputs), flat(net)(x), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_cpp_latency_raises_with_the_programs_message(built, tmp_path):
    _, x, _, threads = built
    with pytest.raises(RuntimeError, match=r"run_aoti failed on missing\.pt2: run_aoti:"):
        cpp_latency(tmp_path / "missing.pt2", [x], threads=threads)


@pytest.mark.slow
@pytest.mark.parametrize("repeat", [0, -1])
def test_cpp_latency_needs_runs_to_time(built, repeat):
    _, x, routes, threads = built
    with pytest.raises(ValueError, match="repeat must be at least 1"):
        cpp_latency(routes["AOTInductor (C++)"].artifact, [x], threads=threads, repeat=repeat)


def test_build_routes_takes_an_exported_program(tmp_path):
    net = SmallNet().eval()
    with pytest.raises(TypeError, match="takes a torch.export.ExportedProgram, got SmallNet"):
        build_routes(net, net, tmp_path, threads=runtime_threads())


def test_build_routes_refuses_differing_thread_counts(tmp_path, monkeypatch):
    net = SmallNet().eval()
    program = torch.export.export(net, (torch.rand(1, 3, 8, 8),))
    monkeypatch.setattr(routes_module, "runtime_threads", lambda: torch.get_num_threads() + 1)
    with pytest.raises(
        ValueError, match=r"thread counts differ .*torch.set_num_threads\(runtime_threads\(\)\)"
    ):
        build_routes(net, program, tmp_path, threads=torch.get_num_threads())
    assert not list(tmp_path.iterdir())  # refused before writing anything
