"""mtd_stresstest: random reads and writes, erasing as needed (drivers/mtd/tests/stresstest.c).

As in the kernel test, each operation touches up to two neighbouring eraseblocks, writes
go only to erased space (each eraseblock is filled from the front and erased when full),
and reads start anywhere. Unlike the kernel test (which writes one buffer over and over),
every write carries random data from a random offset of a random pool made once, and
every read is compared with an in-memory copy of the device, so misplaced, lost, stale or
truncated data is caught, not only errors. Eraseblocks the test has not erased yet hold
unknown data and are not compared. A final pass compares the whole device.

Reads go into one buffer kept for the run (through the device's own chunked calls where it
has them, the /dev/mtdN target's preadv), and every comparison is ``startswith`` at an offset
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
    chunked_io,
    mtdtest_erase_eraseblock,
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


class StressTest:
    """One device's mtd_stresstest, a method per step of stresstest.c: rand_eb,
    do_read, do_write (erasing full eraseblocks first), do_operation."""

    def __init__(self, dev: MTDDevice, seed: int, say: Callable[[str], None]) -> None:
        geo = Geometry.of(dev)
        say(geo.describe())
        if geo.ebcnt < 2:
            raise MTDTestError("error: need at least 2 eraseblocks")
        self.dev, self.say = dev, say
        self.esz, self.pgsize, self.ebcnt = geo.erasesize, geo.pgsize, geo.ebcnt
        self.bufsize = 2 * self.esz          # read or write up to 2 eraseblocks at a time
        self.bbt = scan_for_bad_eraseblocks(dev, self.ebcnt)
        if all(self.bbt[:-1]):
            raise MTDTestError("error: no good eraseblocks to stress")
        self.rng = random.Random(seed)
        self.pool = memoryview(self.rng.randbytes(2 * self.bufsize))  # writes take slices
        self.offsets = [self.esz] * self.ebcnt   # "full": the first write erases the block
        self.shadow = bytearray(geo.size)        # the in-memory copy of the device
        self.known = [False] * self.ebcnt        # shadow is valid once the test erased it
        self.erased = b"\xff" * self.esz
        self.io = chunked_io(dev)
        self.readbuf = memoryview(bytearray(self.bufsize))
        self.res = StressResult(0, 0, 0, 0, 0, 0, seed)

    def rand_eb(self) -> int:
        while True:
            eb = self.rng.randrange(self.ebcnt - 1)
            if not self.bbt[eb]:
                return eb

    def erase(self, eb: int) -> None:
        mtdtest_erase_eraseblock(self.dev, eb)
        self.shadow[eb * self.esz:(eb + 1) * self.esz] = self.erased
        self.known[eb] = True
        self.res.erases += 1

    def read(self, addr: int, length: int) -> memoryview:
        """Into the buffer kept for the run: no allocation per operation."""
        view = self.readbuf[:length]
        self.io.read_into(addr, view)
        return view

    def verify(self, addr: int, data: bytes | memoryview, what: str) -> None:
        """Compare the parts of [addr, addr+len) that lie in eraseblocks we know."""
        esz, shadow, known = self.esz, self.shadow, self.known
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

    def do_read(self, op: int) -> None:
        esz, rng = self.esz, self.rng
        eb = self.rand_eb()
        offs = rng.randrange(self.bufsize)
        length = rng.randrange(self.bufsize - offs)
        if self.bbt[eb + 1]:
            if offs >= esz:
                offs -= esz
            length = min(length, esz - offs)
        addr = eb * esz + offs
        self.verify(addr, self.read(addr, length), f"op {op}: read {length} bytes at {addr:#x}")
        self.res.reads += 1
        self.res.bytes_read += length

    def do_write(self, op: int) -> None:
        esz, pgsize, offsets = self.esz, self.pgsize, self.offsets
        eb = self.rand_eb()
        offs = offsets[eb]
        if offs >= esz:
            self.erase(eb)
            offs = offsets[eb] = 0
        length = self.rng.randrange(self.bufsize - offs)
        length = (length + pgsize - 1) // pgsize * pgsize
        if offs + length > esz:
            if self.bbt[eb + 1]:
                length = esz - offs
            else:
                self.erase(eb + 1)
                offsets[eb + 1] = 0
        addr = eb * esz + offs
        start = self.rng.randrange(len(self.pool) - length + 1)
        data = self.pool[start:start + length]
        self.io.write_from(addr, data)
        self.shadow[addr:addr + length] = data
        self.res.writes += 1
        self.res.bytes_written += length
        offs += length
        while offs > esz:
            offsets[eb] = esz
            eb += 1
            offs -= esz
        offsets[eb] = offs

    def do_operation(self, op: int) -> None:
        if self.rng.getrandbits(1):
            self.do_read(op)
        else:
            self.do_write(op)
        self.res.operations += 1

    def final_compare(self) -> None:
        for eb in range(self.ebcnt):
            if self.known[eb]:
                self.verify(eb * self.esz, self.read(eb * self.esz, self.esz),
                            f"final compare, EB {eb}")


def run_stresstest(dev: MTDDevice, count: int = DEFAULT_COUNT, seed: int = 1,
                   log: Callable[[str], None] | None = None) -> StressResult:
    """Do ``count`` random operations with a ``random.Random(seed)``; raise on a mismatch."""
    test = StressTest(dev, seed, log or (lambda line: None))
    test.say("doing operations")
    for op in range(count):
        if op % 1024 == 0:
            test.say(f"{op} operations done")
        test.do_operation(op)
    test.final_compare()
    test.say(f"finished, {test.res.operations} operations done")
    return test.res
