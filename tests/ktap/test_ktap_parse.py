"""The KTAP reader: nesting as KUnit and the kselftest runner print it, directives,
diagnostics, timestamps, and every way a log goes wrong (a plan that does not match, a
bail-out, a test that crashes mid-output, input that is not KTAP at all)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_folio.ktap.log import MAX_LOG_BYTES, KtapError, KtapTest, parse, read

DATA = Path(__file__).parent / "data"


def tree(tests: list[KtapTest]) -> list[tuple[object, ...]]:
    """(name, outcome, subtrees) of each test: the shape a reader must keep."""
    return [(t.name, t.outcome, tree(t.subtests)) for t in tests]


def totals(text: str) -> dict[str, int]:
    """The counts a kselftest prints itself (``# Totals: pass:N fail:N ... skip:N``)."""
    m = re.search(r"# Totals: pass:(\d+) fail:(\d+) xfail:(\d+) xpass:(\d+) skip:(\d+)",
                  text)
    assert m, "the log has no Totals line"
    return dict(zip(("pass", "fail", "xfail", "xpass", "skip"), map(int, m.groups()),
                    strict=True))


KUNIT = """\
KTAP version 1
1..2
    KTAP version 1
    # Subtest: folio_suite
    # module: folio_test
    1..3
    ok 1 folio_alloc_order_0
    # folio_split_keeps_data: EXPECTATION FAILED at mm/folio_test.c:42
    # Expected a == b, but a == 1, b == 2
    not ok 2 folio_split_keeps_data
        KTAP version 1
        # Subtest: folio_orders
        ok 1 order 0
        ok 2 order 2 # SKIP no memory for order 2
        ok 3 order 4
    # folio_orders: pass:2 fail:0 skip:1 total:3
    ok 3 folio_orders
# folio_suite: pass:2 fail:1 skip:0 total:3
not ok 1 folio_suite
    KTAP version 1
    # Subtest: empty_suite
    1..0
ok 2 empty_suite # SKIP nothing to run
"""


def test_kunit_nesting_keeps_every_level_and_its_outcome() -> None:
    assert tree(parse(KUNIT)) == [
        ("folio_suite", "failed", [
            ("folio_alloc_order_0", "passed", []),
            ("folio_split_keeps_data", "failed", []),
            ("folio_orders", "passed", [("order 0", "passed", []),
                                        ("order 2", "skipped", []),
                                        ("order 4", "passed", [])])]),
        ("empty_suite", "skipped", []),
    ]


def test_diagnostics_belong_to_the_result_line_after_them() -> None:
    suite = parse(KUNIT)[0]
    failed = suite.subtests[1]
    assert failed.diagnostics == [
        "folio_split_keeps_data: EXPECTATION FAILED at mm/folio_test.c:42",
        "Expected a == b, but a == 1, b == 2"]
    assert suite.subtests[0].diagnostics == []
    skipped = suite.subtests[2].subtests[1]
    assert (skipped.directive, skipped.reason) == ("SKIP", "no memory for order 2")
    assert "module: folio_test" in suite.diagnostics


def test_a_subtest_header_without_a_version_line_nests_too() -> None:
    old = ("TAP version 14\n1..1\n    # Subtest: s\n    1..2\n    ok 1 a\n"
           "    not ok 2 b\nnot ok 1 s\n")
    assert tree(parse(old)) == [("s", "failed", [("a", "passed", []),
                                                ("b", "failed", [])])]


@pytest.mark.parametrize(("line", "outcome", "directive", "reason"), [
    ("ok 1 t", "passed", "", ""),
    ("not ok 1 t", "failed", "", ""),
    ("ok 1 t # SKIP no device", "skipped", "SKIP", "no device"),
    ("not ok 1 t # SKIP no device", "skipped", "SKIP", "no device"),
    ("ok 1 t # skip lower case", "skipped", "SKIP", "lower case"),
    ("not ok 1 t # TODO known broken", "xfailed", "TODO", "known broken"),
    ("ok 1 t # TODO fixed since", "passed", "TODO", "fixed since"),
    ("not ok 1 t # XFAIL expected", "xfailed", "XFAIL", "expected"),
    ("not ok 1 t # TIMEOUT 30 seconds", "failed", "TIMEOUT", "30 seconds"),
    ("not ok 1 t # ERROR no such file", "failed", "ERROR", "no such file"),
    ("ok 1 t # rcode=0", "passed", "", "rcode=0"),            # data, not a directive
    ("not ok 1 t # FROBNICATE x", "failed", "", "FROBNICATE x"),
    ("ok 1 - t", "passed", "", ""),                            # TAP's dash
])
def test_directives_and_their_fallback(line: str, outcome: str, directive: str,
                                       reason: str) -> None:
    [test] = parse(f"KTAP version 1\n1..1\n{line}\n")
    assert (test.name, test.outcome, test.directive, test.reason) == (
        "t", outcome, directive, reason)


def test_a_bail_out_and_a_plan_that_does_not_match_are_problems() -> None:
    recorded = (DATA / "mm-split-bailout.ktap").read_text()
    [plan] = parse(recorded)
    assert plan.name == "(plan)" and plan.outcome == "failed"
    assert plan.problems == [
        "bailed out: /sys/kernel/debug/split_huge_pages open failed: Operation not "
        "permitted", "planned 12 tests, 0 ran"]


def test_numbers_that_skip_are_a_problem_of_the_group() -> None:
    tests = parse("KTAP version 1\n1..3\nok 1 a\nok 3 c\nok 4 d\n")
    assert [t.name for t in tests] == ["a", "c", "d", "(plan)"]
    assert tests[-1].problems == ["test number 3 where 2 was due (line 4)",
                                  "test number 4 where 3 was due (line 5)"]


def test_a_test_that_crashes_mid_output_fails_and_keeps_what_ran() -> None:
    crashed = ("KTAP version 1\n1..2\n    KTAP version 1\n    # Subtest: s\n    1..3\n"
               "    ok 1 a\n    # about to oops\n"
               "BUG: kernel NULL pointer dereference, address: 0000000000000008\n")
    tests = parse(crashed)
    assert [t.name for t in tests] == ["s", "(plan)"]
    s = tests[0]
    assert s.ok is None and s.outcome == "failed"
    assert [t.name for t in s.subtests] == ["a"]
    assert any("ends before this test's result line" in p for p in s.problems)
    assert "planned 3 subtests, 1 ran" in s.problems
    assert "BUG: kernel NULL pointer dereference, address: 0000000000000008" in \
        s.diagnostics
    assert tests[1].problems == ["planned 2 tests, 1 ran"]


def test_console_timestamps_give_durations_and_kernel_noise_stays_diagnostic() -> None:
    log = ("[    1.000000] KTAP version 1\n[    1.000100] 1..1\n"
           "[    1.000200]     KTAP version 1\n[    1.000300]     # Subtest: s\n"
           "[    1.000400]     1..2\n"
           "[    1.250000] random: crng init done\n"
           "[    1.500000]     ok 1 slow\n"
           "[    1.600000]     ok 2 fast\n"
           "[    1.700000] ok 1 s\n")
    [s] = parse(log)
    assert tree([s]) == [("s", "passed", [("slow", "passed", []), ("fast", "passed", [])])]
    slow, fast = s.subtests
    assert slow.duration == pytest.approx(0.5, abs=1e-3)
    assert fast.duration == pytest.approx(0.1, abs=1e-6)
    assert s.duration == pytest.approx(0.7, abs=1e-3)
    assert slow.diagnostics == ["random: crng init done"]


def test_successive_documents_read_as_one_list() -> None:
    two = "KTAP version 1\n1..1\nok 1 first\nKTAP version 1\n1..1\nnot ok 1 second\n"
    assert tree(parse(two)) == [("first", "passed", []), ("second", "failed", [])]


def test_the_kselftest_runner_nesting_is_recovered() -> None:
    recorded = (DATA / "mm-runner.ktap").read_text()
    tests = parse(recorded)
    assert [t.name for t in tests] == [
        f"selftests: mm: {name}" for name in
        ("cow", "gup_longterm", "mkdirty", "madv_populate", "split_huge_page_test")]
    cow = tests[0]
    counted = {"pass": 0, "skip": 0, "fail": 0}
    for sub in cow.subtests:
        counted[{"passed": "pass", "skipped": "skip", "failed": "fail"}[sub.outcome]] += 1
    expected = totals((DATA / "mm-cow.ktap").read_text())
    assert counted == {k: expected[k] for k in counted}
    split = tests[-1]
    assert split.outcome == "failed" and split.reason == "exit=1"
    assert "planned 12 subtests, 0 ran" in split.problems


def test_the_plain_recorded_log_matches_its_own_totals() -> None:
    text = (DATA / "mm-cow.ktap").read_text()
    tests = parse(text)
    expected = totals(text)
    assert sum(t.outcome == "passed" for t in tests) == expected["pass"]
    assert sum(t.outcome == "skipped" for t in tests) == expected["skip"]
    assert len(tests) == sum(expected.values())


@pytest.mark.parametrize(("text", "message"), [
    ("", "no KTAP in it: it is empty"),
    ("hello\nworld\n", "no KTAP in it (no 'KTAP version 1', 'TAP version N', plan or "
                       "'ok N' line); it starts 'hello'"),
])
def test_input_with_no_ktap_is_one_line(text: str, message: str) -> None:
    with pytest.raises(KtapError) as excinfo:
        parse(text)
    assert str(excinfo.value) == message


def test_a_bad_line_is_quoted_short() -> None:
    with pytest.raises(KtapError) as excinfo:
        parse("\x00" * 100_000)
    assert len(str(excinfo.value)) < 400 and "\n" not in str(excinfo.value)


def test_files_are_checked_before_they_are_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(KtapError, match="fifo: is a FIFO, not a KTAP log file"):
        read(str(fifo))                       # refused, not waited on
    with pytest.raises(KtapError, match="is a directory, not a KTAP log file"):
        read(str(tmp_path))
    with pytest.raises(KtapError, match=r"cannot read .*missing: No such file"):
        read(str(tmp_path / "missing"))
    big = tmp_path / "big.ktap"
    with open(big, "wb") as f:
        f.truncate(MAX_LOG_BYTES + 1)          # sparse: nothing is written or read
    with pytest.raises(KtapError, match="is more than the 64M a KTAP log may have"):
        read(str(big))


LINES = KUNIT.splitlines() + (DATA / "mm-runner.ktap").read_text().splitlines()[:60]


@settings(max_examples=200, deadline=1000)
@given(st.lists(st.one_of(st.sampled_from(LINES), st.text(max_size=40)), max_size=40))
def test_any_edit_of_a_log_reads_or_fails_in_one_line(lines: list[str]) -> None:
    try:
        tests = parse("\n".join(lines))
    except KtapError as exc:
        assert "\n" not in str(exc)
        return
    for top in tests:
        for test in top.walk():
            assert test.outcome in ("passed", "failed", "skipped", "xfailed")


def test_a_log_that_skips_everything_says_why() -> None:
    [plan] = parse("TAP version 13\n1..0 # SKIP no THP support\n")
    assert (plan.outcome, plan.reason) == ("skipped", "no THP support")
    [plan] = parse("KTAP version 1\n1..0\n")
    assert (plan.outcome, plan.reason) == ("skipped", "the log ran no test")


def test_control_characters_in_names_and_diagnostics_are_escaped() -> None:
    """A log's names reach the terminal as item ids: an escape sequence there could
    recolour or retitle it."""
    [test] = parse("KTAP version 1\n1..1\n# pos \x1b]0;owned\x07 here\n"
                   "not ok 1 b\x1b[31m # x\x08\n")
    assert test.name == "b\\x1b[31m"
    assert test.reason == "x\\x08"
    assert test.diagnostics == ["pos \\x1b]0;owned\\x07 here"]
