"""The first cell of every page: version stamp and known-noise filters (casebook.page)."""

import datetime
import logging
import warnings

import pytest

from casebook import page
from casebook.page import KNOWN_NOISE, hide_noise, setup_page


@pytest.fixture(autouse=True)
def _restore_filters():
    with warnings.catch_warnings():
        yield
    hide_noise(keep=list(KNOWN_NOISE))  # removes the log filters again


def test_stamp_is_one_visible_line_with_the_details_folded():
    stamp = setup_page()
    html = stamp._repr_html_()
    assert repr(stamp).startswith(f"Executed {datetime.date.today().isoformat()} with torch ")
    assert html.index('class="casebook-version-stamp"') < html.index("<details>")
    assert "<table>" in html.split("<details>")[1]
    for name in KNOWN_NOISE:  # every hidden message is listed with its reason
        assert KNOWN_NOISE[name].why.split(";")[0][:30] in html.replace("&#x27;", "'")


def test_known_noise_is_hidden_and_other_warnings_are_not():
    setup_page()
    with warnings.catch_warnings(record=True) as caught:
        warnings.warn(
            "torch.meshgrid: in an upcoming release, it will be required", UserWarning, stacklevel=1
        )
        warnings.warn(
            "`create_unbacked_symint` is deprecated, please use new_dynamic_size", FutureWarning, stacklevel=1
        )
        warnings.warn("something the page is about", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["something the page is about"]


def test_known_noise_log_lines_are_dropped(caplog):
    setup_page()
    logger = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    with caplog.at_level(logging.INFO, logger=logger.name):
        logger.warning("Unable to find user code corresponding to {u0}")
        logger.info("create_unbacked_symint u0 [-int_oo, int_oo]")
    assert [r.getMessage() for r in caplog.records] == ["create_unbacked_symint u0 [-int_oo, int_oo]"]


def test_keep_leaves_a_message_visible_and_calling_twice_does_not_stack(caplog):
    setup_page()
    stamp = setup_page(keep=["unable-to-find-user-code"])
    assert "unable-to-find-user-code" not in stamp.hidden
    logger = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    with caplog.at_level(logging.INFO, logger=logger.name):
        logger.warning("Unable to find user code corresponding to {u0}")
    assert len(caplog.records) == 1
    logged = [name for name, noise in page.KNOWN_NOISE.items() if noise.logger is not None]
    assert len(page._installed_log_filters) == len(logged) - 1  # all logged noise but the one kept
    with warnings.catch_warnings(record=True) as caught:
        setup_page(keep=["meshgrid-indexing"])  # an earlier call's warning filter is lifted too
        warnings.warn("torch.meshgrid: in an upcoming release", UserWarning, stacklevel=1)
    assert len(caught) == 1


def test_unknown_noise_name_says_which_names_exist():
    with pytest.raises(
        ValueError, match=r"unknown noise name\(s\) \['meshgrid'\]: choose from .*meshgrid-indexing"
    ):
        setup_page(keep=["meshgrid"])
