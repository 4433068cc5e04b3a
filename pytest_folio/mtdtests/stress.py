"""mtd_stresstest: random reads and writes, erasing as needed (drivers/mtd/tests/stresstest.c).

As in the kernel test, each operation touches up to two neighbouring eraseblocks, writes
go only to erased space (each eraseblock is filled from the front and erased when full),
and reads start anywhere. Unlike the kernel test, every write carries fresh random data
and every read is compared with an in-memory copy of the device, so misplaced, lost,
stale or truncated data is caught, not only errors. Eraseblocks the test has not erased
yet hold unknown data and are not compared. A final pass compares the whole device.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

from pytest_folio.mtdtests.common import (
    Geometry,
    MTDTestError,
    check_data,
    mtdtest_erase_eraseblock,
    mtdtest_read,
    mtdtest_write,
    scan_for_bad_eraseblocks,
)
from pytest_folio.targets.protocols import MTDDevice

DEFAULT_COUNT = 10000   # the kernel module's default for ``count``


@dataclasses.dataclass
class StressResult:
    operations: int
    reads: int
    writes: int
    erases: int
    bytes_read: int
    bytes_written: int
    seed: int


def run_stresstest(dev: MTDDevice, count: int = DEFAULT_COUNT, seed: int = 1,
                   log: Callable[[str], None] | None = None) -> StressResult:
    """Do ``count`` random operations with a ``random.Random(seed)``; raise on a mismatch."""
    geo = Geometry.of(dev)
    say = log or (lambda line: None)
    say(geo.describe())
    if geo.ebcnt < 2:
        raise MTDTestError("error: need at least 2 eraseblocks")
    esz, pgsize, ebcnt = geo.erasesize, geo.pgsize, geo.ebcnt
    bufsize = 2 * esz                         # read or write up to 2 eraseblocks at a time
    bbt = scan_for_bad_eraseblocks(dev, ebcnt)
    if all(bbt[:-1]):
        raise MTDTestError("error: no good eraseblocks to stress")
    rng = random.Random(seed)
    offsets = [esz] * ebcnt                   # "full": the first write erases the block
    shadow = bytearray(geo.size)              # the in-memory copy of the device
    known = [False] * ebcnt                   # shadow is valid once the test erased it
    res = StressResult(0, 0, 0, 0, 0, 0, seed)

    def rand_eb() -> int:
        while True:
            eb = rng.randrange(ebcnt - 1)
            if not bbt[eb]:
                return eb

    def erase(eb: int) -> None:
        mtdtest_erase_eraseblock(dev, eb)
        shadow[eb * esz:(eb + 1) * esz] = b"\xff" * esz
        known[eb] = True
        res.erases += 1

    def verify(addr: int, data: bytes, what: str) -> None:
        """Compare the parts of [addr, addr+len) that lie in eraseblocks we know."""
        end = addr + len(data)
        pos = addr
        while pos < end:
            eb = pos // esz
            stop = min(end, (eb + 1) * esz)
            if known[eb]:
                check_data(what, pos, data[pos - addr:stop - addr], bytes(shadow[pos:stop]))
            pos = stop

    def do_read(op: int) -> None:
        eb = rand_eb()
        offs = rng.randrange(bufsize)
        length = rng.randrange(bufsize - offs)
        if bbt[eb + 1]:
            if offs >= esz:
                offs -= esz
            length = min(length, esz - offs)
        addr = eb * esz + offs
        data = mtdtest_read(dev, addr, length)
        verify(addr, data, f"op {op}: read {length} bytes at {addr:#x}")
        res.reads += 1
        res.bytes_read += length

    def do_write(op: int) -> None:
        eb = rand_eb()
        offs = offsets[eb]
        if offs >= esz:
            erase(eb)
            offs = offsets[eb] = 0
        length = rng.randrange(bufsize - offs)
        length = (length + pgsize - 1) // pgsize * pgsize
        if offs + length > esz:
            if bbt[eb + 1]:
                length = esz - offs
            else:
                erase(eb + 1)
                offsets[eb + 1] = 0
        addr = eb * esz + offs
        data = rng.randbytes(length)
        mtdtest_write(dev, addr, data)
        shadow[addr:addr + length] = data
        res.writes += 1
        res.bytes_written += length
        offs += length
        while offs > esz:
            offsets[eb] = esz
            eb += 1
            offs -= esz
        offsets[eb] = offs

    say("doing operations")
    for op in range(count):
        if op % 1024 == 0:
            say(f"{op} operations done")
        if rng.getrandbits(1):
            do_read(op)
        else:
            do_write(op)
        res.operations += 1
    for eb in range(ebcnt):
        if known[eb]:
            addr = eb * esz
            check_data(f"final compare, EB {eb}", addr, mtdtest_read(dev, addr, esz),
                       bytes(shadow[addr:addr + esz]))
    say(f"finished, {res.operations} operations done")
    return res
