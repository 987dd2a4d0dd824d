"""The expected-error block (casebook.display) and how expect_error shows a caught error."""

from casebook.display import ExpectedError
from casebook.expected_errors import expect_error


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
