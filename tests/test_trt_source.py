"""Reading the installed Torch-TensorRT's source (no import) for parameter names, docs and passes."""

import sys

import pytest

from casebook.backends.tensorrt import source as trt_source


def test_compile_parameters_of_the_pinned_release():
    params = trt_source.compile_parameters()
    assert list(params)[:2] == ["exported_program", "inputs"]
    for name in ("min_block_size", "torch_executed_ops", "require_full_compilation", "dryrun"):
        assert params[name].kind == "keyword-only" and params[name].doc
    assert "GPU architectures other than" in params["hardware_compatible"].doc
    assert "future versions of TensorRT" in params["version_compatible"].doc
    assert "enable_autocast" in params and "enabled_precisions" not in params
    assert params["kwargs"].kind == "**kwargs"
    assert "torch_tensorrt" not in sys.modules  # read, not imported


def test_docstring_entries_join_continuations_and_accept_both_forms():
    doc = """Summary.

    Keyword Arguments:
        alpha (int): first line
            second line
        beta: (bool): other form
    Returns:
        x
    """
    assert trt_source.docstring_entries(doc) == {"alpha": "first line second line", "beta": "other form"}


def test_save_formats_defaults_and_passes():
    save = trt_source.function_parameters(trt_source.TOP_LEVEL_MODULE, "save")
    assert "'aot_inductor'" in save["output_format"].annotation
    assert trt_source.defaults()["MIN_BLOCK_SIZE"] == "5"
    passes = trt_source.lowering_pass_lists()
    assert "constant_fold" in passes["post_lowering_pass_list"]
    assert "remove_detach" in passes["pre_lowering_pass_list"]


def test_operators_kept_whole_by_the_decomposition_table():
    kept = trt_source.kept_whole_operators()
    assert "aten.linear.default" in kept and "aten._softmax.default" in kept


def test_decorators_and_source_of_a_converter_in_either_install():
    from casebook.backends.tensorrt.engine import rtx_site

    for site in (None, rtx_site()):
        decorators = trt_source.function_decorators(
            "dynamo/conversion/aten_ops_converters.py", "aten_ops_nonzero", site
        )
        assert decorators[0].startswith("dynamo_tensorrt_converter(torch.ops.aten.nonzero.default")
        assert decorators[1:] == ["needs_not_tensorrt_rtx"]
    body = trt_source.function_source("dynamo/conversion/impl/unary/ops.py", "nonzero")
    assert body.startswith("def nonzero(") and "ctx.net.add_non_zero(" in body and '"""' not in body


def test_a_site_without_torch_tensorrt_says_how_to_get_one(tmp_path):
    with pytest.raises(ModuleNotFoundError, match="make install TENSORRT=rtx"):
        trt_source.package_dir(tmp_path)
