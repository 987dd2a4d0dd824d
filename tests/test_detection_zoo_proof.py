"""detection_zoo_proof.start_proofs: every builder's proof started at once, collected by name.

The real proof (`export_and_compare`) runs on every builder on the detection zoo page; here the pool
runs a stand-in proof that returns what it was asked, so the tests take seconds.
"""

import pytest

from casebook.models.detection_zoo_proof import start_proofs


def asked(name, save_to, *, save_dynamic=False):
    """A stand-in proof: what the pool asked for."""
    return (name, str(save_to), save_dynamic)


@pytest.mark.slow
def test_proofs_are_collected_by_name_with_a_line_each(tmp_path, capsys):
    proofs = start_proofs(
        ["fcos_resnet50_fpn", "ssd300_vgg16"], tmp_path, save_dynamic=["ssd300_vgg16"], prove=asked
    )
    proofs.wait("ssd300_vgg16")
    proofs.wait("fcos_resnet50_fpn")
    proofs.close()
    assert proofs.results == {
        "ssd300_vgg16": ("ssd300_vgg16", str(tmp_path), True),
        "fcos_resnet50_fpn": ("fcos_resnet50_fpn", str(tmp_path), False),
    }
    out = capsys.readouterr().out
    assert "[ 1/2] ssd300_vgg16: exported and compared" in out
    assert "[ 2/2] fcos_resnet50_fpn: exported and compared" in out


@pytest.mark.parametrize(
    ("names", "keywords", "message"),
    [
        ([], {}, r"needs at least one builder name"),
        (["yolo"], {}, r"'yolo' is not a detection builder"),
        (["ssd300_vgg16", "ssd300_vgg16"], {}, r"each builder once: \['ssd300_vgg16'\] repeat"),
        (["ssd300_vgg16"], {"save_dynamic": ["fcos_resnet50_fpn"]}, r"not started: \['fcos_resnet50_fpn'\]"),
        (["ssd300_vgg16"], {"jobs": 0}, r"jobs must be at least 1, got 0"),
    ],
)
def test_bad_requests_are_refused_before_any_process_starts(tmp_path, names, keywords, message):
    with pytest.raises(ValueError, match=message):
        start_proofs(names, tmp_path, prove=asked, **keywords)


@pytest.mark.slow
def test_waiting_for_a_builder_that_was_not_started_names_those_that_were(tmp_path):
    proofs = start_proofs(["ssd300_vgg16"], tmp_path, prove=asked)
    try:
        with pytest.raises(ValueError, match=r"started: ssd300_vgg16"):
            proofs.wait("fcos_resnet50_fpn")
        with pytest.raises(ValueError, match=r"got none"):
            proofs.wait()
    finally:
        proofs.close()
