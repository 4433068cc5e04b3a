"""The end of a run says why tests skipped, one line per reason family."""

from __future__ import annotations

import pytest

from pytest_folio.terminal.skips import family

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


def test_every_reason_is_listed_and_no_line_is_wider_than_80(
        pytester: pytest.Pytester) -> None:
    """Twenty distinct reasons: none hidden behind an "other reasons" line, and a long
    reason wraps onto indented lines."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
             "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
             "quebec", "romeo", "sierra", "tango"]
    long_reason = "the target offers no way to " + " and ".join(words[:12])
    pytester.makepyfile(test_many=f"""
        import pytest

        @pytest.mark.parametrize("word", {words!r})
        def test_skip(word):
            pytest.skip(f"needs {{word}} support")

        def test_long():
            pytest.skip({long_reason!r})
    """)
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=21)
    out = result.stdout.str()
    summary = out[out.index("folio: 21 skipped"):].splitlines()[1:]
    assert not any("other reasons" in line for line in summary)
    for word in words:
        assert f"    1  needs {word} support" in summary
    assert max(map(len, summary)) <= 80
    start = summary.index(next(line for line in summary if "no way to" in line))
    wrapped = " ".join(line.strip() for line in summary[start:start + 3])
    assert wrapped.startswith(f"1  {long_reason}")
    assert summary[start + 1].startswith(" " * 9)
