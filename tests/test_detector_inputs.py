"""detector_inputs: the bad-input expectations fail loudly when a call does something else.

The expectations themselves run on every builder on the detection zoo page (through
`export_and_compare`).
"""

import pytest
import torch

from casebook.models.detector_inputs import EXPECTED, RUNS, bad_inputs, outcome
from casebook.models.records import MODELS


def refuse(images):
    raise TypeError("Expected input images to be of floating type")


def test_an_expected_error_is_reported_on_one_line():
    found = outcome(refuse, [], (TypeError, "floating type"))
    assert found == "TypeError: Expected input images to be of floating type"


def test_a_call_that_runs_where_an_error_was_expected_fails():
    with pytest.raises(AssertionError, match="TypeError"):
        outcome(lambda images: None, [], (TypeError, "floating type"))


def test_another_error_where_a_run_was_expected_is_not_swallowed():
    with pytest.raises(TypeError, match="floating type"):
        outcome(refuse, [], RUNS)


def test_every_case_has_three_expectations_and_the_exceptions_name_real_cases():
    cases = bad_inputs("fasterrcnn_resnet50_fpn", 65)
    assert cases.keys() == EXPECTED.keys()
    assert all(len(expected) == 3 for expected in EXPECTED.values())
    # a record's exception replaces the eager column of a real case
    exceptions = [(case, raised) for r in MODELS.values() for case, raised in r.bad_input_exceptions.items()]
    assert exceptions and all(case in EXPECTED and len(raised) == 2 for case, raised in exceptions)
    assert cases["one pixel below the range"][0].shape[1] == 64
    assert cases["uint8 pixels, 0 to 255"][0].dtype == torch.uint8
