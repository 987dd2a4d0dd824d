"""casebook.patches: the one mechanism both patch sets (torchvision, detectron2) are built on."""

import types

import pytest

from casebook.patches import Patch, apply, patch_table, replace, undo_all


def original(x):
    return x


def replacement(x):
    """Doubles its input.

    Second paragraph, not shown by explain().
    """
    return 2 * x  # export-safe: the changed line


def make_patches(owner):
    return {
        "double": Patch(
            "double", "owner.f", "an error", replacement, lambda: replace(owner, "f", replacement)
        ),
        "broken": Patch("broken", "owner.g", "another", replacement, lambda: replace(owner, "missing", None)),
    }


def test_apply_installs_and_restores():
    owner = types.SimpleNamespace(f=original)
    patches = make_patches(owner)
    with apply(patches, "double") as applied:
        assert applied == ("double",)
        assert owner.f is replacement
    assert owner.f is original


def test_apply_restores_what_it_installed_when_a_later_patch_fails():
    owner = types.SimpleNamespace(f=original)
    patches = make_patches(owner)
    with pytest.raises(AttributeError), apply(patches, "double", "broken"):
        pass
    assert owner.f is original


def test_apply_restores_when_the_block_raises():
    owner = types.SimpleNamespace(f=original)
    with pytest.raises(RuntimeError), apply(make_patches(owner), "double"):
        raise RuntimeError("inside")
    assert owner.f is original


def test_unknown_names_are_refused_with_the_known_ones():
    with pytest.raises(KeyError, match=r"unknown patch\(es\) \['nope'\]; choose from \['double', 'broken'\]"):
        with apply(make_patches(types.SimpleNamespace(f=original)), "nope"):
            pass


def test_replace_restores_a_staticmethod_as_a_descriptor():
    class Owner:
        @staticmethod
        def build():
            return "original"

    undo = undo_all(replace(Owner, "build", staticmethod(lambda: "patched")))
    assert Owner.build() == "patched"
    undo()
    assert Owner.build() == "original"
    assert isinstance(Owner.__dict__["build"], staticmethod)


def test_table_and_explain():
    patches = make_patches(types.SimpleNamespace(f=original))
    assert patch_table(patches).splitlines()[2] == "| `double` | `owner.f` | an error |"
    assert (
        patches["double"].explain()
        == "double: Doubles its input.\n    return 2 * x  # export-safe: the changed line"
    )
