"""The first cell of every page: the version stamp, with the noise it hid listed (casebook.page)."""

import datetime

import pytest

from casebook.noise import KNOWN_NOISE
from casebook.page import setup_page

pytestmark = pytest.mark.usefixtures("restore_noise_filters")


def test_stamp_is_one_visible_line_with_the_details_folded():
    stamp = setup_page()
    html = stamp._repr_html_()
    assert repr(stamp).startswith(f"Executed {datetime.date.today().isoformat()} with torch ")
    assert html.index('class="casebook-version-stamp"') < html.index("<details>")
    assert "<table>" in html.split("<details>")[1]
    for name in KNOWN_NOISE:  # every hidden message is listed with its reason
        assert KNOWN_NOISE[name].why.split(";")[0][:30] in html.replace("&#x27;", "'")
