"""--folio-timeout: a test that hangs fails with where it hung, and the run goes on."""

from __future__ import annotations

from pathlib import Path

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


HANGING_FACTORIES = """
import time

from pytest_folio.model.ramfs import Ramfs
from tests_helpers_ram import RamMTD


class SlowReadMTD(RamMTD):
    def read(self, offset, length):
        time.sleep(3600)


def mtd():
    return SlowReadMTD(size=2 << 20, erasesize=64 << 10)


def fs(blocksize):
    while True:
        pass
"""


@pytest.mark.parametrize("which", ["mtd", "fs"])
def test_a_factory_that_hangs_in_its_check_before_the_tests_is_one_usage_error(
        pytester: pytest.Pytester, which: str) -> None:
    """The session's factory checks run under --folio-timeout: a device whose read()
    blocks (the check catches Exception: the alarm must get through) and a factory
    that never returns are each one line naming where, not a run stalled for ever."""
    pytester.makepyfile(tests_helpers_ram=Path(__file__).parent.joinpath(
        "helpers", "mtd_devices.py").read_text(), hanging=HANGING_FACTORIES,
        test_x="def test_x():\n    pass\n")
    pytester.syspathinsert()
    option = f"--folio-{which}=hanging:{which}"
    result = pytester.runpytest_subprocess("-p", "pytest_folio", "-p", "no:cacheprovider",
                                           option, "--folio-timeout=0.5", timeout=60)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"ERROR: --folio-{which}: factory hanging:{which} did not "
                                "return within --folio-timeout=0.5 s in the check before "
                                "the tests (it was at "), errors
    assert errors[0].endswith(" in read)" if which == "mtd" else " in fs)"), errors


SWALLOWS = """
import signal
import time

def test_swallows_the_alarm():
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            time.sleep(0.05)
        except BaseException:
            pass

def test_ignores_the_alarm():
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    time.sleep(2)
"""


def test_a_test_that_swallows_or_ignores_the_alarm_still_gets_every_stack_dumped(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_swallows=SWALLOWS)
    result = pytester.runpytest_subprocess("-p", "pytest_folio", "-p", "no:cacheprovider",
                                           "--folio-timeout=0.3",
                                           timeout=60)
    err = result.stderr.str()
    # faulthandler's dump of every thread, once per test, naming the test's frame
    assert err.count("most recent call first") >= 2, err
    assert 'in test_swallows_the_alarm' in err and 'in test_ignores_the_alarm' in err, err


@pytest.mark.parametrize("value", ["1e10", "3e9", "1e300"])
def test_a_timeout_the_timers_cannot_hold_is_a_usage_error(pytester: pytest.Pytester,
                                                           value: str) -> None:
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    result = pytester.runpytest("-p", "pytest_folio", f"--folio-timeout={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.errlines[0] == (f"ERROR: --folio-timeout: {value} seconds is more than the "
                                  "timers hold (2147483647 s, some 68 years)")


def test_the_longest_timeout_works(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    result = pytester.runpytest("-p", "pytest_folio", "--folio-timeout=2147483647")
    result.assert_outcomes(passed=1)
