"""The mtd_test-style suites: speed, read, stress, torture and the NAND-only tests."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from pytest_folio.mtdtests import (
    check_bounds,
    check_readonly,
    format_results,
    is_writeable,
    nand_skip_reason,
    run_pagetest,
    run_readtest,
    run_speedtest,
    run_stresstest,
    run_torturetest,
)
from pytest_folio.suites.mtd.base import (
    _MTDSuite,
    destructive_allowed,
    folio_param,
    require_destructive,
    run_seed,
)
from pytest_folio.targets.protocols import MTDDevice


class MTDSpeedSuite(_MTDSuite):
    """mtd_speedtest: each row is announced as a Measurement (the end-of-run table)."""

    # samples per row (the median is reported); the timing collector's Mann-Whitney test
    # needs at least 4 a side to call a change significant (p < 0.05)
    speed_passes: ClassVar[int] = 5
    speed_count: ClassVar[int] = 0    # eraseblocks to use (0: all), as the module's count

    def test_speed(self, mtd_device: MTDDevice, request: pytest.FixtureRequest) -> None:
        config = request.config
        require_destructive(mtd_device, config)
        with self._running(request, "mtd_speedtest", rerun=True) as say:
            results = run_speedtest(mtd_device, passes=self.speed_passes,
                                    count=self.speed_count, seed=run_seed(config),
                                    log=say)
        params = folio_param(mtd_device, request)
        target = self._target(config)
        item = request.node
        for result in results:
            config.hook.pytest_folio_measurement(
                item=item, measurement=result.to_measurement(params, target))
        # the rows reach the end-of-run table through the collector; the kernel-style
        # table is the test's report section (-rP), not printed around the progress line
        title = f"mtd_speedtest: {mtd_device.name}" + (
            f" [{params['folio']}]" if params else "")
        item.add_report_section("call", "mtd_speedtest table",
                                "\n".join([title, *format_results(results)]))


class MTDReadSuite(_MTDSuite):
    """mtd_readtest plus the interface checks; reading never changes the device."""

    read_count: ClassVar[int] = 0     # eraseblocks to read (0: all)

    def test_read(self, mtd_device: MTDDevice, request: pytest.FixtureRequest) -> None:
        with self._running(request, "mtd_readtest") as say:
            result = run_readtest(mtd_device, count=self.read_count, log=say)
        assert result.pages > 0, "every eraseblock is marked bad"

    def test_out_of_range_is_einval(self, mtd_device: MTDDevice,
                                    request: pytest.FixtureRequest) -> None:
        # The write/erase probes put back bytes already there, but on a real device even
        # that needs consent; the read probes always run.
        writes = is_writeable(mtd_device) and destructive_allowed(mtd_device, request.config)
        check_bounds(mtd_device, write=writes)

    def test_readonly_refuses_writes(self, mtd_device: MTDDevice,
                                     request: pytest.FixtureRequest) -> None:
        if is_writeable(mtd_device):
            pytest.skip(f"{mtd_device.name} is writeable (MTD_WRITEABLE is set)")
        check_readonly(mtd_device,
                       erase=destructive_allowed(mtd_device, request.config))


@dataclasses.dataclass(frozen=True)
class StressPart:
    """One item of a stress run split for xdist: ``index`` of ``parts``, ``count``
    operations, on its own device, from a seed derived from the run's."""

    index: int
    parts: int
    count: int

    @property
    def id(self) -> str:
        return f"part{self.index + 1}of{self.parts}"

    def seed(self, seed: int) -> int:
        """The whole run's seed for the first part; a different one, fixed by it, for
        each other part (so every worker derives the same)."""
        return seed if self.index == 0 else seed * 1_000_003 + self.index


def stress_parts(count: int, part_ops: int) -> list[StressPart]:
    """``count`` operations as parts of at most ``part_ops`` each (earlier parts take
    the remainder); one part when it fits."""
    parts = max(1, -(-count // max(1, part_ops)))
    return [StressPart(i, parts, count // parts + (i < count % parts)) for i in range(parts)]


class MTDStressSuite(_MTDSuite):
    """mtd_stresstest, every read checked against an in-memory copy of the device.

    A run longer than ``stress_part_ops`` operations is split into independent items
    (``test_stress[4K-part2of4]``), each as many operations on a fresh device from its
    own seed, so pytest-xdist spreads one long run over its workers."""

    stress_count: ClassVar[int] = 10000       # the kernel module's default
    stress_seed: ClassVar[int | None] = None  # None: the run's seed (--folio-seed)
    stress_part_ops: ClassVar[int] = 2500     # operations per item (0: never split)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "stress_part" in metafunc.fixturenames:
            parts = stress_parts(self.stress_count, self.stress_part_ops or self.stress_count)
            if len(parts) > 1:
                metafunc.parametrize("stress_part", parts, ids=[p.id for p in parts])

    @pytest.fixture
    def stress_part(self) -> StressPart:
        """The whole run as one item (parametrized instead when it is split)."""
        return StressPart(0, 1, self.stress_count)

    def test_stress(self, mtd_device: MTDDevice, stress_part: StressPart,
                    request: pytest.FixtureRequest) -> None:
        require_destructive(mtd_device, request.config)
        seed = stress_part.seed(self.stress_seed if self.stress_seed is not None
                                else run_seed(request.config))
        count = stress_part.count
        with self._running(request, "mtd_stresstest", rerun=True) as say:
            part = ("" if stress_part.parts == 1 else
                    f" (part {stress_part.index + 1} of {stress_part.parts})")
            say(f"seed {seed}, count {count}{part}")
            result = run_stresstest(mtd_device, count=count, seed=seed, log=say)
        assert result.operations == count


class MTDTortureSuite(_MTDSuite):
    """mtd_torturetest with the kernel's parameter names; a few cycles by default."""

    torture_eb: ClassVar[int | None] = None      # None: 8, or lower on a small device
    torture_ebcnt: ClassVar[int | None] = None   # None: 32, or the whole small device
    torture_pgcnt: ClassVar[int] = 0             # pages per eraseblock (0: all)
    torture_cycles: ClassVar[int] = 8            # cycles_count (the kernel: endless)
    torture_check: ClassVar[bool] = True

    def test_torture(self, mtd_device: MTDDevice, request: pytest.FixtureRequest) -> None:
        require_destructive(mtd_device, request.config)
        with self._running(request, "mtd_torturetest") as say:
            result = run_torturetest(mtd_device, eb=self.torture_eb, ebcnt=self.torture_ebcnt,
                                     pgcnt=self.torture_pgcnt, check=self.torture_check,
                                     cycles_count=self.torture_cycles, log=say)
        assert result.erase_cycles == self.torture_cycles


class MTDNandSuite(_MTDSuite):
    """The NAND-only tests; on other devices they skip with the kernel's reason."""

    @staticmethod
    def _skip_unless_runnable(dev: MTDDevice, test: str) -> None:
        reason = nand_skip_reason(dev, test)
        if reason:
            pytest.skip(f"{test}: {reason}")

    def test_pagetest(self, mtd_device: MTDDevice, request: pytest.FixtureRequest) -> None:
        self._skip_unless_runnable(mtd_device, "mtd_pagetest")
        require_destructive(mtd_device, request.config)
        with self._running(request, "mtd_pagetest") as say:
            pages = run_pagetest(mtd_device, seed=run_seed(request.config), log=say)
        assert pages > 0

    def test_subpagetest(self, mtd_device: MTDDevice) -> None:
        self._skip_unless_runnable(mtd_device, "mtd_subpagetest")

    def test_oobtest(self, mtd_device: MTDDevice) -> None:
        self._skip_unless_runnable(mtd_device, "mtd_oobtest")

    def test_nandbiterrs(self, mtd_device: MTDDevice) -> None:
        self._skip_unless_runnable(mtd_device, "mtd_nandbiterrs")
