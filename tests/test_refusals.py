"""casebook.backends.refusals: the bad inputs, how each result is judged, and a crash kept as a result."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from casebook.backends import refusals
from casebook.backends.executorch_xnnpack import error_code_names
from casebook.backends.refusals import Raw, image_cases, outcome, probe, run_here, table


def test_image_cases_cover_the_range_dtype_rank_and_layout():
    cases = dict(image_cases(torch.rand(2, 3, 16, 24), batch=(1, 8)))
    shapes = {name.split(":")[0].split(",")[0]: tuple(t.shape) for name, t in cases.items()}
    assert shapes["batch 1"] == (1, 3, 16, 24) and shapes["batch 8"] == (8, 3, 16, 24)
    assert shapes["batch 9"] == (9, 3, 16, 24) and shapes["batch 0"] == (0, 3, 16, 24)
    assert shapes["height 24"] == (2, 3, 24, 24) and shapes["3 dimensions"] == (3, 16, 24)
    assert cases["float64, a NumPy array's default"].dtype == torch.float64
    assert cases["uint8, a decoded image not yet scaled"].dtype == torch.uint8
    transposed = cases["not contiguous: a transposed view"]
    assert transposed.shape == (2, 3, 16, 24) and not transposed.is_contiguous()
    channels_last = cases["channels-last memory layout"]
    assert (
        channels_last.is_contiguous(memory_format=torch.channels_last) and not channels_last.is_contiguous()
    )


def test_image_cases_are_the_same_tensors_each_time():
    first, second = (
        image_cases(torch.rand(2, 3, 8, 8), batch=(2, 4)),
        image_cases(torch.rand(2, 3, 8, 8), batch=(2, 4)),
    )
    for (_, a), (_, b) in zip(first, second, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize(
    ("example", "batch", "message"),
    [
        (torch.rand(3, 8, 8), (1, 4), "floating-point \\(N, C, H, W\\) example, got \\(3, 8, 8\\)"),
        (torch.ones(2, 3, 8, 8, dtype=torch.uint8), (1, 4), "floating-point"),
        (torch.rand(2, 3, 8, 8), (0, 4), "1 <= min <= max"),
        (torch.rand(2, 3, 8, 8), (5, 4), "1 <= min <= max"),
    ],
)
def test_image_cases_refuse_what_they_cannot_build_from(example, batch, message):
    with pytest.raises(ValueError, match=message):
        image_cases(example, batch=batch)


def test_outcome_names_each_kind():
    eager = Raw([torch.tensor([1.0, 10.0])])
    assert outcome(Raw([torch.tensor([1.0, 10.0005])]), eager).kind == "matched"
    differed = outcome(Raw([torch.tensor([1.0, 11.0])]), eager)
    assert differed.kind == "differed" and differed.detail == "1.0e-01 of the largest output"
    assert outcome(Raw([torch.zeros(3)]), eager).detail == "shapes [(3,)], eager's [(2,)]"
    assert outcome(Raw([torch.zeros(2)]), Raw(error="RuntimeError: no")).kind == "ran, eager refused"
    refused = outcome(Raw(error="RuntimeError: too large"), eager)
    assert (refused.kind, str(refused)) == ("refused", "refused: RuntimeError: too large")
    assert str(outcome(Raw(error="crashed: SIGSEGV"), eager)) == "crashed: SIGSEGV"
    assert outcome(Raw([torch.zeros(0, 10)]), Raw([torch.zeros(0, 10)])).kind == "matched"


def test_run_here_keeps_the_error_line_and_table_lays_out_the_outcomes():
    cases = [("fine", torch.ones(2)), ("wrong", torch.ones(3))]

    def strict(x):
        if x.shape[0] != 2:
            raise ValueError("x must have 2 elements\nsecond line")
        return x * 2

    results = run_here(strict, cases)
    assert results[1].error == "ValueError: x must have 2 elements"
    laid_out = table(cases, results, {"same": results})
    assert list(laid_out["eager"]) == ["ran", "refused"]
    assert [cell.kind for cell in laid_out["same"]] == ["matched", "refused"]
    with pytest.raises(ValueError, match="1 results for 2 cases"):
        table(cases, results, {"short": results[:1]})


def test_probe_refuses_an_unknown_route_and_a_missing_file(tmp_path):
    with pytest.raises(ValueError, match="unknown route 'TorchScript'"):
        probe("TorchScript", tmp_path / "x", [])
    with pytest.raises(FileNotFoundError, match="no ONNX Runtime artifact at .*build_routes"):
        probe("ONNX Runtime", tmp_path / "missing.onnx", [])


@pytest.mark.slow
def test_probe_runs_an_exported_program_in_a_worker(tmp_path):
    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    program = torch.export.export(Double(), (torch.rand(2, 3),))
    torch.export.save(program, tmp_path / "double.pt2")
    results = probe(
        "ExportedProgram", tmp_path / "double.pt2", [("ok", torch.ones(2, 3)), ("rank", torch.ones(3))]
    )
    torch.testing.assert_close(results[0].outputs[0], torch.full((2, 3), 2.0))
    assert results[1].outputs is None and results[1].error.startswith("AssertionError: ")


def test_a_crash_is_the_result_of_its_case_and_the_next_case_runs_in_a_new_worker(tmp_path, monkeypatch):
    """A stand-in worker: the first start crashes on case 1, the second runs cases 2 and 3."""
    artifact = tmp_path / "program.pt2"
    artifact.write_bytes(b"")
    starts = []

    def fake_worker(command, **_):
        folder, start = Path(command[-2]), int(command[-1])
        starts.append(start)
        for index in range(start, 4):
            (folder / "started").write_text(str(index))
            if index == 1:
                return subprocess.CompletedProcess(command, -11, "", f"{refusals.CASE_MARKER}1\n")
            (folder / f"{index}.json").write_text('{"ran": false, "error": "RuntimeError: no"}')
        (folder / "started").unlink()
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(refusals.subprocess, "run", fake_worker)
    results = probe("ExportedProgram", artifact, [(str(i), torch.ones(1)) for i in range(4)])
    assert starts == [0, 2]
    assert [raw.error for raw in results] == [
        "RuntimeError: no",
        "crashed: SIGSEGV",
        "RuntimeError: no",
        "RuntimeError: no",
    ]


def test_a_worker_that_fails_before_its_first_case_raises_with_its_stderr(tmp_path, monkeypatch):
    artifact = tmp_path / "program.pt2"
    artifact.write_bytes(b"")
    monkeypatch.setattr(
        refusals.subprocess,
        "run",
        lambda command, **_: subprocess.CompletedProcess(command, 1, "", "ImportError: x"),
    )
    with pytest.raises(RuntimeError, match="failed before its first case \\(exit code 1\\):\nImportError: x"):
        probe("ExportedProgram", artifact, [("a", torch.ones(1))])


def test_the_runtime_log_line_is_kept_per_case():
    stderr = "\n".join(
        [
            "[cpuinfo_utils.cpp:71] Reading file /sys/devices/soc0/image_version",
            f"{refusals.CASE_MARKER}0",
            f"{refusals.CASE_MARKER}1",
            "[cpuinfo_utils.cpp:87] Failed to open midr file",
            "[method.cpp:1206] Input 0 has unexpected scalar type: expected Float but was Double.",
            "[method.cpp:1243] Error resizing tensor at input 0",
        ]
    )
    assert refusals._logs_by_case(stderr) == {
        1: "Input 0 has unexpected scalar type: expected Float but was Double."
    }


def test_executorch_error_codes_are_named_from_its_header():
    names = error_code_names()
    assert names[0x10] == "NotSupported" and names[0x12] == "InvalidArgument"


def test_a_case_is_one_tensor_or_args_and_kwargs(tmp_path):
    artifact = tmp_path / "program.pt2"
    artifact.write_bytes(b"")
    with pytest.raises(TypeError, match="a case's input must be a tensor or \\(args, kwargs\\), got list"):
        probe("ExportedProgram", artifact, [("listed", [torch.ones(1)])])
    two = run_here(lambda x, *, scale: x * scale, [("keyword", ((torch.ones(2),), {"scale": 3.0}))])
    torch.testing.assert_close(two[0].outputs[0], torch.full((2,), 3.0))
