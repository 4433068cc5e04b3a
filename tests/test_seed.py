"""The run's seed: one ``--folio-seed`` for every random suite, chosen once, printed as the
option that repeats it, with ``--folio-fsx-seed`` as its alias; failing random MTD suites
print the command that reruns them."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_result

SEED_TEST = """
import os
from pytest_folio.plugin import settings

def test_seed(request):
    s = settings(request.config)
    assert s.fsx_seed == s.seed
    name = os.environ.get("PYTEST_XDIST_WORKER", "serial")
    with open(f"seed-{name}", "a") as f:
        f.write(f"{s.seed}\\n")
"""


def _header_seed(result: pytest.RunResult) -> int:
    match = re.search(r"seed (\d+) \(rerun: --folio-seed=(\d+)\)", result.stdout.str())
    assert match is not None, result.stdout.str()
    assert match.group(1) == match.group(2)
    return int(match.group(1))


def _seen(pytester: pytest.Pytester) -> set[int]:
    """Every seed the tests saw, in any process (each writes to the test's directory)."""
    return {int(line) for p in Path(str(pytester.path)).glob("seed-*")
            for line in p.read_text().split()}


@pytest.mark.parametrize("option", ["--folio-seed=77", "--folio-fsx-seed=77"])
def test_the_seed_option_and_its_alias_set_the_runs_seed(pytester: pytest.Pytester,
                                                         option: str) -> None:
    pytester.makepyfile(SEED_TEST)
    result = pytester.runpytest(option)
    result.assert_outcomes(passed=1)
    assert _header_seed(result) == 77
    assert _seen(pytester) == {77}


def test_the_ini_key_sets_the_seed(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfolio_seed = 31\n")
    pytester.makepyfile(SEED_TEST)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert _header_seed(result) == 31


def test_a_chosen_seed_is_the_same_on_every_xdist_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SEED_TEST.replace("def test_seed(", "import pytest\n\n"
                                          "@pytest.mark.parametrize('i', range(4))\n"
                                          "def test_seed(i, "))
    result = pytester.runpytest("-n", "2")
    result.assert_outcomes(passed=4)
    assert _seen(pytester) == {_header_seed(result)}


@pytest.mark.parametrize(("args", "message"), [
    (["--folio-seed=1", "--folio-fsx-seed=2"],
     "--folio-seed and its alias --folio-fsx-seed disagree: 1 and 2"),
    (["--folio-seed=x"], "--folio-seed: must be a whole number, not 'x'"),
    (["--folio-seed=0"], "--folio-seed: must be positive, not 0"),
])
def test_bad_seeds_are_one_line_usage_errors(pytester: pytest.Pytester, args: list[str],
                                             message: str) -> None:
    pytester.makepyfile(SEED_TEST)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line.strip()] == [f"ERROR: {message}"]


@pytest.mark.usefixtures("helpers_in_subprocesses")
def test_failing_stress_and_speed_print_a_rerun_command_that_repeats_them(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken="""
import pytest
from tests.helpers import mtd_devices
from pytest_folio.suites.mtd import MTDSpeedSuite, MTDStressSuite

class TestBroken(MTDSpeedSuite, MTDStressSuite):
    stress_count = 300
    speed_passes = 1

    @pytest.fixture
    def mtd_device(self):
        return mtd_devices.PartialLastPageWrite()
""")
    result = pytester.runpytest_subprocess("-p", "pytest_folio", "--folio-orders=2",
                                           "--folio-seed=9", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    commands = {}
    for suite in ("mtd_speedtest", "mtd_stresstest"):
        match = re.search(rf"{suite}: rerun it: (python -m pytest .*)", out)
        assert match is not None, out
        commands[suite] = shlex.split(match.group(1))
    words = commands["mtd_stresstest"]
    assert words[5].endswith("test_broken.py::TestBroken::test_stress")
    assert "--folio-seed=9" in words
    assert "During handling" not in out
    first = re.search(r"mtd_stresstest: op \d+: .*", out)
    assert first is not None
    again = subprocess.run([sys.executable, *words[1:], "-p", "no:cacheprovider"],
                           cwd=Path(str(pytester.path)).parent, capture_output=True, text=True,
                           timeout=120)
    run_result(again).assert_outcomes(failed=1)
    assert first.group(0) in again.stdout
