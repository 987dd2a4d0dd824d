"""Known noise hidden on the pages: warnings and log lines filtered, kept on request (casebook.noise).

The tests go through `setup_page`, the way every page hides the noise.
"""

import logging
import warnings

import pytest

from casebook import noise
from casebook.page import setup_page

pytestmark = pytest.mark.usefixtures("restore_noise_filters")


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
    logged = [name for name, known in noise.KNOWN_NOISE.items() if known.logger is not None]
    assert len(noise._installed_log_filters) == len(logged) - 1  # all logged noise but the one kept
    with warnings.catch_warnings(record=True) as caught:
        setup_page(keep=["meshgrid-indexing"])  # an earlier call's warning filter is lifted too
        warnings.warn("torch.meshgrid: in an upcoming release", UserWarning, stacklevel=1)
    assert len(caught) == 1


def test_unknown_noise_name_says_which_names_exist():
    with pytest.raises(
        ValueError, match=r"unknown noise name\(s\) \['meshgrid'\]: choose from .*meshgrid-indexing"
    ):
        setup_page(keep=["meshgrid"])
