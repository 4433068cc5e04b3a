"""The NAND-only mtd tests: page, subpage, OOB and bit-error tests (mtd_pagetest & co).

On a device that is not NAND they stop with the kernel's own reason, ``this test requires
NAND flash``, so a report from a RAM or NOR device reads like the kernel's. On NAND, the
page test runs through the MTDDevice protocol; the subpage, OOB and bit-error tests need
sub-page writes, OOB and raw (ECC-less) access that the protocol does not carry, and say so.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from pytest_folio.mtdtests.common import (
    NAND_REQUIRED,
    Geometry,
    check_data,
    is_nand,
    mtdtest_erase_good_eraseblocks,
    mtdtest_read,
    mtdtest_write,
    scan_for_bad_eraseblocks,
)
from pytest_folio.targets.protocols import MTDDevice

NAND_TESTS = ("mtd_pagetest", "mtd_subpagetest", "mtd_oobtest", "mtd_nandbiterrs")

NEEDS_MORE_THAN_PROTOCOL = {
    "mtd_subpagetest": "needs sub-page writes, which the MTDDevice protocol does not carry",
    "mtd_oobtest": "needs OOB access, which the MTDDevice protocol does not carry",
    "mtd_nandbiterrs": "needs raw (ECC-less) writes, which the MTDDevice protocol does not "
                       "carry",
}


def nand_skip_reason(dev: MTDDevice, test: str) -> str | None:
    """Why ``test`` cannot run on ``dev`` (the kernel's reason first), or None."""
    if not is_nand(dev):
        return NAND_REQUIRED
    return NEEDS_MORE_THAN_PROTOCOL.get(test)


def run_pagetest(dev: MTDDevice, seed: int = 1,
                 log: Callable[[str], None] | None = None) -> int:
    """mtd_pagetest's core: write every page, then read pages and page pairs back.

    Reads of two pages that straddle an eraseblock boundary are checked too, as the
    kernel's test does with its ``twopages`` buffer. Returns the number of pages checked.
    """
    reason = nand_skip_reason(dev, "mtd_pagetest")
    if reason:
        raise ValueError(reason)
    geo = Geometry.of(dev)
    say = log or (lambda line: None)
    say(geo.describe())
    bbt = scan_for_bad_eraseblocks(dev, geo.ebcnt)
    rng = random.Random(seed)
    mtdtest_erase_good_eraseblocks(dev, bbt)
    written: dict[int, bytes] = {}
    say("writing whole device")
    for i in range(geo.ebcnt):
        if bbt[i]:
            continue
        data = rng.randbytes(geo.erasesize)
        for p in range(geo.pgcnt):
            off = p * geo.pgsize
            mtdtest_write(dev, i * geo.erasesize + off, data[off:off + geo.pgsize])
        written[i] = data
    say("verifying all eraseblocks")
    pages = 0
    for i, data in written.items():
        base = i * geo.erasesize
        for p in range(geo.pgcnt):
            off = p * geo.pgsize
            check_data(f"EB {i} page {p}", base + off,
                       mtdtest_read(dev, base + off, geo.pgsize), data[off:off + geo.pgsize])
            pages += 1
        nxt = written.get(i + 1)
        if nxt is not None:
            addr = base + geo.erasesize - geo.pgsize
            check_data(f"EB {i}: two pages across the eraseblock boundary", addr,
                       mtdtest_read(dev, addr, 2 * geo.pgsize),
                       data[-geo.pgsize:] + nxt[:geo.pgsize])
    say("finished")
    return pages
