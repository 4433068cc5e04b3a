"""The kernel's own MTD tests (drivers/mtd/tests) as items: ``vm --mtd-tests``.

Each item loads one test module in the VM guest against the kernel's MTD device of its
folio order (``dev=N``) and passes when the module's test returned 0 with no error in its
log; the NAND-only tests skip with the kernel's own reason. mtd_speedtest's figures go to
the timing collector under our speed suite's row names (target ``kernel:mtd_speedtest``),
followed by the seed's last row, erasing the already erased device through the MEMERASE
ioctl, so ``compare`` prints the block2mtd seed's table from the kernel's tool. Outside the
VM, or without ``--mtd-tests``, the items skip and say so.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.measurement import Measurement
from pytest_folio.mtdtests.common import mtdtest_erase_good_eraseblocks
from pytest_folio.mtdtests.kernel_modules import (
    INTERLEAVE_ENV,
    KERNEL_TESTS,
    MODULES_ENV,
    KernelDevice,
    KernelTestRun,
    kernel_mtd_devices,
    run_kernel_test,
    speed_rows,
    swap_block2mtd,
    torture_params,
)
from pytest_folio.session import settings
from pytest_folio.sizes import format_size
from pytest_folio.suites.mtd.base import run_seed
from pytest_folio.suites.mtd.race import RaceCounts, run_invalidate_race
from pytest_folio.targets.mtdchar import open_mtd_char
from pytest_folio.terminal import progress

FOLIO_KIND = "mtd"      # flash tests: deselected when only --folio-fs is named
RACE_PASSES = 2         # per side, ABBA: each pass runs --folio-race-seconds per device
SPEED_PASSES = 4        # samples per row: the fewest the collector's significance test takes
INTERLEAVED_PASSES = 10  # per side, ABBA...: two sides in one boot take more samples
SUITE = "mtd_speedtest"
KERNEL_TARGET = "kernel:mtd_speedtest"
ALREADY_ERASED = "Erase, already erased"


@pytest.fixture
def kernel_mtd(folio_order: int) -> tuple[Path, KernelDevice]:
    """The built test modules and the kernel's MTD device at this folio order."""
    modules = os.environ.get(MODULES_ENV)
    if os.environ.get("PYTEST_FOLIO_VM") != "1" or not modules:
        pytest.skip("the kernel's mtd tests run in the VM: python -m pytest_folio vm "
                    "--mtd-tests -- ...")
    devices = [d for d in kernel_mtd_devices() if d.folio_order == folio_order]
    if not devices:
        size = format_size(PAGE_SIZE << folio_order)
        pytest.skip(f"kernel {os.uname().release} has no block2mtd device with {size} "
                    f"folios (block devices get large folios from Linux 6.15 on)")
    return Path(modules), devices[0]


def _run(request: pytest.FixtureRequest, kernel_mtd: tuple[Path, KernelDevice],
         name: str, extra: dict[str, str] | None = None) -> KernelTestRun:
    """Run one test module; skip with the kernel's reason when it wants NAND; fail
    unless it returned 0, logged no error and ended with its "finished" line."""
    if not settings(request.config).allow_destructive:
        pytest.skip(f"{kernel_mtd[1].path} is a real device and the kernel's mtd tests "
                    f"erase and write it; pass --folio-allow-destructive to allow it")
    run = run_kernel_test(kernel_mtd[0], KERNEL_TESTS[name], kernel_mtd[1], extra)
    request.node.add_report_section("call", f"kernel log ({run.test.module})",
                                    "\n".join(run.log))
    reason = run.nand_only_reason()
    if reason is not None:
        pytest.skip(reason)
    tail = "; ".join(run.log[-3:]) or "nothing logged"
    assert run.errno == 0, f"{run.test.module} failed: {os.strerror(run.errno)} ({tail})"
    assert not run.problems(), f"{run.test.module} logged: {'; '.join(run.problems())}"
    assert run.passed(), f"{run.test.module} did not finish: {tail}"
    return run


def _time_memerase(device: KernelDevice) -> float:
    """ms to erase every eraseblock of the (already erased) device, one MEMERASE each."""
    dev = open_mtd_char(device.path, allow_destructive=True, exclusive=True)
    try:
        bbt = [False] * (dev.size // dev.erasesize)
        start = time.perf_counter()
        mtdtest_erase_good_eraseblocks(dev, bbt)
        return (time.perf_counter() - start) * 1000.0
    finally:
        dev.close()


def _speed_pass(request: pytest.FixtureRequest, kernel_mtd: tuple[Path, KernelDevice],
                samples: dict[str, list[float]]) -> None:
    """One mtd_speedtest run on the device, then the MEMERASE row; a sample per row."""
    device = kernel_mtd[1]
    run = _run(request, kernel_mtd, "speedtest")
    rows = speed_rows(run.log, device.erasesize, device.writesize)
    assert "Eraseblock write" in " ".join(rows), f"no speed lines in {run.log[-3:]}"
    for name, ms in rows.items():
        samples.setdefault(name, []).append(ms)
    # mtd_speedtest ends with multi-block erases: every block is erased now
    samples.setdefault(ALREADY_ERASED, []).append(_time_memerase(device))


def _announce(request: pytest.FixtureRequest, device: KernelDevice,
              samples: dict[str, list[float]], target: str | None = None) -> None:
    """The rows to the timing collector, under our speed suite's names; ``target``
    names them all (else the kernel's tool, and the device for the MEMERASE row)."""
    params = {"folio": format_size(PAGE_SIZE << (device.folio_order or 0))}
    nbytes = device.size // device.erasesize * device.erasesize
    for name, values in samples.items():
        where = target or (device.path if name == ALREADY_ERASED else KERNEL_TARGET)
        request.config.hook.pytest_folio_measurement(item=request.node, measurement=Measurement(
            suite=SUITE, name=name, unit="ms", samples=values, params=params, target=where,
            extra={"bytes": nbytes, "source": "MEMERASE ioctl" if name == ALREADY_ERASED
                   else "mtd_speedtest"}))


def test_kernel_mtd_speedtest(kernel_mtd: tuple[Path, KernelDevice],
                              request: pytest.FixtureRequest) -> None:
    samples: dict[str, list[float]] = {}
    for _ in range(SPEED_PASSES):
        _speed_pass(request, kernel_mtd, samples)
    _announce(request, kernel_mtd[1], samples)


def _interleaved_sides(staged: Path) -> dict[str, str]:
    """The two targets of an interleaved boot, the same for every suite in it, so one
    saved run holds a base and a patched and ``compare RUN`` prints them as one grid."""
    origin = (staged / "origin").read_text().strip()
    return {"base": "kernel, stock block2mtd", "patched": f"kernel, block2mtd built with {origin}"}


def _in_turn(staged: Path, devices: list[KernelDevice], passes: int,
             step: Callable[[int, str, KernelDevice], None]) -> list[KernelDevice]:
    """The stock and the built block2mtd loaded in turn, ABBA..., ``step(pass, side,
    device)`` on every device each time; the boot's module again after, for the items
    that follow. The devices as they are at the end (each swap reattaches them)."""
    order = ["base", "patched"]
    try:
        for n in range(passes):
            for side in (order if n % 2 == 0 else order[::-1]):
                devices = swap_block2mtd(staged / side / "block2mtd.ko", devices)
                for device in devices:
                    step(n, side, device)
    finally:
        devices = swap_block2mtd(staged / "base" / "block2mtd.ko", devices)
    return devices


def test_kernel_mtd_speedtest_interleaved(request: pytest.FixtureRequest) -> None:
    """Base and patched block2mtd in turn in one boot (``vm --interleave``): every pass
    swaps the module and runs mtd_speedtest on each device, in the order ABBA..., so a
    host that slows down or speeds up during the run moves both sides alike. The rows go
    to the collector under two targets; ``compare RUN`` prints them as the seed's grid."""
    staged, modules = os.environ.get(INTERLEAVE_ENV), os.environ.get(MODULES_ENV)
    if os.environ.get("PYTEST_FOLIO_VM") != "1" or not staged or not modules:
        pytest.skip("base and patched in turn in one boot: python -m pytest_folio vm "
                    "--mtd-tests --patch FILE --interleave -- ...")
    devices = [d for d in kernel_mtd_devices() if d.folio_order is not None]
    sides = _interleaved_sides(Path(staged))
    samples: dict[str, dict[int, dict[str, list[float]]]] = {
        side: {d.number: {} for d in devices} for side in sides}
    devices = _in_turn(Path(staged), devices, INTERLEAVED_PASSES, lambda n, side, device:
                       _speed_pass(request, (Path(modules), device),
                                   samples[side][device.number]))
    for side, target in sides.items():
        for device in devices:
            _announce(request, device, samples[side][device.number], target)


def test_block2mtd_invalidate_race_interleaved(request: pytest.FixtureRequest) -> None:
    """The invalidate race on the stock and the built block2mtd in turn in one boot
    (``vm --patch FILE --interleave``), ABBA, on every block2mtd device: the built one
    must lose nothing; how often the stock one lost a write is the item's report (and
    its rows, "Lost writes and erases" per run, go to the collector per side)."""
    staged = os.environ.get(INTERLEAVE_ENV)
    if os.environ.get("PYTEST_FOLIO_VM") != "1" or not staged:
        pytest.skip("the stock and the patched block2mtd in turn in one boot: python -m "
                    "pytest_folio vm --patch FILE --interleave -- -k race ...")
    devices = [d for d in kernel_mtd_devices() if d.folio_order is not None]
    sides = _interleaved_sides(Path(staged))
    seconds = settings(request.config).race_seconds
    totals = {side: RaceCounts() for side in sides}
    runs: dict[str, dict[int, list[float]]] = {side: {} for side in sides}

    def race(n: int, side: str, device: KernelDevice) -> None:
        dev = open_mtd_char(device.path, allow_destructive=True)
        try:
            counts = run_invalidate_race(dev, seconds, run_seed(request.config) + n)
        finally:
            dev.close()
        totals[side].add(counts)
        runs[side].setdefault(device.number, []).append(float(len(counts.lost)))

    devices = _in_turn(Path(staged), devices, RACE_PASSES, race)
    lines = []
    for side, what in sides.items():
        shown = sum(1 for per in runs[side].values() for lost in per if lost)
        total = sum(len(per) for per in runs[side].values())
        lines.append(f"{what}: {totals[side].summary()}; {shown} of {total} runs lost data")
        lines += [f"  {line}" for line in totals[side].lost[:10]]
        for device in devices:
            request.config.hook.pytest_folio_measurement(item=request.node, measurement=Measurement(
                suite="invalidate_race", name="Lost writes and erases", unit="count",
                samples=runs[side].get(device.number, []),
                params={"folio": format_size(PAGE_SIZE << (device.folio_order or 0))},
                target=what,
                extra={"seconds": seconds, "page_writes": totals[side].page_writes}))
    request.node.add_report_section("call", "invalidate race", "\n".join(lines))
    for line in lines[:1] + [ln for ln in lines if not ln.startswith("  ")][1:]:
        progress.step(f"invalidate_race: {line}")
    if totals["patched"].lost:
        pytest.fail(f"{sides['patched']}: {totals['patched'].summary()}; "
                    + "; ".join(totals["patched"].lost[:5]), pytrace=False)


def test_kernel_mtd_readtest(kernel_mtd: tuple[Path, KernelDevice],
                             request: pytest.FixtureRequest) -> None:
    _run(request, kernel_mtd, "readtest")


def test_kernel_mtd_stresstest(kernel_mtd: tuple[Path, KernelDevice],
                               request: pytest.FixtureRequest) -> None:
    _run(request, kernel_mtd, "stresstest")


def test_kernel_mtd_torturetest(kernel_mtd: tuple[Path, KernelDevice],
                                request: pytest.FixtureRequest) -> None:
    _run(request, kernel_mtd, "torturetest", torture_params(kernel_mtd[1]))


# NAND-only: on block2mtd these skip with the kernel's "this test requires NAND flash"
def test_kernel_mtd_oobtest(kernel_mtd: tuple[Path, KernelDevice],
                            request: pytest.FixtureRequest) -> None:
    _run(request, kernel_mtd, "oobtest")


def test_kernel_mtd_pagetest(kernel_mtd: tuple[Path, KernelDevice],
                             request: pytest.FixtureRequest) -> None:
    _run(request, kernel_mtd, "pagetest")


def test_kernel_mtd_subpagetest(kernel_mtd: tuple[Path, KernelDevice],
                                request: pytest.FixtureRequest) -> None:
    _run(request, kernel_mtd, "subpagetest")


def test_kernel_mtd_nandbiterrs(kernel_mtd: tuple[Path, KernelDevice],
                                request: pytest.FixtureRequest) -> None:
    _run(request, kernel_mtd, "nandbiterrs")
