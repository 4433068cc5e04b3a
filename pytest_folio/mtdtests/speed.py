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
from functools import partial
from typing import Any

from pytest_folio.measurement import Measurement
from pytest_folio.mtdtests.common import (
    Geometry,
    MTDParameterError,
    check_data,
    chunked_io,
    mtdtest_erase_eraseblock,
    mtdtest_erase_good_eraseblocks,
    scan_for_bad_eraseblocks,
)
from pytest_folio.sizes import format_kib
from pytest_folio.targets.protocols import (  # noqa: F401  (ChunkedMTD: its old home)
    ChunkedMTD,
    HasStats,
    MTDDevice,
    Snapshot,
)

SUITE = "mtd_speedtest"
MULTIBLOCK_ERASE_BLOCKS = (2, 4, 8, 16, 32, 64)


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


@dataclasses.dataclass(frozen=True)
class SpeedRows:
    """The rows in report order, named like the seed's table."""

    io: tuple[tuple[int, str, str, str], ...]   # (chunk, what, write row, read row)
    erase: str                                  # erase of blocks that hold data
    multiblock: tuple[tuple[int, str], ...]     # (blocks per erase, row)
    erase_erased: str                           # the seed's last row

    @classmethod
    def of(cls, geo: Geometry) -> SpeedRows:
        esz, pgsize = geo.erasesize, geo.pgsize
        io = tuple((chunk, what, f"{label} write ({format_kib(chunk)})",
                    f"{label} read ({format_kib(chunk)})")
                   for chunk, what, label in ((esz, "eraseblock", "Eraseblock"),
                                              (pgsize, "page", "Page"),
                                              (2 * pgsize, "2 page", "2-page")))
        return cls(io, "Erase, blocks hold data",
                   tuple((n, f"Multi-block erase ({n} blocks)")
                         for n in MULTIBLOCK_ERASE_BLOCKS),
                   "Erase, already erased")

    def names(self) -> list[str]:
        return [*(name for _, _, w, r in self.io for name in (w, r)), self.erase,
                *(name for _, name in self.multiblock), self.erase_erased]


def row_names(geo: Geometry) -> list[str]:
    """The rows in report order, named like the seed's table."""
    return SpeedRows.of(geo).names()


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


class SpeedTest:
    """One device's mtd_speedtest, a method per step of speedtest.c: a write and a read
    pass at one I/O size (write_eraseblock, _by_page, _by_2pages and their reads),
    erasing the whole device, and multiblock_erase."""

    def __init__(self, dev: MTDDevice, count: int, seed: int, verify: bool,
                 clock: Callable[[], float], say: Callable[[str], None]) -> None:
        geo = Geometry.of(dev)
        self.dev, self.say, self.verify = dev, say, verify
        say(geo.describe())
        self.esz = geo.erasesize
        self.ebcnt = geo.ebcnt if count <= 0 else min(count, geo.ebcnt)
        self.bbt = scan_for_bad_eraseblocks(dev, geo.ebcnt)[:self.ebcnt]
        self.good = [i for i in range(self.ebcnt) if not self.bbt[i]]
        self.iobuf = random.Random(seed).randbytes(self.esz)
        self.readbuf = bytearray(self.esz)
        self.io = chunked_io(dev)
        self.rows = SpeedRows.of(geo)
        self.rec = _Recorder(dev, clock)

    def write_pass(self, chunk: int) -> None:
        for i in self.good:
            self.io.write_from(i * self.esz, self.iobuf, chunk)

    def read_pass(self, chunk: int, what: str) -> None:
        for i in self.good:
            self.io.read_into(i * self.esz, self.readbuf, chunk)
            if self.verify and self.readbuf != self.iobuf:
                check_data(f"{what}, EB {i}", i * self.esz, bytes(self.readbuf), self.iobuf)

    def erase_whole_device(self) -> None:
        mtdtest_erase_good_eraseblocks(self.dev, self.bbt)

    def multiblock_erase(self, blocks: int) -> None:
        """Erase runs of up to ``blocks`` good eraseblocks, one call per run."""
        i = 0
        while i < self.ebcnt:
            j = 0
            while j < blocks and i + j < self.ebcnt and not self.bbt[i + j]:
                j += 1
            if j < 1:
                i += 1
                continue
            mtdtest_erase_eraseblock(self.dev, i, j)
            i += j

    def timed(self, row: str, what: str, step: Callable[[], None]) -> None:
        """Run one step under the clock and say its speed as the kernel test does."""
        with self.rec.timed(row):
            step()
        ms = self.rec.samples[row][-1]
        speed = 0 if ms <= 0 else int(len(self.good) * self.esz / 1024 / (ms / 1000))
        self.say(f"{what} speed is {speed} KiB/s")

    def one_pass(self) -> None:
        rows = self.rows
        for chunk, what, write_row, read_row in rows.io:
            self.erase_whole_device()
            self.say(f"testing {what} write speed")
            self.timed(write_row, f"{what} write", partial(self.write_pass, chunk))
            self.say(f"testing {what} read speed")
            self.timed(read_row, f"{what} read", partial(self.read_pass, chunk, f"{what} read"))
        self.say("Testing erase speed")
        self.timed(rows.erase, "erase", self.erase_whole_device)
        for n, row in rows.multiblock:
            self.say(f"Testing {n}x multi-block erase speed")
            self.timed(row, f"{n}x multi-block erase", partial(self.multiblock_erase, n))
        self.say("Testing erase speed of already erased blocks")
        self.timed(rows.erase_erased, "already erased erase", self.erase_whole_device)

    def results(self) -> list[SpeedResult]:
        nbytes = len(self.good) * self.esz
        return [SpeedResult(name, self.rec.samples[name], nbytes,
                            {k: v for k, v in self.rec.counters.get(name, {}).items() if v})
                for name in self.rows.names()]


def run_speedtest(dev: MTDDevice, passes: int = 1, count: int = 0, seed: int = 1,
                  verify: bool = True, clock: Callable[[], float] = time.perf_counter,
                  log: Callable[[str], None] | None = None) -> list[SpeedResult]:
    """Run the kernel's sequence ``passes`` times; return one result per row, in order.

    ``count`` limits the test to the first eraseblocks, like the module's ``count``
    parameter (0: all). ``log`` receives mtd_speedtest's lines ("... speed is N KiB/s").
    """
    if passes < 1:
        raise MTDParameterError(f"passes must be at least 1, not {passes}")
    test = SpeedTest(dev, count, seed, verify, clock, log or (lambda line: None))
    for _ in range(passes):
        test.one_pass()
    test.say("finished")
    return test.results()


def format_results(results: list[SpeedResult]) -> list[str]:
    """A small table for the terminal: row, median ms per pass, KiB/s."""
    width = max(len(r.name) for r in results)
    lines = [f"{'Test':<{width}}  {'ms/pass':>10}  {'KiB/s':>12}"]
    lines += [f"{r.name:<{width}}  {r.ms:>10.2f}  {r.kib_per_s:>12.0f}" for r in results]
    return lines
