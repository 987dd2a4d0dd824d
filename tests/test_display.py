"""The book's own output blocks (casebook.display) and how expect_error shows a caught error."""

import pytest

from casebook.checks import expect_error
from casebook.display import ExpectedError, FoldedText


def test_expected_error_is_an_escaped_error_block_with_a_text_fallback():
    block = ExpectedError("✗ raised as expected: ValueError", "bad <input> & more")
    assert '<div class="casebook-expected-error">' in block._repr_html_()
    assert "bad &lt;input&gt; &amp; more" in block._repr_html_()
    assert repr(block) == "✗ raised as expected: ValueError\n\nbad <input> & more"


def test_expect_error_displays_an_expected_error_block(capsys):
    with expect_error(ValueError, "boom"):
        raise ValueError("boom: <details>")
    out = capsys.readouterr().out  # outside a notebook, display() prints the text form
    assert out.startswith("✗ raised as expected: builtins.ValueError\n\nValueError: boom: <details>")


def test_folded_text_shows_the_head_and_folds_the_rest():
    text = "\n".join(f"line {i}" for i in range(100))
    folded = FoldedText(text, head=5, label="guards")
    assert repr(folded).splitlines() == [f"line {i}" for i in range(5)] + ["... (95 more guards)"]
    html = folded._repr_html_()
    assert "<summary>show all 100 guards</summary>" in html
    assert html.index("line 4") < html.index("<details>") < html.index("line 99")


def test_short_text_is_not_folded():
    assert "<details>" not in FoldedText("a\nb", head=5)._repr_html_()
    assert repr(FoldedText("a\nb", head=5)) == "a\nb"


def test_folded_text_needs_a_head():
    with pytest.raises(ValueError, match="head=0: show at least one line"):
        FoldedText("a", head=0)
