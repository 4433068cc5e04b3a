"""Progress on long work: -v style lines under pytest, a status line on a terminal,
nothing under -q, one line per step elsewhere (the VM runner)."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from pytest_folio.terminal import progress

STRESS = """
import pytest
from pytest_folio.suites.mtd import MTDStressSuite

class TestStress(MTDStressSuite):
    stress_count = 1100
"""


def _steps(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("folio: mtd_stresstest: ")]


def test_minus_v_shows_each_step_as_a_line_and_the_test_still_gets_its_word(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(STRESS)
    result = pytester.runpytest("-v", "--folio-orders=0", "--folio-mtd-size=1M",
                                "--folio-erasesize=64K")
    result.assert_outcomes(passed=1)
    assert _steps(result)[-3:] == ["folio: mtd_stresstest: 0 operations done",
                                   "folio: mtd_stresstest: 1024 operations done",
                                   "folio: mtd_stresstest: finished, 1100 operations done"]
    result.stdout.fnmatch_lines(["*test_stress* PASSED*"])


@pytest.mark.parametrize(("args", "ci", "shown"), [
    (["-q"], "1", False), ([], "", False), ([], "1", True)], ids=["quiet", "plain", "ci"])
def test_quiet_under_q_and_one_line_per_step_in_ci(pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   args: list[str], ci: str,
                                                   shown: bool) -> None:
    monkeypatch.setenv("CI", ci)
    pytester.makepyfile(STRESS)
    result = pytester.runpytest(*args, "--folio-orders=0", "--folio-mtd-size=1M",
                                "--folio-erasesize=64K")
    result.assert_outcomes(passed=1)
    assert bool(_steps(result)) is shown


def test_on_a_terminal_the_status_line_is_rewritten_and_pytests_line_put_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    screen = io.StringIO()
    tw = SimpleNamespace(_file=screen, _current_line="test_x.py ..", fullwidth=40)
    reporter = SimpleNamespace(_tw=tw, isatty=True)
    config = SimpleNamespace(
        get_verbosity=lambda: 0,
        pluginmanager=SimpleNamespace(
            get_plugin=lambda name: reporter if name == "terminalreporter" else None))
    shower = progress.PytestProgress(config)
    shower.show("mtd_stresstest: 1024 operations done")
    shower.show("mtd_stresstest: 2048 operations done, and a long tail that is cut")
    shower.pytest_runtest_logreport(report=None)
    assert screen.getvalue() == (
        "\r\x1b[Kfolio: mtd_stresstest: 1024 operations "
        "\r\x1b[Kfolio: mtd_stresstest: 2048 operations "
        "\r\x1b[Ktest_x.py ..")
    shower.pytest_runtest_logreport(report=None)            # nothing shown: nothing to do
    assert screen.getvalue().endswith("\r\x1b[Ktest_x.py ..")


def test_outside_pytest_each_step_is_a_line_on_the_stream() -> None:
    out = io.StringIO()
    progress.step("folio-vm: booting under TCG", out)
    progress.step("folio-vm: guest ready", out)
    assert out.getvalue() == "folio-vm: booting under TCG\nfolio-vm: guest ready\n"
