"""--folio-ktap FILE: a recorded KTAP log becomes the session's items, serially and under
xdist alike, with each test's outcome, its diagnostics in the failure report, its skip
reason in the skip summary and its duration in the timing table."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from pytest_folio.ktap.log import parse

DATA = Path(__file__).parent / "data"
RUNNER = DATA / "mm-runner.ktap"


def expected_outcomes(path: Path) -> dict[str, int]:
    """What the items must report: one per test without subtests (the parser's view)."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for top in parse(path.read_text()):
        for test in top.walk():
            if not test.subtests:
                counts[test.outcome] += 1
    return counts


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_every_recorded_test_is_an_item_with_its_outcome(
        pytester: pytest.Pytester, workers: list[str]) -> None:
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                f"--folio-ktap={RUNNER}", *workers)
    result.assert_outcomes(**expected_outcomes(RUNNER))
    assert result.ret == 1       # split_huge_page_test bailed out
    if not workers:
        result.stdout.fnmatch_lines([f"collected {sum(expected_outcomes(RUNNER).values())} "
                                     "items"])


def test_a_guests_log_gives_the_items_the_guest_reported(pytester: pytest.Pytester,
                                                         tmp_path: Path) -> None:
    """The log vm --ktap kept: the same outcomes as the tests' own totals, and one timed
    row per selftest program in the saved run."""
    guest = DATA / "mm-guest-6.12.ktap"
    totals = [re.search(r"pass:(\d+) fail:(\d+) .*skip:(\d+)", line)
              for line in guest.read_text().splitlines() if "# Totals:" in line]
    passed, failed, skipped = (sum(int(m.group(i)) for m in totals if m) for i in (1, 2, 3))
    saved = tmp_path / "guest.json"
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                f"--folio-ktap={guest}", f"--folio-save={saved}")
    result.assert_outcomes(passed=passed, failed=failed, skipped=skipped)
    rows = json.loads(saved.read_text())["measurements"]
    assert sorted(r["name"] for r in rows) == [
        f"selftests: mm: {name}" for name in ("cow", "gup_longterm", "madv_populate",
                                              "mkdirty")]
    assert all(r["samples"][0] > 0 for r in rows)


def test_a_failure_shows_the_result_line_problems_and_diagnostics(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                f"--folio-ktap={RUNNER}", "-k", "split_huge_page")
    result.stdout.fnmatch_lines([
        "*mm-runner.ktap:1505: not ok 5 selftests: mm: split_huge_page_test # exit=1",
        "  bailed out: /sys/kernel/debug/split_huge_pages open failed: Operation not "
        "permitted",
        "  planned 12 subtests, 0 ran",
        "  # Planned tests != run tests (12 != 0)",
    ])
    result.assert_outcomes(failed=1, deselected=sum(expected_outcomes(RUNNER).values()) - 1)


def test_skips_are_counted_by_the_logs_reasons_and_point_at_its_lines(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                f"--folio-ktap={DATA / 'mm-cow.ktap'}", "-rs")
    result.stdout.fnmatch_lines(["*216  MADV_PAGEOUT did not work, is swap enabled?",
                                 "SKIPPED [[]1] *mm-cow.ktap:19: MADV_PAGEOUT did not work*"])


def test_ids_name_each_case_uniquely(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                f"--folio-ktap={RUNNER}", "--collect-only", "-q")
    ids = [line for line in result.stdout.lines if line.startswith("mm-runner.ktap::")]
    assert len(ids) == len(set(ids)) == sum(expected_outcomes(RUNNER).values())
    assert ("mm-runner.ktap::selftests: mm: cow::Basic COW after fork() ... with "
            "PTE-mapped THP (16 kB): No leak from parent into child") in ids


def test_timestamped_tests_reach_the_timing_table_and_the_saved_run(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_text("[    5.000000] KTAP version 1\n[    5.000001] 1..2\n"
                   "[    5.250000] ok 1 write_folios\n[    5.750000] ok 2 read_folios\n")
    saved = tmp_path / "run.json"
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                f"--folio-ktap={log}", f"--folio-save={saved}")
    result.assert_outcomes(passed=2)
    records = {r["name"]: r for r in json.loads(saved.read_text())["measurements"]}
    assert records["write_folios"]["samples"] == [pytest.approx(250.0, abs=0.01)]
    assert records["read_folios"]["samples"] == [pytest.approx(500.0, abs=0.01)]
    assert records["read_folios"]["suite"] == "ktap"
    result.stdout.fnmatch_lines(["*read_folios*"])


@pytest.mark.parametrize(("content", "message"), [
    (None, "*--folio-ktap: cannot read *missing.ktap: No such file or directory"),
    ("just words\n", "*--folio-ktap: *: no KTAP in it*it starts 'just words'"),
])
def test_a_bad_log_is_a_usage_error_in_one_line(
        pytester: pytest.Pytester, tmp_path: Path, content: str | None,
        message: str) -> None:
    path = tmp_path / "missing.ktap"
    if content is not None:
        path.write_text(content)
    result = pytester.runpytest("-p", "pytest_folio", f"--folio-ktap={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_a_runs_place_is_in_its_ids_and_starts_its_skip_reasons(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    """vm --ktap names one run of a program per place ``NAME [LABEL]``: the ids carry
    the label, and so do the skip lists, which show the log's line, not the id."""
    log = tmp_path / "runs.ktap"
    log.write_text("KTAP version 1\n1..3\n  TAP version 13\n  1..1\n"
                   "  ok 1 Pagecache folio split skipped # SKIP no large folio\n"
                   "ok 1 split [huge-tmpfs]\n"
                   "ok 2 split [64K-xfs] # SKIP the run has no xfs\n"
                   "ok 3 split # SKIP no large folio\n")
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                f"--folio-ktap={log}", "-rs", "-v")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines_random([
        "*runs.ktap::split [[]huge-tmpfs[]]::Pagecache folio split skipped SKIPPED*",
        "*runs.ktap::split [[]64K-xfs[]] SKIPPED*",
        "SKIPPED [[]1[]] *runs.ktap:5: [[]huge-tmpfs[]] no large folio",
        "SKIPPED [[]1[]] *runs.ktap:7: [[]64K-xfs[]] the run has no xfs",
        "SKIPPED [[]1[]] *runs.ktap:8: no large folio"])


PAGECACHE = DATA / "mm-pagecache-6.12.ktap"


OUTCOMES = "PASSED|FAILED|SKIPPED|XFAIL|ERROR"


def reported(lines: list[str], log: str) -> list[tuple[str, str]]:
    """(outcome, id below the log) of each item in pytest -v's lines about ``log``:
    ``ID PASSED [ 10%]`` serially, ``[gw0] [ 10%] PASSED ID`` under xdist."""
    found = []
    at = re.escape(log)
    for line in lines:
        m = re.match(rf"^{at}::(?P<id>.*) (?P<outcome>{OUTCOMES})\b", line) or re.match(
            rf"^\[gw\d+\] \[\s*\d+%\] (?P<outcome>{OUTCOMES}) {at}::(?P<id>.*?)\s*$", line)
        if m:
            found.append((m.group("outcome"), m.group("id")))
    return found


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_page_cache_guests_log_gives_the_guests_items(
        pytester: pytest.Pytester, tmp_path: Path, workers: list[str]) -> None:
    """The log of a guest that ran split_huge_page_test bare, on XFS at 4K, 16K and 64K
    blocks and on a huge=always tmpfs: --folio-ktap gives the very items (ids and
    outcomes) the guest's own session reported, serially and under xdist."""
    guest = reported(PAGECACHE.with_suffix(".items").read_text().splitlines(), "ktap.log")
    saved = tmp_path / "run.json"
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider", "-v",
                                f"--folio-ktap={PAGECACHE}", f"--folio-save={saved}",
                                *workers)
    assert sorted(reported(result.stdout.lines, PAGECACHE.name)) == sorted(guest)
    # one timing row per run, named for its place
    rows = json.loads(saved.read_text())["measurements"]
    assert sorted(r["name"] for r in rows) == sorted(
        f"selftests: mm: split_huge_page_test [{p}]"
        for p in ("4K-xfs", "16K-xfs", "64K-xfs", "huge-tmpfs"))
    counts = Counter(outcome.lower() for outcome, _ in guest)
    result.assert_outcomes(**counts)
    for place in ("4K-xfs", "16K-xfs", "64K-xfs", "huge-tmpfs"):
        assert any(name.startswith(f"selftests: mm: split_huge_page_test [{place}]::")
                   for _, name in guest), place
