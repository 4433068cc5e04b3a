"""The suite base classes under pytest: broken devices are caught, correct ones pass,
measurements are announced, and writing suites skip where they may not write."""

from __future__ import annotations

from typing import Any

import pytest
from mtd_devices import BROKEN

from pytest_folio.measurement import Measurement

# Which default tests must fail for each bug class (and no others).
CAUGHT_BY = {
    "erase_fills_zero": {"test_stress", "test_torture"},
    "readonly_accepts_writes": {"test_readonly_refuses_writes"},
    "off_by_one_page_at_eraseblock_end": {"test_speed", "test_stress", "test_torture"},
    "erase_wrong_block": {"test_stress"},
    "short_read_at_folio_boundary": {"test_read", "test_speed", "test_stress",
                                     "test_torture"},
    "lost_write_on_folio_drop": {"test_speed", "test_stress", "test_torture"},
    "stale_cache_after_erase": {"test_stress", "test_torture"},
    "partial_last_page_write": {"test_speed", "test_stress"},
    "aliasing_offset": {"test_stress"},
    "out_of_range_wraps": {"test_out_of_range_is_einval"},
}

SUITE = """
import pytest
import mtd_devices
from pytest_folio.suites.mtd import MTDTests

class TestDevice(MTDTests):
    stress_seed = 5
    stress_count = 600
    torture_cycles = 3

    @pytest.fixture
    def mtd_device(self):
        dev = mtd_devices.{factory}
        yield dev
        dev.close()
"""


def outcomes(pytester: pytest.Pytester, factory: str,
             *args: str) -> tuple[dict[str, str], pytest.RunResult]:
    pytester.makepyfile(test_device=SUITE.format(factory=factory))
    result = pytester.runpytest("-p", "pytest_folio", "-rs", "--folio-orders", "0", *args)
    by_test: dict[str, str] = {}
    for report in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
        name = report.nodeid.rsplit("::", 1)[-1].split("[")[0]
        if report.when == "call" or report.outcome != "passed":
            by_test[name] = report.outcome
    return by_test, result


@pytest.mark.parametrize("bug", sorted(BROKEN))
def test_each_broken_device_is_caught_by_the_default_suites(
        pytester: pytest.Pytester, bug: str) -> None:
    by_test, result = outcomes(pytester, f"BROKEN[{bug!r}]()")
    failed = {name for name, outcome in by_test.items() if outcome == "failed"}
    assert failed == CAUGHT_BY[bug], result.stdout.str()[-3000:]


@pytest.mark.parametrize("device", ["RamMTD()", "CachedRamMTD()"])
def test_correct_devices_pass_every_suite(pytester: pytest.Pytester, device: str) -> None:
    by_test, result = outcomes(pytester, device)
    assert by_test == {
        "test_read": "passed", "test_out_of_range_is_einval": "passed",
        "test_readonly_refuses_writes": "skipped", "test_speed": "passed",
        "test_stress": "passed", "test_torture": "passed", "test_pagetest": "skipped",
        "test_subpagetest": "skipped", "test_oobtest": "skipped",
        "test_nandbiterrs": "skipped"}, result.stdout.str()
    result.stdout.fnmatch_lines(["*mtd_pagetest: this test requires NAND flash*",
                                 "*mtd_oobtest: this test requires NAND flash*"])


def test_nand_device_runs_the_page_test(pytester: pytest.Pytester) -> None:
    by_test, result = outcomes(pytester, "NandRamMTD()")
    assert by_test["test_pagetest"] == "passed"
    assert by_test["test_oobtest"] == "skipped"
    result.stdout.fnmatch_lines(["*mtd_oobtest: needs OOB access*"])


def test_real_device_suites_that_write_skip_without_consent(
        pytester: pytest.Pytester) -> None:
    factory = "RamMTD(); dev.is_real_device = True"
    by_test, result = outcomes(pytester, factory)
    for name in ("test_speed", "test_stress", "test_torture"):
        assert by_test[name] == "skipped"
    assert by_test["test_read"] == "passed"
    result.stdout.fnmatch_lines(
        ["*ram is a real device and this suite erases and writes it; pass "
         "--folio-allow-destructive to allow it*"])
    by_test, _ = outcomes(pytester, factory, "--folio-allow-destructive")
    assert {by_test[n] for n in ("test_speed", "test_stress", "test_torture")} == {"passed"}


def test_readonly_device_skips_writers_and_passes_the_readonly_check(
        pytester: pytest.Pytester) -> None:
    by_test, result = outcomes(
        pytester, "RamMTD(type=mtd_devices.MTD_ROM, flags=mtd_devices.MTD_CAP_ROM)")
    assert by_test["test_readonly_refuses_writes"] == "passed"
    assert by_test["test_speed"] == by_test["test_torture"] == "skipped"
    result.stdout.fnmatch_lines(["*ram is read-only (MTD_WRITEABLE is not set)*"])


class _Collector:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Measurement]] = []

    def pytest_folio_measurement(self, item: Any, measurement: Measurement) -> None:
        self.seen.append((item.nodeid, measurement))


def test_speed_announces_one_measurement_per_row_with_the_folio_size(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_speed="""
import pytest
import mtd_devices
from pytest_folio.suites.mtd import MTDSpeedSuite

class TestSpeed(MTDSpeedSuite):
    speed_passes = 2

    @pytest.fixture
    def mtd_device(self, folio_order):
        return mtd_devices.CachedRamMTD(folio_order=folio_order)
""")
    collector = _Collector()
    result = pytester.runpytest("-p", "pytest_folio", "--folio-orders", "0,2",
                                "--folio-mtd", "reference:api=page", "-s",
                                plugins=[collector])
    result.assert_outcomes(passed=2)
    assert len(collector.seen) == 2 * 14
    nodeid, m = collector.seen[0]
    assert nodeid.endswith("test_speed[4K]")
    assert (m.suite, m.name, m.unit, m.params, m.target) == (
        "mtd_speedtest", "Eraseblock write (64 KiB)", "ms", {"folio": "4K"},
        "reference:api=page")
    assert len(m.samples) == 2 and m.extra["bytes"] == 2 << 20
    assert collector.seen[14][1].params == {"folio": "16K"}
    assert collector.seen[13][1].name == "Erase, already erased"
    result.stdout.fnmatch_lines(["mtd_speedtest: cachedram [16K]",
                                 "Test * ms/pass * KiB/s",
                                 "Eraseblock write (64 KiB) *"])
