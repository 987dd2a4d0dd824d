"""cpp/run_aoti and casebook.backends.aoti_cpp: a package runs from C++ with parity, and every kind of
bad input gets its own message and exit code (the runner is built by `make runner`, which `make unit`
runs first)."""

import subprocess
from pathlib import Path

import pytest
import torch
from torch.export import Dim

from casebook.backends import aoti_cpp
from casebook.backends.aoti_cpp import dynamic_section, python_shared_library, run_cpp, runner_path


class TinyNet(torch.nn.Module):
    """One image in, two pooled feature vectors out; height and width dynamic in [32, 512]."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)

    def forward(self, image):
        features = self.conv(image[None]).relu()
        return features.mean(dim=(2, 3)), features.amax(dim=(2, 3))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.manual_seed(0)
    model = TinyNet().eval()
    image = torch.rand(3, 64, 96)
    height, width = Dim("H", min=32, max=512), Dim("W", min=32, max=512)
    program = torch.export.export(model, (image,), dynamic_shapes=({1: height, 2: width},))
    package = tmp_path_factory.mktemp("tiny") / "tiny.pt2"
    torch._inductor.aoti_compile_and_package(program, package_path=str(package))
    return model, package


def run_binary(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(runner_path()), *args], capture_output=True, text=True)


@pytest.mark.slow
def test_runs_with_parity_at_two_sizes(tiny):
    model, package = tiny
    for image in (torch.rand(3, 64, 96), torch.rand(3, 200, 33)):
        result = run_cpp(package, (image,))
        assert result.ok and result.error == "", result.stderr
        expected = model(image)
        assert len(result.outputs) == 2
        for got, want in zip(result.outputs, expected, strict=True):
            torch.testing.assert_close(got, want)
        assert "input 0: [3, " in result.stdout and set(result.timings_ms) == {"load", "run"}
        assert str(result).startswith("exit code 0 (ran)")


@pytest.mark.slow
def test_usage(tiny):
    completed = run_binary()
    assert completed.returncode == 2
    assert "expected 3 paths (package, inputs, outputs), got 0" in completed.stderr
    assert "usage: run_aoti [--load-library LIB.so]..." in completed.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--verbose", "a", "b", "c"], "unknown option --verbose"),
        (["a", "b", "c", "--load-library"], "needs a path"),
        (["--threads", "0", "a", "b", "c"], "--threads needs a positive whole number"),
        (["--repeat", "x", "a", "b", "c"], "--repeat needs a positive whole number"),
        (["a", "b", "c", "--repeat"], "--repeat needs a positive whole number"),
    ],
)
def test_bad_options(tiny, args, message):
    completed = run_binary(*args)
    assert completed.returncode == 2 and message in completed.stderr


@pytest.mark.slow
def test_operator_library_that_does_not_load(tiny, tmp_path):
    _, package = tiny
    result = run_cpp(package, (torch.rand(3, 64, 64),), libraries=[tmp_path / "libmissing_ops.so"])
    assert result.returncode == 6
    assert "could not load operator library" in result.error and "libmissing_ops.so" in result.error
    assert "ldd LIB.so" in result.error


@pytest.mark.slow
def test_operator_libraries_are_loaded_before_the_package(tiny):
    model, package = tiny
    libc10 = Path(torch.__file__).parent / "lib" / "libc10.so"  # any loadable library will do
    image = torch.rand(3, 64, 64)
    result = run_cpp(package, (image,), libraries=[libc10], library_path=[libc10.parent])
    assert result.ok, result.stderr
    torch.testing.assert_close(result.outputs[1], model(image)[1])


def test_python_shared_library(monkeypatch):
    assert python_shared_library().name.startswith("libpython3")
    monkeypatch.setattr(aoti_cpp.sysconfig, "get_config_var", lambda name: 0)
    with pytest.raises(FileNotFoundError, match="linked statically.*--enable-shared"):
        python_shared_library()


@pytest.mark.slow
def test_missing_package(tiny, tmp_path):
    result = run_cpp(tmp_path / "nowhere.pt2", (torch.rand(3, 64, 64),))
    assert result.returncode == 3 and result.outputs is None
    assert "no package file at" in result.error and "aoti_compile_and_package" in result.error


def test_a_file_that_is_not_a_package(tiny, tmp_path):
    not_a_package = tmp_path / "weights.pt2"
    torch.save([torch.ones(1)], not_a_package)
    result = run_cpp(not_a_package, (torch.rand(3, 64, 64),))
    assert result.returncode == 3
    assert "could not load" in result.error and "is it an AOTInductor package" in result.error


def test_missing_inputs_file(tiny, tmp_path):
    _, package = tiny
    completed = run_binary(str(package), str(tmp_path / "nowhere.pt"), str(tmp_path / "out.pt"))
    assert completed.returncode == 4 and "no inputs file at" in completed.stderr
    assert "torch.save([tensor, ...], path)" in completed.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [({"image": torch.ones(1)}, "holds a GenericDict, not a list of tensors"), ([1, 2], "not a tensor")],
)
def test_inputs_file_that_holds_no_tensor_list(tiny, tmp_path, content, message):
    _, package = tiny
    inputs = tmp_path / "inputs.pt"
    torch.save(content, inputs)
    completed = run_binary(str(package), str(inputs), str(tmp_path / "out.pt"))
    assert completed.returncode == 4 and message in completed.stderr, completed.stderr


def test_inputs_file_that_is_not_a_torch_save_file(tiny, tmp_path):
    _, package = tiny
    inputs = tmp_path / "inputs.pt"
    inputs.write_text("not a tensor file")
    completed = run_binary(str(package), str(inputs), str(tmp_path / "out.pt"))
    assert completed.returncode == 4 and "could not read" in completed.stderr


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ((torch.rand(3, 16, 64),), "dim value is too small at 1, expected it to be >= 32, but got: 16"),
        ((torch.rand(3, 64, 600),), "dim value is too large at 2, expected to be <= 512, but got: 600"),
        ((torch.rand(1, 64, 64),), "unmatched dim value at 0, expected: 3, but got: 1"),
        (((torch.rand(3, 64, 64) * 255).to(torch.uint8),), "unmatched dtype"),
        ((torch.rand(3, 64, 64), torch.rand(3, 64, 64)), "expected inputs vector size to be 1, but got 2"),
    ],
    ids=["too-small", "too-large", "channels", "dtype", "count"],
)
def test_the_model_refuses_inputs_it_was_not_exported_for(tiny, inputs, message):
    _, package = tiny
    result = run_cpp(package, inputs)
    assert result.returncode == 5 and result.outputs is None
    assert "the model refused the inputs" in result.error and message in result.error, result.stderr


def test_a_refusal_lists_each_input_as_given(tiny):
    """The package names dtypes by number; the runner's hint names them, with shape and strides."""
    _, package = tiny
    result = run_cpp(package, (torch.rand(3, 64, 96, dtype=torch.float64),))
    assert "unmatched dtype, expected: 6(at::kFloat), but got: 7" in result.error
    assert "input 0: [3, 64, 96] Double, strides [6144, 96, 1]" in result.error, result.stderr


def test_the_inputs_keep_their_memory_layout(tiny):
    """A transposed view reaches the package as it is: refused with the checks, read wrongly without."""
    model, package = tiny
    view = torch.rand(3, 96, 64).transpose(1, 2)
    result = run_cpp(package, (view,))
    assert result.returncode == 5 and "unmatched stride value" in result.error
    assert "strides [6144, 1, 64] (not contiguous)" in result.error, result.stderr
    unchecked = run_cpp(package, (view,), check_inputs=False)
    assert unchecked.ok and not torch.allclose(unchecked.outputs[0], model(view)[0])


def test_without_the_checks_a_size_outside_the_range_runs(tiny):
    """AOTInductor's default: the package trusts its inputs (here a memory-safe case: a small image)."""
    model, package = tiny
    image = torch.rand(3, 16, 64)
    result = run_cpp(package, (image,), check_inputs=False)
    assert result.ok, result.stderr
    torch.testing.assert_close(result.outputs[0], model(image)[0])


def test_run_cpp_refuses_inputs_without_tensors(tiny, tmp_path):
    with pytest.raises(TypeError, match="needs the program's input tensors; the inputs hold int"):
        run_cpp(tmp_path / "x.pt2", (1, 2))
    with pytest.raises(TypeError, match="the inputs hold nothing"):
        run_cpp(tmp_path / "x.pt2", ())


def test_runner_not_built_says_how_to_build_it(monkeypatch, tmp_path):
    monkeypatch.setattr(aoti_cpp, "RUNNER", aoti_cpp.REPO_ROOT / "_build" / "nowhere" / "run_aoti")
    with pytest.raises(FileNotFoundError, match="the C\\+\\+ runner is not built.*make runner"):
        runner_path()


def test_dynamic_section_of_the_runner(tiny, tmp_path):
    section = dynamic_section(runner_path())
    assert "libtorch.so" in section["needed"]
    assert any(folder.endswith("torch/lib") for folder in section["runpath"])
    with pytest.raises(FileNotFoundError, match="no file at"):
        dynamic_section(tmp_path / "nothing.so")
    text = tmp_path / "notes.txt"
    text.write_text("not a library")
    with pytest.raises(ValueError, match="notes.txt is not an ELF"):
        dynamic_section(text)


def test_threads_and_repeat_report_a_median(tiny):
    _, package = tiny
    result = run_cpp(package, (torch.rand(3, 64, 64),), threads=1, repeat=5)
    assert result.ok and "repeated 5 runs on 1 thread(s)" in result.stdout
    assert result.timings_ms["min"] <= result.timings_ms["median"]
    for bad in ({"threads": 0}, {"repeat": -1}, {"threads": 1.5}):
        with pytest.raises(ValueError, match="must be a whole number"):
            run_cpp(package, (torch.rand(3, 64, 64),), **bad)


def test_resolved_libraries_of_the_runner_are_files():
    libraries = aoti_cpp.resolved_libraries(runner_path())
    assert {"libtorch.so", "libtorch_cpu.so", "libc10.so"} <= set(libraries)
    assert all(path is not None and path.is_file() for path in libraries.values())
    assert not any(name.startswith("linux-vdso") for name in libraries)


def test_resolved_libraries_names_a_missing_library(tmp_path):
    (tmp_path / "gone.cpp").write_text("int gone() { return 1; }\n")
    (tmp_path / "main.cpp").write_text("int gone();\nint main() { return gone(); }\n")
    compile_ = ["g++", "-o", "libgone.so", "-shared", "-fPIC", "gone.cpp"]
    subprocess.run(compile_, cwd=tmp_path, check=True)
    subprocess.run(["g++", "-o", "main", "main.cpp", "-L.", "-lgone"], cwd=tmp_path, check=True)
    (tmp_path / "libgone.so").unlink()
    assert aoti_cpp.resolved_libraries(tmp_path / "main")["libgone.so"] is None


def test_resolved_libraries_of_what_is_not_a_program(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file at"):
        aoti_cpp.resolved_libraries(tmp_path / "missing")
    (tmp_path / "notes.txt").write_text("not a program")
    with pytest.raises(ValueError, match="notes.txt is not a dynamically linked ELF file"):
        aoti_cpp.resolved_libraries(tmp_path / "notes.txt")
