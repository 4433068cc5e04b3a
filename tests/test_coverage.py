"""--folio-coverage: the classes of input each call was given, the same serially and
merged from xdist workers, within 80 columns; nothing recorded or printed without it."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from pytest_folio import coverage
from pytest_folio.coverage import data_class, length_class, name_class, offset_class, summary
from tests.helpers import subprocess_env

SUITES = ("-p", "pytest_folio", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
          "--pyargs", "pytest_folio.suites.test_fs_differential",
          "pytest_folio.suites.test_fsx", "pytest_folio.suites.test_mtd_fsx",
          "-k", "not hypothesis and not large_file",
          "--folio-fs=tests.helpers.fsx_cachedfs:CachedFS", "--folio-mtd=reference",
          "--folio-block-sizes=4k",
          "--folio-orders=0", "--folio-fsx-ops=400", "--folio-seed=3")
TITLE = "folio coverage: the classes of input each call was given"


@pytest.fixture(autouse=True)
def _inner_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner runs import tests.helpers as this one does."""
    for name, value in subprocess_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)


@pytest.mark.parametrize(("n", "expected"), [
    (0, "0"), (1, "1..4K"), (4095, "4K-1"), (4096, "4K"), (4097, "4K+1"), (5000, "4K..64K"),
    ((64 << 10) - 1, "64K-1"), ((1 << 20) + 1, "1M+1"), ((1 << 20) + 512, "1M..2M"),
    (2 << 20, "2M"), ((2 << 20) + 2, ">2M")])
def test_lengths_fall_into_the_boundary_classes(n: int, expected: str) -> None:
    assert length_class(n) == expected


def test_offsets_data_and_names_fall_into_their_classes() -> None:
    assert [offset_class(o) for o in (-1, 0, 4096, 4097, 1 << 32, 1 << 44, (1 << 63) - 1)] == [
        "negative", "0", "page-aligned", "unaligned", "4G..16T", ">=16T", "last 2M"]
    assert [data_class(d) for d in (b"", bytes(9), b"\xff" * 3, b"aa", b"ab")] == [
        "random", "zero", "0xff", "one byte", "random"]
    assert [name_class(n) for n in ("a", "d/bc", "x" * 200, "y" * 255, "d/" + "z" * 256,
                                    "a/")] == ["1", "2..199", "200..254", "255", ">255", "1"]


def test_record_counts_nothing_unless_the_option_is_on() -> None:
    assert not coverage.on()
    coverage.record("pwrite", length=5)        # must not raise, must not keep anything
    assert coverage._counts is None


def test_the_summary_keeps_within_80_columns_and_lists_what_was_never_given() -> None:
    counts: Counter[tuple[str, str, str]] = Counter()
    for n in range(0, 3 << 20, 4093):
        counts["pwrite", "length", length_class(n)] += 1
    counts["pwrite", "calls", ""] = 9
    counts["pwrite", "outcome", "ENAMETOOLONG"] = 9
    lines = summary(counts)
    assert lines[0] == "pwrite: 9 calls"
    assert all(len(line) <= 80 for line in lines)
    never = " ".join(lines[lines.index(next(x for x in lines if "never:" in x)):])
    assert "4K-1" in never and "2M+1" in never and ">2M" not in never
    assert any("ENAMETOOLONG 9" in line for line in lines)


def _section(text: str) -> list[str]:
    """The coverage section: from its title to the next section's."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if TITLE in line)
    end = next((i for i, line in enumerate(lines) if i > start
                and re.match(r"^[-=]{3,} ", line)), len(lines))
    return lines[start + 1:end]


def test_serial_and_xdist_runs_print_the_same_coverage(pytester: pytest.Pytester) -> None:
    serial = pytester.runpytest_subprocess(*SUITES, "--folio-coverage")
    assert serial.ret == pytest.ExitCode.OK, serial.stdout.str()[-3000:]
    spread = pytester.runpytest_subprocess(*SUITES, "--folio-coverage", "-n", "2")
    assert spread.ret == pytest.ExitCode.OK, spread.stdout.str()[-3000:]
    lines = _section(serial.stdout.str())
    assert lines == _section(spread.stdout.str())
    assert all(len(line) <= 80 for line in lines)
    text = "\n".join(lines)
    for call in ("pwrite:", "fsx write:", "mtd write:", "open:"):
        assert re.search(rf"^{call} \d+ calls", text, re.M), text
    assert re.search(r"^  data: +random \d+, zero \d+", text, re.M), text
    assert re.search(r"^  outcome: .*EBADF \d+", text, re.M), text


def test_the_ini_key_turns_it_on_and_without_it_nothing_is_printed(
        pytester: pytest.Pytester) -> None:
    args = (*SUITES[:6], "--pyargs", "pytest_folio.suites.test_fs_differential",
            "--folio-fs=tests.helpers.fsx_cachedfs:CachedFS", "--folio-block-sizes=4k",
            "--folio-fsx-ops=200")
    off = pytester.runpytest_subprocess(*args)
    assert off.ret == pytest.ExitCode.OK and TITLE not in off.stdout.str()
    pytester.makeini("[pytest]\nfolio_coverage = true\n")
    on = pytester.runpytest_subprocess(*args)
    assert on.ret == pytest.ExitCode.OK, on.stdout.str()[-3000:]
    assert re.search(r"^pwrite: \d+ calls", on.stdout.str(), re.M), on.stdout.str()[-3000:]
    pytester.makeini("[pytest]\nfolio_coverage = maybe\n")
    bad = pytester.runpytest_subprocess(*args)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*ini key folio_coverage: 'maybe' is not a truth value*"])
