"""mtd_readtest: read every page of the device (drivers/mtd/tests/readtest.c).

Reading changes nothing, so this runs on any device, real ones included. Beyond the
kernel test (which only checks for errors), each eraseblock is read twice, page by page
and whole, and the two must agree byte for byte and in length: a short read at a folio
boundary or a page read that lands in the wrong place shows up without knowing what the
device holds. OOB is read only when ``oobsize > 0`` and the device offers ``read_oob``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pytest_folio.mtdtests.common import (
    Geometry,
    MTDTestError,
    check_data,
    mtdtest_read,
    scan_for_bad_eraseblocks,
)
from pytest_folio.targets.protocols import HasOOB, MTDDevice


@dataclasses.dataclass
class ReadResult:
    pages: int                 # pages read
    eraseblocks: int           # good eraseblocks read
    oob_pages: int             # pages whose OOB was read
    oob_skipped: str = ""      # why OOB was not read although oobsize > 0


def run_readtest(dev: MTDDevice, count: int = 0,
                 log: Callable[[str], None] | None = None) -> ReadResult:
    """Read the first ``count`` eraseblocks (0: all) page by page, and whole, and compare."""
    geo = Geometry.of(dev)
    say = log or (lambda line: None)
    say(geo.describe())
    ebcnt = geo.ebcnt if count <= 0 else min(count, geo.ebcnt)
    bbt = scan_for_bad_eraseblocks(dev, geo.ebcnt)
    read_oob = dev.read_oob if isinstance(dev, HasOOB) else None
    result = ReadResult(pages=0, eraseblocks=0, oob_pages=0)
    if geo.oobsize and read_oob is None:
        result.oob_skipped = "the device has no read_oob()"
    say("testing page read")
    for i in range(ebcnt):
        if bbt[i]:
            continue
        base = i * geo.erasesize
        pages = []
        for p in range(geo.pgcnt):
            addr = base + p * geo.pgsize
            pages.append(mtdtest_read(dev, addr, geo.pgsize))
            if geo.oobsize and read_oob is not None:
                oob = read_oob(addr, geo.oobsize)
                if len(oob) != geo.oobsize:
                    raise MTDTestError(f"error: read oob failed at {addr:#x}: "
                                       f"{len(oob)} of {geo.oobsize} bytes")
                result.oob_pages += 1
        whole = mtdtest_read(dev, base, geo.erasesize)
        check_data(f"EB {i}: page-by-page read differs from eraseblock read", base,
                   b"".join(pages), whole)
        result.pages += geo.pgcnt
        result.eraseblocks += 1
    say("finished")
    return result
