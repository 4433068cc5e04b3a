"""--folio-timeout: a test that hangs fails with where it hung, and the run goes on."""

from __future__ import annotations

import pytest

HANGS = """
import os
import time

def spin():
    while True:
        pass

def test_spins():
    spin()

def test_blocks_in_the_kernel(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    os.open(tmp_path / "fifo", os.O_RDONLY)     # no writer: blocks for ever

def test_fine():
    time.sleep(0.01)
"""


def test_a_hanging_test_fails_with_its_stack_and_the_run_goes_on(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hangs=HANGS)
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                "--folio-timeout=0.5")
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines([
        "--folio-timeout: call of test_hangs.py::test_spins ran longer than 0.5 s; it was "
        "here:",
        '*test_hangs.py", line *, in spin',
        "--folio-timeout: call of test_hangs.py::test_blocks_in_the_kernel ran longer *",
        "*os.open(tmp_path / \"fifo\", os.O_RDONLY)*",
    ])
    assert "_pytest" not in result.stdout.str()


def test_no_timeout_by_default_and_a_bad_value_is_a_usage_error(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    assert pytester.runpytest("-p", "pytest_folio").ret == 0
    result = pytester.runpytest("-p", "pytest_folio", "--folio-timeout=soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.errlines[0] == "ERROR: --folio-timeout: takes a number of seconds, not 'soon'"
    assert pytester.runpytest("-p", "pytest_folio", "-o",
                              "folio_timeout=-1").errlines[0] == (
        "ERROR: ini key folio_timeout: takes a number of seconds of 0 or more, not '-1'")
