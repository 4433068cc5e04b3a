"""The suite base classes under pytest: broken devices are caught, correct ones pass,
measurements are announced, and writing suites skip where they may not write."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

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

DEVICES = {
    **{bug: f"BROKEN[{bug!r}]()" for bug in BROKEN},
    "ram": "RamMTD()",
    "cached": "CachedRamMTD()",
    "nand": "NandRamMTD()",
    "rom": "RamMTD(type=mtd_devices.MTD_ROM, flags=mtd_devices.MTD_CAP_ROM)",
    "real": "RamMTD(); dev.is_real_device = True",
}

CLASS = """
class Test_{key}(MTDTests):
    stress_seed = 5
    stress_count = 600
    torture_cycles = 3
    speed_passes = 1

    @pytest.fixture
    def mtd_device(self):
        dev = mtd_devices.{factory}
        yield dev
        dev.close()
"""

Outcomes = dict[str, dict[str, str]]
HERE = Path(__file__).parent


# plugins the inner runs do not need, each costing a second or two of start-up
QUICK = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark")


def run_suites(directory: Path, devices: dict[str, str], *args: str) -> tuple[Outcomes, str]:
    """One pytest process with a suite class per device: ({device: {test: outcome}}, output).

    A separate process, because the devices module and the plugin must be imported fresh.
    """
    source = "import pytest\nimport mtd_devices\nfrom pytest_folio.suites.mtd import MTDTests\n"
    source += "".join(CLASS.format(key=key, factory=factory)
                      for key, factory in devices.items())
    (directory / "test_devices.py").write_text(source)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE), os.environ.get("PYTHONPATH", "")]))
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_folio", *QUICK,
         "-rs", "--junitxml=results.xml", "--folio-orders", "0", "test_devices.py", *args],
        cwd=directory, env=env, capture_output=True, text=True, timeout=300)
    outcomes: Outcomes = {}
    for case in ElementTree.parse(directory / "results.xml").iter("testcase"):
        key = case.attrib["classname"].rsplit(".Test_", 1)[1]
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed", "error": "error"}.get(tag, tag)
        outcomes.setdefault(key, {})[case.attrib["name"].split("[")[0]] = outcome
    return outcomes, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def every_device(tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcomes, str]:
    """Every device through the default suites, in one run per module."""
    return run_suites(tmp_path_factory.mktemp("every_device"), DEVICES)


@pytest.mark.parametrize("bug", sorted(BROKEN))
def test_each_broken_device_is_caught_by_the_default_suites(
        every_device: tuple[Outcomes, str], bug: str) -> None:
    outcomes, output = every_device
    failed = {name for name, outcome in outcomes[bug].items() if outcome == "failed"}
    assert failed == CAUGHT_BY[bug], output[-3000:]


@pytest.mark.parametrize("device", ["ram", "cached"])
def test_correct_devices_pass_every_suite(every_device: tuple[Outcomes, str],
                                          device: str) -> None:
    outcomes, output = every_device
    assert outcomes[device] == {
        "test_read": "passed", "test_out_of_range_is_einval": "passed",
        "test_readonly_refuses_writes": "skipped", "test_speed": "passed",
        "test_stress": "passed", "test_torture": "passed", "test_pagetest": "skipped",
        "test_subpagetest": "skipped", "test_oobtest": "skipped",
        "test_nandbiterrs": "skipped"}, output
    assert "mtd_pagetest: this test requires NAND flash" in output
    assert "mtd_oobtest: this test requires NAND flash" in output


def test_nand_device_runs_the_page_test(every_device: tuple[Outcomes, str]) -> None:
    outcomes, output = every_device
    assert outcomes["nand"]["test_pagetest"] == "passed"
    assert outcomes["nand"]["test_oobtest"] == "skipped"
    assert "mtd_oobtest: needs OOB access" in output


def test_readonly_device_skips_writers_and_passes_the_readonly_check(
        every_device: tuple[Outcomes, str]) -> None:
    outcomes, output = every_device
    assert outcomes["rom"]["test_readonly_refuses_writes"] == "passed"
    assert outcomes["rom"]["test_speed"] == outcomes["rom"]["test_torture"] == "skipped"
    assert "ram is read-only (MTD_WRITEABLE is not set)" in output


def test_real_device_suites_that_write_skip_without_consent(
        every_device: tuple[Outcomes, str], tmp_path: Path) -> None:
    outcomes, output = every_device
    for name in ("test_speed", "test_stress", "test_torture"):
        assert outcomes["real"][name] == "skipped"
    assert outcomes["real"]["test_read"] == "passed"
    assert ("ram is a real device and this suite erases and writes it; pass "
            "--folio-allow-destructive to allow it") in output
    allowed, _ = run_suites(tmp_path, {"real": DEVICES["real"]}, "--folio-allow-destructive")
    assert {allowed["real"][n] for n in ("test_speed", "test_stress", "test_torture")} == {
        "passed"}


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
                                "--folio-mtd", "reference:retry=off,api=page", "-rP",
                                plugins=[collector])
    result.assert_outcomes(passed=2)
    assert len(collector.seen) == 2 * 14
    nodeid, m = collector.seen[0]
    assert nodeid.endswith("test_speed[4K]")
    assert (m.suite, m.name, m.unit, m.params, m.target) == (
        "mtd_speedtest", "Eraseblock write (64 KiB)", "ms", {"folio": "4K"},
        "reference:api=page,retry=off")
    assert len(m.samples) == 2 and m.extra["bytes"] == 2 << 20
    assert collector.seen[14][1].params == {"folio": "16K"}
    assert collector.seen[13][1].name == "Erase, already erased"
    result.stdout.fnmatch_lines(["mtd_speedtest: cachedram [16K]",
                                 "Test * ms/pass * KiB/s",
                                 "Eraseblock write (64 KiB) *"])


def test_ready_to_run_suites_pass_on_the_example_user_device() -> None:
    example = HERE.parents[1] / "examples" / "own_mtd"
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *QUICK, "--pyargs", "pytest_folio.suites",
         "-k", "mtd and not kernel_mtd", "-q", "-rs"],
        cwd=example, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "5 passed, 9 skipped" in proc.stdout, proc.stdout[-3000:]
    assert "block2mtd checks need the reference block2mtd" in proc.stdout


def test_a_suite_parameter_that_does_not_fit_fails_in_one_line(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad_param="""
import pytest
import mtd_devices
from pytest_folio.suites.mtd import MTDTortureSuite

class TestTorture(MTDTortureSuite):
    torture_eb = 1000

    @pytest.fixture
    def mtd_device(self):
        return mtd_devices.RamMTD()
""")
    result = pytester.runpytest("-p", "pytest_folio", "--folio-orders", "0")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*mtd_torturetest: eraseblocks 1000..1031 are outside the device (0..31)"])
    result.stdout.no_fnmatch_line("*Traceback*")
