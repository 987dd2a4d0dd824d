"""casebook.doctor.module_state: the fakes export leaves in a model's attributes are named and undone."""

import torch
from doctor_cases import CachesGridByShape
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.export import Dim

from casebook.doctor import diagnose
from casebook.doctor.module_state import holds_fake, restore_fakes, snapshot


def test_export_of_a_fresh_cache_leaves_fakes_that_restore_fakes_names_and_removes():
    model = CachesGridByShape()
    before = snapshot(model)
    torch.export.export(model, (torch.rand(2, 5),))
    assert isinstance(model.grid, FakeTensor)  # the trap itself, on 2.14.1
    assert restore_fakes(model, before) == ["grid"]
    assert not {"grid", "shape"} & set(vars(model))  # as the model came in: the class defaults show
    assert not isinstance(model(torch.rand(2, 5)), FakeTensor)


def test_a_shared_submodule_is_named_once_and_a_real_value_from_before_is_put_back():
    inner = CachesGridByShape()
    outer = torch.nn.Sequential(inner, inner)
    before = snapshot(outer)
    torch.export.export(outer, (torch.rand(3, 4),), dynamic_shapes=({0: Dim("n"), 1: Dim("m")},))
    assert restore_fakes(outer, before) == ["0.grid", "0.shape"]
    assert not {"grid", "shape"} & set(vars(inner))

    inner(torch.rand(2, 5))  # a real cache ...
    real_grid = inner.grid
    before = snapshot(outer)
    with FakeTensorMode():
        inner.grid = torch.empty(5)  # ... overwritten by a fake (torch 2.14.1 restores its own case)
    assert restore_fakes(outer, before) == ["0.grid"] and inner.grid is real_grid


def test_what_counts_as_a_fake():
    with FakeTensorMode():
        fake = torch.empty(2)
    assert holds_fake(fake) and holds_fake((1, [fake])) and holds_fake({"a": fake})
    assert not holds_fake(torch.empty(2)) and not holds_fake(torch.Size([2, 3])) and not holds_fake(None)
    assert snapshot(lambda x: x) == {} and restore_fakes(lambda x: x, {}) == []


def test_the_doctor_names_the_fakes_and_gives_the_model_back_as_it_came():
    model = CachesGridByShape()
    report = diagnose(model, (torch.rand(2, 5),))
    assert report.kinds() == ["fake-tensors-left-in-model"], report
    assert "`grid`" in report.findings[0].evidence[0], report
    assert not {"grid", "shape"} & set(vars(model))
