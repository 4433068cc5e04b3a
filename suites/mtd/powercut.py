"""Power cuts: random writes, erases and syncs on a device that offers ``power_cut()``
(the :class:`~pytest_folio.targets.protocols.PowerCut` capability), cut at chosen points,
every byte checked after each cut against the states the rules allow (docs/powercut.md).
A device without the capability skips, saying so."""

from __future__ import annotations

from contextlib import ExitStack
from typing import ClassVar

import pytest

from pytest_folio.fixtures.mtd import mtd_opener
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.mtdtests import is_nand
from pytest_folio.mtdtests.engine import Layout
from pytest_folio.mtdtests.log import Op
from pytest_folio.mtdtests.powercut import (
    PowerCutFailure,
    powercut_ops,
    powercut_size,
    run_powercut,
)
from pytest_folio.powercut import cut_report
from pytest_folio.session import settings
from pytest_folio.suites.mtd.base import (
    _MTDSuite,
    _rerun,
    folio_order_of,
    require_destructive,
    run_seed,
)
from pytest_folio.targets.protocols import MTDDevice, PowerCut, power_cut_unit


class MTDPowerCutSuite(_MTDSuite):
    """What was synced survives a power cut, what was not reads old or new, per unit."""

    powercut_rounds: ClassVar[int] = 12       # rounds of writes, erases, sync, cut
    powercut_seed: ClassVar[int | None] = None   # None: the run's seed
    powercut_shrink_seconds: ClassVar[float] = 10.0

    def _run(self, dev: MTDDevice, request: pytest.FixtureRequest, schedule: str) -> None:
        require_destructive(dev, request.config)
        if not isinstance(dev, PowerCut):
            pytest.skip(f"{dev.name} cannot lose power here: it has no power_cut() "
                        "(the PowerCut capability)")
        if is_nand(dev):
            pytest.skip(f"{dev.name} is NAND: the power-cut runs write pages again "
                        "without erasing them")
        order = folio_order_of(dev, request)
        folio = PAGE_SIZE << (order or 0)
        opener = mtd_opener(request)
        size = dev.size
        if opener is not None and opener.target.kind != "path":   # a device of its own
            size = powercut_size(dev.size, dev.erasesize, folio)
        with ExitStack() as stack:
            if size != dev.size:
                assert opener is not None
                dev = stack.enter_context(opener.open(size=size))
            self._cut(dev, request, schedule, Layout.of(dev, folio), size)

    def _cut(self, dev: MTDDevice, request: pytest.FixtureRequest, schedule: str,
             layout: Layout, size: int) -> None:
        seed = self.powercut_seed if self.powercut_seed is not None else run_seed(
            request.config)
        ops = powercut_ops(layout, seed, self.powercut_rounds, schedule)
        with self._running(request, "mtd_powercut") as say:
            say(f"{dev.name}: {len(ops)} operations over {layout.size} bytes, cuts "
                f"{schedule_words(schedule)}, checked in {power_cut_unit(dev)}-byte units")
            try:
                cuts = run_powercut(dev, layout, ops)
            except PowerCutFailure as failure:
                found = failure
            else:
                say(f"{cuts} power cuts, every byte as allowed")
                return
            self._fail_after_cut(request, found, layout, size)

    def _fail_after_cut(self, request: pytest.FixtureRequest, failure: PowerCutFailure,
                        layout: Layout, size: int) -> None:
        """The failure, its run shrunk on fresh devices where the plugin opens them, and
        the command that replays it (the seed makes the same operations and cuts)."""
        opener = mtd_opener(request)
        fails_with = None
        if opener is not None and opener.target.kind != "path":   # not the one real device
            def fails_with(ops: list[Op]) -> str | None:
                with opener.open(size=size) as fresh:
                    try:
                        run_powercut(fresh, layout, ops)
                    except PowerCutFailure as again:
                        return again.summary
                return None

        report = cut_report("mtd power cut", failure.summary, failure.ops, fails_with,
                            seconds=settings(request.config).shrink_budget(
                                self.powercut_shrink_seconds))
        pytest.fail(f"{report}\nmtd power cut: replay it (seed and cut point): "
                    f"{_rerun(request)}", pytrace=False)

    @pytest.mark.folio_erasesizes
    def test_power_cut_after_every_sync_keeps_what_was_synced(
            self, mtd_device: MTDDevice, request: pytest.FixtureRequest) -> None:
        self._run(mtd_device, request, "sync")

    @pytest.mark.folio_erasesizes
    def test_power_cut_between_writes_reads_old_or_new(
            self, mtd_device: MTDDevice, request: pytest.FixtureRequest) -> None:
        self._run(mtd_device, request, "writes")

    @pytest.mark.folio_erasesizes
    def test_power_cut_after_erases_leaves_each_erase_done_or_not(
            self, mtd_device: MTDDevice, request: pytest.FixtureRequest) -> None:
        self._run(mtd_device, request, "erases")


def schedule_words(schedule: str) -> str:
    return {"sync": "right after every sync", "writes": "after writes that follow a sync",
            "erases": "after erases and writes that follow a sync"}[schedule]
