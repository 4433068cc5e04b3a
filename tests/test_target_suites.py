"""A run against one user target runs that target's bundled suites: a file system's
author does not need the reference flash device tested (and its timing table printed)
on every run. Naming the other target, the reference included, asks for both."""

from __future__ import annotations

import re

import pytest


def collected(pytester: pytest.Pytester, *args: str) -> dict[str, int]:
    result = pytester.runpytest("-p", "pytest_folio", "--pyargs", "pytest_folio.suites",
                                "--collect-only", "-q", "-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-2000:]
    counts: dict[str, int] = {"mtd": 0, "fs": 0}
    for line in result.stdout.lines:
        m = re.match(r"\S*(test_mtd_\w+|test_kernel_(?:mtd|powercut)|test_\w*fs\w*)\.py::",
                     line)
        if m:
            name = m.group(1)
            counts["mtd" if name.startswith(("test_mtd", "test_kernel_mtd",
                                              "test_kernel_powercut")) else "fs"] += 1
    return counts


def test_a_file_system_alone_runs_the_file_system_suites(pytester: pytest.Pytester) -> None:
    counts = collected(pytester, "--folio-fs=reference:features=full")
    assert counts["mtd"] == 0 and counts["fs"] > 100


def test_a_flash_device_alone_runs_the_flash_suites(pytester: pytest.Pytester) -> None:
    counts = collected(pytester, "--folio-mtd=reference:api=page")
    assert counts["fs"] == 0 and counts["mtd"] > 50


@pytest.mark.parametrize("args", [(), ("--folio-fs=reference", "--folio-mtd=reference")],
                         ids=["neither", "both"])
def test_neither_or_both_run_everything(pytester: pytest.Pytester,
                                        args: tuple[str, ...]) -> None:
    counts = collected(pytester, *args)
    assert counts["fs"] > 100 and counts["mtd"] > 50


def test_a_target_chosen_in_the_ini_file_counts_as_chosen(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfolio_fs = reference:features=full\n")
    counts = collected(pytester)
    assert counts["mtd"] == 0 and counts["fs"] > 100


def failures_section(lines: list[str]) -> list[str]:
    start = next(i for i, ln in enumerate(lines) if " FAILURES " in ln)
    end = next(i for i, ln in enumerate(lines) if " short test summary info " in ln)
    return lines[start:end]


@pytest.mark.parametrize("verbose", [False, True])
def test_a_differential_failure_fits_a_screen_and_v_adds_the_unshrunk_calls(
        pytester: pytest.Pytester, verbose: bool) -> None:
    """By default the shrunk calls, the first difference, the log and the replay line;
    the unshrunk run's last calls only with -v (the whole run is in the saved log)."""
    result = pytester.runpytest(
        "-p", "pytest_folio", "--pyargs", "pytest_folio.suites.test_fs_differential",
        "-p", "no:cacheprovider", "--folio-block-sizes=4k", "--folio-seed=1",
        "--folio-fs=tests.helpers.fsx_broken:StaleDataAfterTruncateUp.factory",
        "-k", "test_the_target_matches_the_oracle and not cache",
        *(["-v"] if verbose else []))
    result.assert_outcomes(failed=1)
    section = failures_section(result.stdout.lines)
    text = "\n".join(section)
    assert "\ndifferential: " in text and "\nreplay: " in text and "\nlog: " in text
    assert ("before shrinking" in text) is verbose
    if not verbose:
        assert len(section) <= 24, text
