"""The doctor sends a minimal reproduction of every catalog entry to that entry's page.

The reproductions (`tests/doctor_cases.py`) follow patterns readers hit on real models; a new catalog
entry without one fails `test_every_entry_has_a_reproduction`. An error outside the catalog is
`unclassified` and sent to the playbook, and a clean model gives `ok` with no findings.
"""

import pytest
import torch
from doctor_cases import CLEAN, REPRODUCTIONS, UNCLASSIFIED, Detections, Pair, ReturnsOwnCache

from casebook import catalog, toc
from casebook.doctor import diagnose
from casebook.pytree_nodes import unregister_nodes

# The dry run and the engine build start Torch-TensorRT worker processes (seconds each), the AOTInductor
# cases compile a package and run it in workers; every other
# case takes under a second.
SLOW = {
    "aoti-unchecked-inputs",
    "aoti-size-one-refused",
    "tensorrt-unsupported-ops",
    "tensorrt-rtx-nonzero",
    "tensorrt-symbolic-split",
    "tensorrt-symbolic-fill",
    "tensorrt-made-up-profile",
    "tensorrt-opt-above-max",
    "tensorrt-min-two-lowered",
    "tensorrt-topk-over-3840",
    "tensorrt-kv-cache-strided-write",
    "tensorrt-1d-topk",
    "tensorrt-copy-at-block-edge",
    "tensorrt-opt-clash",
    "tensorrt-strided-slice-write",
    "tensorrt-negative-start-slice",
    "tensorrt-constant-query-attention",
}


@pytest.fixture(autouse=True)
def _unregister_test_pytrees():
    yield
    unregister_nodes(Pair, Detections)


def test_every_entry_has_a_reproduction():
    missing = sorted(set(catalog.BY_ID) - set(REPRODUCTIONS))
    extra = sorted(set(REPRODUCTIONS) - set(catalog.BY_ID))
    assert not missing, f"catalog entries without a reproduction in tests/doctor_cases.py: {missing}"
    assert not extra, f"reproductions of entries the catalog does not have: {extra}"


@pytest.mark.parametrize(
    "entry_id", [pytest.param(i, marks=pytest.mark.slow) if i in SLOW else i for i in REPRODUCTIONS]
)
def test_doctor_sends_the_reproduction_to_the_entry_page(entry_id):
    entry = catalog.entry(entry_id)
    report = diagnose(**REPRODUCTIONS[entry_id]())
    matching = [finding for finding in report.findings if finding.kind == entry_id]
    assert matching, f"expected a {entry_id!r} finding, got {report.kinds()}:\n{report}"
    finding = matching[0]
    assert finding.page == entry.docname
    assert finding.fix == entry.fix and finding.evidence, finding
    assert not report.ok
    unclassified = [f for f in report.findings if f.kind == "unclassified"]
    assert not unclassified, f"the reproduction of {entry_id!r} also gave unclassified findings:\n{report}"


def test_a_class_of_ones_own_named_like_a_cache_is_not_taken_for_transformers():
    report = diagnose(model=ReturnsOwnCache(), args=(torch.rand(2, 3),))
    assert report.kinds() == ["unflattenable-output"], report


def test_an_error_outside_the_catalog_is_unclassified_and_sent_to_the_playbook():
    report = diagnose(**UNCLASSIFIED())
    assert report.kinds() == ["unclassified"], report
    finding = report.findings[0]
    assert finding.page == toc.docname(catalog.PLAYBOOK_PAGE)
    assert "draft_export" in finding.fix and "TORCH_LOGS" in finding.fix and "tlparse" in finding.fix
    assert finding.evidence[0].startswith("RuntimeError: Cannot access data pointer of Tensor")
    assert any("doctor_cases.py" in line and "data_ptr()" in line for line in finding.evidence), (
        finding.evidence
    )
    assert isinstance(finding.exception, RuntimeError)


def test_a_clean_model_is_ok_with_no_findings():
    report = diagnose(**CLEAN())
    assert report.ok and report.findings == [], report
    assert [step.outcome for step in report.steps] == ["passed"] * len(report.steps)
    assert report.program is not None
    assert any("`x.shape[0]` (Dim('batch', max=64)) is dynamic" in note for note in report.notes), (
        report.notes
    )


@pytest.mark.slow
def test_a_refused_block_shows_the_builder_log_line_that_names_the_cause():
    # Torch-TensorRT says only "Could not get tensor shape."; the builder's log has several error lines.
    report = diagnose(**REPRODUCTIONS["tensorrt-negative-start-slice"]())
    (finding,) = [f for f in report.findings if f.kind == "tensorrt-negative-start-slice"]
    assert any("inherently negative length" in line for line in finding.evidence), finding.evidence
