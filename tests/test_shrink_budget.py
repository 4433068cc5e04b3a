"""--folio-shrink-seconds: one shrinking budget for every failure; 0 reports failures
unshrunk (what a run that only asks *whether* something fails wants)."""

from __future__ import annotations

import re

import pytest

BUG = "tests.helpers.fsx_broken:OExclIgnored"


def differential(pytester: pytest.Pytester, *extra: str) -> str:
    result = pytester.runpytest("-p", "pytest_folio", "--pyargs",
                                "pytest_folio.suites.test_fs_differential",
                                f"--folio-fs={BUG}", "--folio-seed=1",
                                "--folio-block-sizes=4k", "-p", "no:cacheprovider", *extra)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    return result.stdout.str()


def shown(out: str) -> tuple[int, int]:
    m = re.search(r"(\d+) of (\d+) operations show it", out)
    assert m, out[-3000:]
    return int(m.group(1)), int(m.group(2))


@pytest.mark.usefixtures("helpers_in_subprocesses")
def test_zero_reports_the_failure_unshrunk_and_says_so(pytester: pytest.Pytester) -> None:
    out = differential(pytester, "--folio-shrink-seconds=0")
    kept, whole = shown(out)
    assert kept == whole
    assert "not shrunk: --folio-shrink-seconds=0" in out


@pytest.mark.usefixtures("helpers_in_subprocesses")
def test_the_default_budget_shrinks(pytester: pytest.Pytester) -> None:
    kept, whole = shown(differential(pytester))
    assert kept < whole


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "inf"])
def test_a_bad_budget_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    result = pytester.runpytest("-p", "pytest_folio", f"--folio-shrink-seconds={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--folio-shrink-seconds: takes a number of seconds*"])
