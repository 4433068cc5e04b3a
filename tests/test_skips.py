"""The end of a run says why tests skipped, one line per reason family."""

from __future__ import annotations

import pytest

from pytest_folio.skips import family

SKIPS = """
import pytest

@pytest.mark.parametrize("size", [4, 16, 64])
def test_page(size):
    pytest.skip(f"{size}K pages: this test requires NAND flash")

def test_mount():
    pytest.skip("not root: cannot mount ramfs on /tmp/x")

def test_runs():
    pass
"""


def test_reasons_differing_in_numbers_sizes_and_names_are_one_family() -> None:
    assert family("Skipped: 16K pages: needs 0x40 of 'ram'") == "… pages: needs … of …"
    assert family("cannot mount /tmp/a") == family("cannot mount /var/b")


def test_the_summary_counts_each_family_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_skips=SKIPS)
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=4)
    result.stdout.fnmatch_lines(["*folio: 4 skipped, by reason (-rs: each test)*",
                                 "    3  … pages: this test requires NAND flash",
                                 "    1  not root: cannot mount ramfs on …"])


def test_the_summary_also_comes_under_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_skips=SKIPS)
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=1, skipped=4)
    assert result.stdout.str().count("folio: 4 skipped, by reason") == 1
