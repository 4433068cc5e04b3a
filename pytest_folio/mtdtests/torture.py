"""mtd_torturetest: erase, check 0xFF, write a pattern, verify, repeat (torturetest.c).

Parameters keep the kernel module's names and meaning: ``eb`` (first eraseblock, 8),
``ebcnt`` (how many, 32), ``pgcnt`` (pages per eraseblock, 0 = all, counted from the end
of the block), ``check`` (verify, on) and ``cycles_count``. The kernel's default is
endless cycling; here it is a handful, and ``eb``/``ebcnt`` shrink to fit a small device.
Pages alternate 0x55/0xAA, and the pattern flips every cycle, so each byte of every page
sees both values and a stale or misplaced page cannot match by luck.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pytest_folio.mtdtests.common import (
    Geometry,
    MTDParameterError,
    MTDTestError,
    check_data,
    mtdtest_erase_good_eraseblocks,
    mtdtest_read,
    mtdtest_write,
    scan_for_bad_eraseblocks,
)
from pytest_folio.targets.protocols import MTDDevice

DEFAULT_EB = 8
DEFAULT_EBCNT = 32
DEFAULT_CYCLES = 8
RETRIES = 3   # the kernel re-reads a mismatching block this many times before giving up


@dataclasses.dataclass
class TortureResult:
    eb: int
    ebcnt: int
    erase_cycles: int


def fit_range(geo: Geometry, eb: int | None, ebcnt: int | None) -> tuple[int, int]:
    """The kernel's eb/ebcnt, shrunk to the device when not given explicitly."""
    if ebcnt is None:
        ebcnt = min(DEFAULT_EBCNT, geo.ebcnt)
    if eb is None:
        eb = max(0, min(DEFAULT_EB, geo.ebcnt - ebcnt))
    if eb < 0 or ebcnt < 1 or eb + ebcnt > geo.ebcnt:
        raise MTDParameterError(f"eraseblocks {eb}..{eb + ebcnt - 1} are outside the device "
                         f"(0..{geo.ebcnt - 1})")
    return eb, ebcnt


def patterns(geo: Geometry) -> tuple[bytes, bytes]:
    """(0x55AA55..., 0xAA55AA...) page by page, over one eraseblock."""
    a, b = b"\x55" * geo.pgsize, b"\xaa" * geo.pgsize
    pairs = geo.pgcnt // 2
    odd = geo.pgcnt % 2
    return (a + b) * pairs + a * odd, (b + a) * pairs + b * odd


def run_torturetest(dev: MTDDevice, eb: int | None = None, ebcnt: int | None = None,
                    pgcnt: int = 0, check: bool = True, cycles_count: int = DEFAULT_CYCLES,
                    log: Callable[[str], None] | None = None) -> TortureResult:
    """Torture eraseblocks eb..eb+ebcnt-1 for ``cycles_count`` erase cycles."""
    geo = Geometry.of(dev)
    say = log or (lambda line: None)
    eb, ebcnt = fit_range(geo, eb, ebcnt)
    if pgcnt and not 0 < pgcnt <= geo.pgcnt:
        raise MTDParameterError(f"invalid pgcnt value {pgcnt} (1..{geo.pgcnt})")
    if cycles_count < 1:
        raise MTDParameterError(f"cycles_count must be at least 1, not {cycles_count}")
    say(f"torture {ebcnt} eraseblocks ({eb}-{eb + ebcnt - 1})")
    length = pgcnt * geo.pgsize if pgcnt else geo.erasesize
    skip = geo.erasesize - length            # pgcnt pages at the end of each block
    patt_5a5, patt_a5a = patterns(geo)
    patt_ff = b"\xff" * geo.erasesize
    bbt = scan_for_bad_eraseblocks(dev, geo.ebcnt)
    good = [i for i in range(eb, eb + ebcnt) if not bbt[i]]

    def check_eraseblock(i: int, expected: bytes, what: str) -> None:
        addr = i * geo.erasesize + skip
        want = expected[skip:]
        for attempt in range(RETRIES + 1):
            got = mtdtest_read(dev, addr, length)
            if got == want:
                return
            if attempt == RETRIES:
                check_data(f"verify failed for {what} pattern, EB {i} "
                           f"(retried {RETRIES} times)", addr, got, want)
                raise MTDTestError(f"EB {i}: data changed between reads")

    cycles = 0
    while cycles < cycles_count:
        mtdtest_erase_good_eraseblocks(dev, bbt, eb, ebcnt)
        if check:
            for i in good:
                check_eraseblock(i, patt_ff, "0xFF...")
        first = patt_5a5 if (eb + cycles) & 1 else patt_a5a
        name = "0x55AA55..." if (eb + cycles) & 1 else "0xAA55AA..."
        for i in good:
            mtdtest_write(dev, i * geo.erasesize + skip, first[skip:])
        if check:
            for i in good:
                check_eraseblock(i, first, name)
        cycles += 1
    say(f"finished after {cycles} erase cycles")
    return TortureResult(eb, ebcnt, cycles)
