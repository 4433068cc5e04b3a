"""After a green run, one line says the failures directory holds earlier failures."""

from __future__ import annotations

import pytest

NOTICE = "folio: .folio/failures still holds 2 earlier failures (stale: this run passed)"


@pytest.fixture
def kept(pytester: pytest.Pytester) -> pytest.Pytester:
    root = pytester.path / ".folio" / "failures"
    for name in ("test_a.py__test_x", "test_b.py__test_y"):
        (root / name).mkdir(parents=True)
        (root / name / "run.fsxops").write_text("write 0 4096\n")
    (root / "a-marker-file").write_text("")        # files are not failures
    return pytester


def test_a_green_run_says_earlier_failures_are_stale_and_keeps_them(
        kept: pytest.Pytester) -> None:
    kept.makepyfile(test_ok="def test_ok():\n    pass\n")
    result = kept.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert result.stdout.lines.count(NOTICE) == 1
    assert len(NOTICE) <= 80
    assert sorted(p.name for p in (kept.path / ".folio" / "failures").iterdir()) == [
        "a-marker-file", "test_a.py__test_x", "test_b.py__test_y"]


def test_a_failing_run_says_nothing_of_staleness(kept: pytest.Pytester) -> None:
    kept.makepyfile(test_bad="def test_bad():\n    assert False\n")
    result = kept.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    assert "earlier failure" not in result.stdout.str()


@pytest.mark.parametrize("args", [[], ["--folio-failures=off"]])
def test_no_notice_without_kept_failures(pytester: pytest.Pytester, args: list[str]) -> None:
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    (pytester.path / ".folio" / "failures").mkdir(parents=True)
    if args:
        (pytester.path / ".folio" / "failures" / "old").mkdir()
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1)
    assert "earlier failure" not in result.stdout.str()


def test_under_xdist_the_notice_comes_once(kept: pytest.Pytester) -> None:
    kept.makepyfile(test_ok="import pytest\n\n@pytest.mark.parametrize('i', range(4))\n"
                            "def test_ok(i):\n    pass\n")
    result = kept.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=4)
    assert result.stdout.lines.count(NOTICE) == 1


pytest_plugins = ["pytester"]
