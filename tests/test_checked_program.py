"""CheckedProgram: each kind of bad call gets its own readable error; good calls match the program."""

from __future__ import annotations

import re

import pytest
import torch
from torch.export import Dim

from casebook.checked_program import CheckedProgram, DimContract, input_contract


class TwoInputs(torch.nn.Module):
    """An image batch and a list of two masks with the image's height and width; a keyword scale."""

    def forward(self, images, masks, *, scale):
        return images.mean(1, keepdim=True) * masks[0] * masks[1] * scale


def example():
    images = torch.rand(2, 3, 24, 40)
    masks = [torch.rand(2, 1, 24, 40), torch.rand(2, 1, 24, 40)]
    return (images, masks), {"scale": torch.tensor(2.0)}


@pytest.fixture(scope="module")
def program():
    args, kwargs = example()
    height, width = Dim("height", min=16, max=64), Dim("width", min=16)
    image_dims = {0: Dim.STATIC, 2: height, 3: width}
    mask_dims = {2: height, 3: width}
    dynamic_shapes = {"images": image_dims, "masks": [mask_dims, mask_dims], "scale": None}
    return torch.export.export(TwoInputs(), args, kwargs, dynamic_shapes=dynamic_shapes)


@pytest.fixture(scope="module")
def checked(program):
    return CheckedProgram(program, what_to_do="Resize to fit.")


def test_contract_is_read_from_the_program(program):
    spec, contracts = input_contract(program)
    assert spec.num_leaves == 4
    assert [c.name for c in contracts] == ["images", "masks[0]", "masks[1]", "scale"]
    images = contracts[0]
    assert images.dtype == torch.float32
    assert images.dims[:2] == (DimContract(size=2), DimContract(size=3))
    assert (images.dims[2].low, images.dims[2].high) == (16, 64)
    assert (images.dims[3].low, images.dims[3].high) == (16, None)
    assert images.shape_text() == "(2, 3, 16..64, 16..∞)"
    assert contracts[3].dims == ()


def test_valid_calls_match_the_program(program, checked):
    for height, width in ((24, 40), (16, 16), (64, 300)):
        images = torch.rand(2, 3, height, width)
        masks = [torch.rand(2, 1, height, width) for _ in range(2)]
        scale = torch.tensor(0.5)
        expected = program.module()(images, masks, scale=scale)
        assert torch.equal(checked(images, masks, scale=scale), expected)


def test_a_loaded_program_is_checked_the_same_way(program, tmp_path):
    torch.export.save(program, tmp_path / "p.pt2")
    checked = CheckedProgram(torch.export.load(tmp_path / "p.pt2"))
    (images, masks), kwargs = example()
    with pytest.raises(TypeError, match=r"images is torch.uint8; the program was exported for torch.float32"):
        checked((images * 255).to(torch.uint8), masks, **kwargs)


def call(checked, images=None, masks=None, **kwargs):
    (default_images, default_masks), default_kwargs = example()
    return checked(
        default_images if images is None else images,
        default_masks if masks is None else masks,
        **(default_kwargs | kwargs),
    )


def test_wrong_dtype_the_program_would_run(program, checked):
    (images, masks), kwargs = example()
    program.module()(images.double(), masks, **kwargs)  # the program itself runs it
    with pytest.raises(
        TypeError, match=r"^images is torch.float64; .* does not check dtypes itself\. .*Resize"
    ):
        call(checked, images=images.double())


def test_wrong_number_of_dimensions(checked):
    with pytest.raises(
        ValueError, match=re.escape("images has shape (3, 24, 40), 3 dimensions; the program takes 4")
    ):
        call(checked, images=torch.rand(3, 24, 40))


def test_fixed_size_differs(checked):
    with pytest.raises(ValueError, match=re.escape("images.shape[1] is 1; the program accepts exactly 3.")):
        call(checked, images=torch.rand(2, 1, 24, 40))


@pytest.mark.parametrize(("height", "bound"), [(8, "16 to 64"), (65, "16 to 64")])
def test_size_outside_the_derived_range(checked, height, bound):
    images = torch.rand(2, 3, height, 40)
    masks = [torch.rand(2, 1, height, 40)] * 2
    message = f"images.shape[2] is {height}; the program accepts {bound} (the range export derived)"
    with pytest.raises(ValueError, match=re.escape(message)):
        checked(images, masks, scale=torch.tensor(1.0))


def test_unbounded_range_says_or_more(checked):
    images = torch.rand(2, 3, 24, 8)
    with pytest.raises(ValueError, match=re.escape("images.shape[3] is 8; the program accepts 16 or more")):
        checked(images, [torch.rand(2, 1, 24, 8)] * 2, scale=torch.tensor(1.0))


def test_sizes_exported_equal_must_stay_equal(checked):
    masks = [torch.rand(2, 1, 24, 40), torch.rand(2, 1, 24, 48)]
    with pytest.raises(ValueError, match=re.escape("masks[1].shape[3] is 48 but images.shape[3] is 40")):
        call(checked, masks=masks)


def test_list_of_another_length(checked):
    (_, masks), _ = example()
    with pytest.raises(
        ValueError, match=r"^masks must be a list of 2, got a list of 1\. The number of elements is fixed"
    ):
        call(checked, masks=masks[:1])
    with pytest.raises(ValueError, match=r"masks must be a list of 2, got a list of 0"):
        call(checked, masks=[])


def test_another_container(checked):
    (_, masks), _ = example()
    with pytest.raises(TypeError, match=r"^masks must be a list of 2, got a tuple of 2\.$"):
        call(checked, masks=tuple(masks))
    with pytest.raises(
        TypeError, match=re.escape("masks must be a list of 2, got a tensor of shape (2, 1, 24, 40)")
    ):
        call(checked, masks=masks[0])


def test_a_container_where_a_tensor_was(checked):
    with pytest.raises(TypeError, match=r"^images must be a single tensor or value, got a list of 1$"):
        call(checked, images=[torch.rand(2, 3, 24, 40)])


def test_not_a_tensor(checked):
    with pytest.raises(TypeError, match=r"^images must be a tensor, got ndarray$"):
        call(checked, images=torch.rand(2, 3, 24, 40).numpy())


def test_arguments_passed_another_way(checked):
    (images, masks), kwargs = example()
    with pytest.raises(
        TypeError,
        match=r"takes 2 positional argument\(s\) \(images, masks\) and keyword arguments \['scale'\], got 1 positional and keyword arguments \['scale'\]",
    ):
        checked(images, **kwargs)
    with pytest.raises(TypeError, match=r"got 2 positional\. Pass the inputs the way they were passed"):
        checked(images, masks)
    with pytest.raises(TypeError, match=r"got 3 positional"):
        checked(images, masks, kwargs["scale"])


def test_model_checks_run_first(program):
    def no_negative(images, masks, *, scale):
        if scale < 0:
            raise ValueError("scale must not be negative")

    checked = CheckedProgram(program, no_negative)
    with pytest.raises(ValueError, match="scale must not be negative"):
        call(checked, scale=torch.tensor(-1.0))


class TwoKeywords(torch.nn.Module):
    def forward(self, x, *, offset, scale):
        return x * scale + offset


def test_keywords_in_another_order_are_checked_by_name():
    x, offset, scale = torch.rand(2, 3), torch.rand(2, 3), torch.rand(2, 3)
    program = torch.export.export(TwoKeywords(), (x,), {"offset": offset, "scale": scale})
    checked = CheckedProgram(program)
    assert torch.equal(
        checked(x, scale=scale, offset=offset), program.module()(x, offset=offset, scale=scale)
    )
    with pytest.raises(TypeError, match=r"^scale is torch.float64; "):
        checked(x, scale=scale.double(), offset=offset)


def test_run_is_what_a_call_that_passes_the_checks_runs(program):
    calls = []

    def route(*args, **kwargs):
        calls.append((args, kwargs))
        return "from the route"

    args, kwargs = example()
    guarded = CheckedProgram(program, run=route)
    assert guarded(*args, **kwargs) == "from the route" and len(calls) == 1
    with pytest.raises(TypeError, match="images is torch.float64"):
        guarded(args[0].double(), args[1], **kwargs)
    assert len(calls) == 1  # the route never saw the wrong call
    with pytest.raises(TypeError, match="run must be callable .*got str"):
        CheckedProgram(program, run="package.pt2")


@pytest.mark.parametrize(
    ("layout", "name"),
    [
        (lambda t: t.contiguous(memory_format=torch.channels_last), "channels-last"),
        (lambda t: t.transpose(-1, -2).contiguous().transpose(-1, -2), "not contiguous"),
    ],
    ids=["channels-last", "transposed"],
)
def test_contiguous_only_refuses_other_memory_layouts(program, layout, name):
    (images, masks), kwargs = example()
    other = layout(images)
    assert CheckedProgram(program).check(other, masks, **kwargs) is None  # the ExportedProgram runs it
    guarded = CheckedProgram(program, contiguous_only=True, what_to_do="Resize to fit.")
    message = re.escape(f"images is {name} (strides {other.stride()}); the compiled program reads")
    with pytest.raises(ValueError, match=message + ".*Pass images.contiguous\\(\\). Resize to fit.$"):
        guarded(other, masks, **kwargs)
    guarded(images, masks, **kwargs)
