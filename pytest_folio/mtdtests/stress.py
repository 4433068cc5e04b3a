"""mtd_stresstest: random reads and writes, erasing as needed (drivers/mtd/tests/stresstest.c).

As in the kernel test, each operation touches up to two neighbouring eraseblocks, writes
go only to erased space (each eraseblock is filled from the front and erased when full),
and reads start anywhere. Unlike the kernel test (which writes one buffer over and over),
every write carries random data from a random offset of a random pool made once, and
every read is compared with an in-memory copy of the device, so misplaced, lost, stale or
truncated data is caught, not only errors. Eraseblocks the test has not erased yet hold
unknown data and are not compared. A final pass compares the whole device.

On a device with chunked I/O (:class:`~.speed.ChunkedMTD`, the /dev/mtdN target) reads
go into one buffer kept for the run, and every comparison is ``startswith`` at an offset
of the copy: a memcmp, with no slice copied and nothing allocated per operation.
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
from pytest_folio.mtdtests.speed import ChunkedMTD
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
    pool = memoryview(rng.randbytes(2 * bufsize))  # writes take slices of it
    offsets = [esz] * ebcnt                   # "full": the first write erases the block
    shadow = bytearray(geo.size)              # the in-memory copy of the device
    known = [False] * ebcnt                   # shadow is valid once the test erased it
    erased = b"\xff" * esz
    chunked = dev if isinstance(dev, ChunkedMTD) else None
    readbuf = memoryview(bytearray(bufsize))
    res = StressResult(0, 0, 0, 0, 0, 0, seed)

    def rand_eb() -> int:
        while True:
            eb = rng.randrange(ebcnt - 1)
            if not bbt[eb]:
                return eb

    def erase(eb: int) -> None:
        mtdtest_erase_eraseblock(dev, eb)
        shadow[eb * esz:(eb + 1) * esz] = erased
        known[eb] = True
        res.erases += 1

    def read(addr: int, length: int) -> bytes | memoryview:
        if chunked is None:
            return mtdtest_read(dev, addr, length)
        view = readbuf[:length]
        chunked.read_into(addr, view)
        return view

    def verify(addr: int, data: bytes | memoryview, what: str) -> None:
        """Compare the parts of [addr, addr+len) that lie in eraseblocks we know."""
        end = addr + len(data)
        if end > addr and all(known[addr // esz:(end - 1) // esz + 1]):
            if not shadow.startswith(data, addr):
                check_data(what, addr, bytes(data), bytes(shadow[addr:end]))
            return
        pos = addr
        while pos < end:
            eb = pos // esz
            stop = min(end, (eb + 1) * esz)
            part = data[pos - addr:stop - addr]
            if known[eb] and not shadow.startswith(part, pos):
                check_data(what, pos, bytes(part), bytes(shadow[pos:stop]))
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
        verify(addr, read(addr, length), f"op {op}: read {length} bytes at {addr:#x}")
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
        start = rng.randrange(len(pool) - length + 1)
        data = pool[start:start + length]
        if chunked is not None:
            chunked.write_from(addr, data)
        else:
            mtdtest_write(dev, addr, bytes(data))
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
            verify(eb * esz, read(eb * esz, esz), f"final compare, EB {eb}")
    say(f"finished, {res.operations} operations done")
    return res
