"""The `fresh_interpreter` marker (tests/conftest.py): the test body runs in a child pytest."""

import os

import pytest

FRESH_CHILD = "GPUPROFILE_FRESH_CHILD"  # tests/conftest.py sets it in the child


@pytest.mark.fresh_interpreter
def test_marked_test_runs_in_a_child():
    assert os.environ.get(FRESH_CHILD) == "1"


def test_unmarked_test_runs_here():
    assert os.environ.get(FRESH_CHILD) is None
