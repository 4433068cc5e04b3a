"""mtd_speedtest: time one pass over the device per access pattern (drivers/mtd/tests/speedtest.c).

The sub-tests and their order are the kernel's: eraseblock write and read, page write and
read, 2-page write and read (512-byte "pages" when writesize is 1), erase of blocks that
hold data, multi-block erase of 2..64 blocks; then the seed's last row, erasing every
block again when it is already erased (what the MEMERASE ioctl path measures). Unlike the
kernel test, reads are compared with what was written, so a fast but wrong device fails.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

from pytest_folio.measurement import Measurement
from pytest_folio.mtdtests.common import (
    Geometry,
    MTDParameterError,
    check_data,
    mtdtest_erase_eraseblock,
    mtdtest_erase_good_eraseblocks,
    mtdtest_read,
    mtdtest_write,
    scan_for_bad_eraseblocks,
)
from pytest_folio.sizes import format_kib
from pytest_folio.targets.protocols import HasStats, MTDDevice, Snapshot

SUITE = "mtd_speedtest"
MULTIBLOCK_ERASE_BLOCKS = (2, 4, 8, 16, 32, 64)


@runtime_checkable
class ChunkedMTD(Protocol):
    """A device that moves many driver-sized pieces in one call, into and from buffers the
    caller keeps (the /dev/mtdN target: preadv/pwritev, one mtdchar_read/_write per
    ``chunk``). The runners use it when a device has it, so a pass costs one Python call
    per eraseblock instead of one per page, and no allocation."""

    def read_into(self, offset: int, buf: bytearray | memoryview, chunk: int = 0) -> None: ...
    def write_from(self, offset: int, data: bytes | bytearray | memoryview,
                   chunk: int = 0) -> None: ...


@dataclasses.dataclass
class SpeedResult:
    """One sub-test: its row name, one sample per pass, and what it moved."""

    name: str
    samples_ms: list[float]
    nbytes: int                       # bytes covered by one pass
    counters: dict[str, int] = dataclasses.field(default_factory=dict)  # summed, non-zero

    @property
    def ms(self) -> float:
        """Median time per pass (robust against one slow pass)."""
        return statistics.median(self.samples_ms)

    @property
    def kib_per_s(self) -> float:
        """mtd_speedtest's figure: KiB moved per second, from the median pass."""
        return 0.0 if self.ms <= 0 else self.nbytes / 1024 / (self.ms / 1000)

    def to_measurement(self, params: dict[str, Any] | None = None,
                       target: str = "") -> Measurement:
        return Measurement(
            suite=SUITE, name=self.name, unit="ms", samples=list(self.samples_ms),
            params=dict(params or {}), target=target, counters=dict(self.counters),
            extra={"bytes": self.nbytes, "kib_per_s": round(self.kib_per_s, 1)})


def row_names(geo: Geometry) -> list[str]:
    """The rows in report order, named like the seed's table."""
    eb, pg = format_kib(geo.erasesize), format_kib(geo.pgsize)
    two = format_kib(2 * geo.pgsize)
    return [f"Eraseblock write ({eb})", f"Eraseblock read ({eb})",
            f"Page write ({pg})", f"Page read ({pg})",
            f"2-page write ({two})", f"2-page read ({two})",
            "Erase, blocks hold data",
            *(f"Multi-block erase ({n} blocks)" for n in MULTIBLOCK_ERASE_BLOCKS),
            "Erase, already erased"]


def _stats_snapshot(dev: MTDDevice) -> dict[str, int] | None:
    if not isinstance(dev, HasStats) or not isinstance(dev.stats, Snapshot):
        return None
    return {k: int(v) for k, v in dev.stats.snapshot().items() if isinstance(v, int)}


class _Recorder:
    """Times named sections and sums the device's counter deltas per section."""

    def __init__(self, dev: MTDDevice, clock: Callable[[], float]) -> None:
        self.dev = dev
        self.clock = clock
        self.samples: dict[str, list[float]] = {}
        self.counters: dict[str, dict[str, int]] = {}

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        before = _stats_snapshot(self.dev)
        start = self.clock()
        yield
        elapsed_ms = (self.clock() - start) * 1000.0
        self.samples.setdefault(name, []).append(elapsed_ms)
        after = _stats_snapshot(self.dev)
        if before is not None and after is not None:
            total = self.counters.setdefault(name, {})
            for key, value in after.items():
                total[key] = total.get(key, 0) + value - before.get(key, 0)


def run_speedtest(dev: MTDDevice, passes: int = 1, count: int = 0, seed: int = 1,
                  verify: bool = True, clock: Callable[[], float] = time.perf_counter,
                  log: Callable[[str], None] | None = None) -> list[SpeedResult]:
    """Run the kernel's sequence ``passes`` times; return one result per row, in order.

    ``count`` limits the test to the first eraseblocks, like the module's ``count``
    parameter (0: all). ``log`` receives mtd_speedtest's lines ("... speed is N KiB/s").
    """
    if passes < 1:
        raise MTDParameterError(f"passes must be at least 1, not {passes}")
    geo = Geometry.of(dev)
    ebcnt = geo.ebcnt if count <= 0 else min(count, geo.ebcnt)
    say = log or (lambda line: None)
    say(geo.describe())
    bbt = scan_for_bad_eraseblocks(dev, geo.ebcnt)[:ebcnt]
    good = [i for i in range(ebcnt) if not bbt[i]]
    iobuf = random.Random(seed).randbytes(geo.erasesize)
    names = row_names(geo)
    rec = _Recorder(dev, clock)
    esz, pgsize = geo.erasesize, geo.pgsize

    def by_chunks(chunk: int) -> list[tuple[int, int]]:
        """(offset in eraseblock, length) of chunk-sized I/O; an odd last page alone."""
        return [(off, min(chunk, esz - off)) for off in range(0, esz, chunk)]

    chunked = dev if isinstance(dev, ChunkedMTD) else None
    readbuf = bytearray(esz)

    def write_pass(chunk: int) -> None:
        if chunked is not None:
            for i in good:
                chunked.write_from(i * esz, iobuf, chunk)
            return
        chunks = by_chunks(chunk)
        for i in good:
            base = i * esz
            for off, n in chunks:
                mtdtest_write(dev, base + off, iobuf[off:off + n])

    def read_pass(chunk: int, what: str) -> None:
        if chunked is not None:
            for i in good:
                chunked.read_into(i * esz, readbuf, chunk)
                if verify and readbuf != iobuf:
                    check_data(f"{what}, EB {i}", i * esz, bytes(readbuf), iobuf)
            return
        chunks = by_chunks(chunk)
        for i in good:
            base = i * esz
            for off, n in chunks:
                data = mtdtest_read(dev, base + off, n)
                if verify and data != iobuf[off:off + n]:
                    check_data(f"{what}, EB {i}", base + off, data, iobuf[off:off + n])

    def report(name: str, what: str) -> None:
        ms = rec.samples[name][-1]
        speed = 0 if ms <= 0 else int(len(good) * esz / 1024 / (ms / 1000))
        say(f"{what} speed is {speed} KiB/s")

    patterns = [(esz, "eraseblock"), (pgsize, "page"), (2 * pgsize, "2 page")]
    for _ in range(passes):
        mtdtest_erase_good_eraseblocks(dev, bbt)
        for k, (chunk, what) in enumerate(patterns):
            if k:
                mtdtest_erase_good_eraseblocks(dev, bbt)
            say(f"testing {what} write speed")
            with rec.timed(names[2 * k]):
                write_pass(chunk)
            report(names[2 * k], f"{what} write")
            say(f"testing {what} read speed")
            with rec.timed(names[2 * k + 1]):
                read_pass(chunk, f"{what} read")
            report(names[2 * k + 1], f"{what} read")
        say("Testing erase speed")
        with rec.timed(names[6]):
            mtdtest_erase_good_eraseblocks(dev, bbt)
        report(names[6], "erase")
        for n, name in zip(MULTIBLOCK_ERASE_BLOCKS, names[7:13], strict=True):
            say(f"Testing {n}x multi-block erase speed")
            with rec.timed(name):
                i = 0
                while i < ebcnt:
                    j = 0
                    while j < n and i + j < ebcnt and not bbt[i + j]:
                        j += 1
                    if j < 1:
                        i += 1
                        continue
                    mtdtest_erase_eraseblock(dev, i, j)
                    i += j
            report(name, f"{n}x multi-block erase")
        say("Testing erase speed of already erased blocks")
        with rec.timed(names[13]):
            mtdtest_erase_good_eraseblocks(dev, bbt)
        report(names[13], "already erased erase")
    say("finished")
    nbytes = len(good) * esz
    return [SpeedResult(name, rec.samples[name], nbytes,
                        {k: v for k, v in rec.counters.get(name, {}).items() if v})
            for name in names]


def format_results(results: list[SpeedResult]) -> list[str]:
    """A small table for the terminal: row, median ms per pass, KiB/s."""
    width = max(len(r.name) for r in results)
    lines = [f"{'Test':<{width}}  {'ms/pass':>10}  {'KiB/s':>12}"]
    lines += [f"{r.name:<{width}}  {r.ms:>10.2f}  {r.kib_per_s:>12.0f}" for r in results]
    return lines
