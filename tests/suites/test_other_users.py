"""Other users' implementations, written from the docs alone (tests/helpers/fresh2/):
each correct one passes the whole default run, no ``-k``, and each one-line bug planted
in them is caught by it. They found the false failures that test_usual_python.py now
pins one by one; this runs them whole, so a change to a suite that a user's file system
or flash device would fail shows here. Marked slow: a whole default run each."""

from __future__ import annotations

import re

import pytest

from tests.helpers import runpytest_own_process

FRESH = "tests.helpers.fresh2"
CORRECT = [
    ("--folio-fs", f"{FRESH}.treefs:factory"),      # a tree of dicts, sparse pages
    ("--folio-fs", f"{FRESH}.flatfs:factory"),      # a path-keyed dict, a write-back cache
    ("--folio-fs", f"{FRESH}.syncfs:factory"),      # power cuts keep only what fsync saved
    ("--folio-mtd", f"{FRESH}.bufnor:factory"),     # NOR behind a page buffer
    ("--folio-mtd", f"{FRESH}.ebram:factory"),      # eraseblocks behind an LRU cache
    ("--folio-mtd", f"{FRESH}.nand:factory"),       # NAND pages with OOB
]
BUGS = [
    ("--folio-fs", f"{FRESH}.bugs:tail"),           # truncate zeroes one byte too far
    ("--folio-fs", f"{FRESH}.bugs:zeros"),          # zeroes over data taken for a hole
    ("--folio-fs", f"{FRESH}.bugs:namechars"),      # NAME_MAX counted in characters
    ("--folio-fs", f"{FRESH}.bugs:evict"),          # dirty bit on a write's first page only
    ("--folio-fs", f"{FRESH}.bugs:fsyncempty"),     # fsync of an empty file saves nothing
    ("--folio-mtd", f"{FRESH}.bugs:bufread"),       # a buffered page's last byte misread
    ("--folio-mtd", f"{FRESH}.bugs:erasecache"),    # an erase keeps dirty cached blocks
]
QUICK = ("-p", "no:cacheprovider", "-q", "--folio-seed=1")
# every failure ends with the command that runs it again
REPRODUCTION = re.compile(r"^(?:reproduce|replay|fsx: replay it|mtd fsx: replay it): "
                          r"python -m pytest ", re.M)


def _default_run(pytester: pytest.Pytester, option: str, spec: str,
                 *extra: str) -> pytest.RunResult:
    return runpytest_own_process(pytester, "-p", "pytest_folio", "--pyargs",
                                 "pytest_folio.suites", f"{option}={spec}", *QUICK, *extra)


@pytest.mark.slow
@pytest.mark.parametrize(("option", "spec"), CORRECT, ids=[s.split(".")[-1] for _, s in CORRECT])
def test_a_correct_users_implementation_passes_the_default_run(
        pytester: pytest.Pytester, option: str, spec: str) -> None:
    result = _default_run(pytester, option, spec)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    assert " passed" in out, out[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize(("option", "spec"), BUGS, ids=[s.split(":")[-1] for _, s in BUGS])
def test_a_one_line_bug_in_a_users_implementation_is_caught(
        pytester: pytest.Pytester, option: str, spec: str) -> None:
    result = _default_run(pytester, option, spec, "-x", "--folio-shrink-seconds=0")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert REPRODUCTION.search(out), out[-3000:]
