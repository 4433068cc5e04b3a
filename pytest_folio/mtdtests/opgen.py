"""The random operations of fsx for flash, aimed at where folio-cached flash drivers go
wrong: offsets on and next to page, folio and eraseblock boundaries and at the last byte,
unaligned lengths, data that is random, all 0xFF, all 0x00, identical to what is there,
or a mix of those page by page, erases of one, a few, eight or more eraseblocks and of
the whole device, sync and reopen interleaved, and sweeps over the whole device that push
any cache smaller than it out several times.

Besides, every edge of the MTD interface: reads, writes and erases of nothing at the
start, at boundaries, at the last byte and at the device's end (where a read or write of
nothing is valid and an erase is not), erases of part of an eraseblock (page-aligned and
not), the last eraseblock erased and read back, and, on a device that can drop its clean
cached folios, reads over a range whose folios are partly cached (dirty) and partly read
in again.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.mtdtests.engine import Layout, sweep_chunk
from pytest_folio.mtdtests.log import Op


class OpMaker:
    """Operations aimed at the places folio-cached flash drivers get wrong."""

    def __init__(self, layout: Layout, rng: random.Random) -> None:
        self.layout = layout
        self.rng = rng
        units = {PAGE_SIZE, layout.folio, layout.erasesize, layout.writesize}
        self.units = sorted(u for u in units if u <= layout.size)

    def point(self) -> int:
        """An offset on or next to a page, folio or eraseblock boundary, or near the end."""
        rng, size = self.rng, self.layout.size
        unit = rng.choice(self.units)
        if rng.random() < 0.2:
            base = size - unit * rng.randrange(1, 3)
        else:
            base = unit * rng.randrange(size // unit)
        delta = rng.choice((0, 0, 0, -1, 1, -rng.randrange(1, 600), rng.randrange(1, 600),
                            rng.randrange(unit)))
        return min(max(0, base + delta), size - 1)

    def length(self, offset: int) -> int:
        """An unaligned or boundary-sized length that fits from ``offset``."""
        rng, lay = self.rng, self.layout
        unit = rng.choice(self.units)
        pick = rng.randrange(6)
        if pick == 0:
            n = rng.randrange(1, 600)
        elif pick == 1:
            n = unit + rng.choice((-1, 0, 0, 1))
        elif pick == 2:
            n = unit * rng.randrange(2, 5) + rng.choice((-1, 0, 1))
        elif pick == 3:      # end on or next to the next boundary
            n = (offset // unit + rng.randrange(1, 3)) * unit + rng.choice((-1, 0, 0, 1)) - offset
        elif pick == 4:
            n = rng.randrange(1, 2 * max(lay.erasesize, lay.folio))
        else:
            n = lay.size - offset   # to the last byte
        cap = 4 * max(lay.erasesize, lay.folio)
        return max(1, min(n, lay.size - offset, cap))

    def rw(self, kind: str) -> Op:
        offset = self.point()
        length = self.length(offset)
        if kind == "read":
            return Op("read", offset, length)
        return self.write(offset, length)

    def write(self, offset: int, length: int, fill: str | None = None) -> Op:
        lay, rng = self.layout, self.rng
        if lay.writesize > 1:   # whole pages of the flash
            end = -(-(offset + length) // lay.writesize) * lay.writesize
            offset = offset // lay.writesize * lay.writesize
            length = min(end, lay.size) - offset
        fill = fill or rng.choice(("rand", "rand", "rand", "pages", "pages", "ff", "00",
                                   "same", "same"))
        return Op("write", offset, length, fill, rng.getrandbits(32))

    def erase(self) -> Op:
        rng, lay = self.rng, self.layout
        ebcnt = lay.ebcnt
        pick = rng.random()
        if pick < 0.015:
            return Op("erase", 0, lay.size)
        count = (1 if pick < 0.55 else rng.randrange(2, 5) if pick < 0.8
                 else rng.randrange(8, 17))
        count = min(count, ebcnt)
        choice = rng.random()
        block = (ebcnt - count if choice < 0.15 else 0 if choice < 0.2
                 else rng.randrange(ebcnt - count + 1))
        return Op("erase", block * lay.erasesize, count * lay.erasesize)

    def out_of_range(self) -> Op:
        """An operation that reaches past the end: EINVAL, and nothing may change."""
        rng, size = self.rng, self.layout.size
        kind = rng.choice(("read", "write", "erase"))
        if kind == "erase":
            start = rng.choice((size, size - self.layout.erasesize))
            return Op("erase", start, 2 * self.layout.erasesize)
        offset = size - rng.choice((0, 1, PAGE_SIZE, rng.randrange(1, 600)))
        length = size - offset + rng.choice((1, 1, PAGE_SIZE))
        # data unlike what is there: a write that stores part of itself before it
        # fails must show
        return Op("read", offset, length) if kind == "read" else Op(
            "write", offset, length, "rand", rng.getrandbits(32))

    def edge(self, zero_length: bool) -> list[Op]:
        """One of the interface's edges (see the module docstring)."""
        rng, lay = self.rng, self.layout
        size, esz = lay.size, lay.erasesize
        pick = rng.randrange(6 if zero_length else 4)
        if pick == 0:        # part of an eraseblock, then what is around it read back
            if esz > PAGE_SIZE and rng.random() < 0.6:      # whole pages
                first = rng.randrange(size // PAGE_SIZE)
                pages = rng.randrange(1, 2 * esz // PAGE_SIZE)
                offset, length = first * PAGE_SIZE, pages * PAGE_SIZE
            else:
                offset = self.point()
                length = rng.randrange(1, 2 * esz)
            length = min(length, size - offset)
            block = offset // esz * esz
            return [Op("erase", offset, length),
                    Op("read", block, min(size, -(-(offset + length) // esz) * esz) - block)]
        if pick == 1:        # the last eraseblock
            return [Op("erase", size - esz, esz), Op("read", size - esz, esz)]
        if pick == 2:        # the last bytes, read
            n = rng.choice((1, lay.writesize, PAGE_SIZE, lay.folio, esz))
            return [Op("read", size - min(n, size), min(n, size))]
        if pick == 3:        # a partly cached range: write, sync, write, drop, read
            if not lay.can_drop:
                return [self.rw("read")]
            f = lay.folio
            start = rng.randrange(max(1, size // f - 3)) * f
            span = min(4 * f, size - start)
            second = start + min(2 * f, span - 1)
            return [self.write(start, min(f, span), "rand"), Op("sync"),
                    self.write(second, min(1 + rng.randrange(f), size - second), "rand"),
                    Op("drop"), Op("read", start, span)]
        offset = rng.choice((0, size, size - 1, self.point()))
        if pick == 4:        # an erase of nothing: a no-op inside, EINVAL at the end
            return [Op("erase", offset, 0)]
        return [Op("read", offset, 0) if rng.getrandbits(1) else Op("write", offset, 0,
                                                                     "rand", 0)]

    def edge_tour(self, zero_length: bool) -> list[Op]:
        """Every edge at the device's end once, whatever the seed: where the random
        draws reach an edge only now and then, a short run must not miss one."""
        size, esz = self.layout.size, self.layout.erasesize
        ops = [Op("read", size - 1, 1), Op("read", size - PAGE_SIZE, PAGE_SIZE),
               Op("erase", size - esz, esz), Op("read", size - esz, esz),
               # the whole device erased over data in its last eraseblock
               self.write(size - esz, esz, "rand"), Op("erase", 0, size),
               Op("read", size - esz, esz)]
        if esz > PAGE_SIZE:     # part of the last eraseblock, whole pages, then not
            ops += [Op("erase", size - PAGE_SIZE, PAGE_SIZE), Op("erase", size - 1, 1)]
        if zero_length:
            ops += [Op("read", size, 0), Op("write", size, 0, "rand", 0),
                    Op("read", 0, 0), Op("erase", 0, 0), Op("erase", size, 0)]
        return ops

    def random_ops(self, zero_length: bool = True) -> list[Op]:
        pick = self.rng.random()
        if pick < 0.29:
            return [self.rw("read")]
        if pick < 0.64:
            return [self.rw("write")]
        if pick < 0.77:
            return [self.erase()]
        if pick < 0.84:
            return [Op("sync")]
        if pick < 0.86 and self.layout.can_reopen:
            return [Op("reopen")]
        if pick < 0.87 and self.layout.can_drop:
            return [Op("drop")]
        if pick < 0.91:
            return [self.out_of_range()]
        if pick < 0.93 and zero_length:
            offset = self.point()      # length 0: nothing read, nothing written
            return [Op("read", offset, 0) if self.rng.getrandbits(1) else Op(
                "write", offset, 0, "rand", 0)]
        return self.edge(zero_length)


def random_ops(layout: Layout, seed: int, count: int, passes: int = 4,
               erased: Callable[[int, int], bool] | None = None,
               zero_length: bool = True) -> Iterator[Op]:
    """A run: erase the whole device, erase a freshly written eraseblock before any
    writeback, then ``count`` random operations with ``passes``
    sweeps over the whole device spread among them (write, read back, erase and write
    page-mixed data, read back), each sweep syncing every few steps.

    ``erased(offset, length)`` tells a NAND run where pages may be programmed; writes
    elsewhere are preceded by an erase of their eraseblocks. ``zero_length=False``
    leaves out reads and writes of nothing (whose answer on a read-only device differs
    between the MTD core and mtdchar).
    """
    rng = random.Random(seed)
    make = OpMaker(layout, rng)
    chunk = sweep_chunk(layout)
    steps = -(-layout.size // chunk)
    sweep = [(p, offset) for p in range(passes) for offset in range(0, layout.size, chunk)]
    gap = max(1, count // max(1, len(sweep)))
    yield Op("erase", 0, layout.size)
    # Erase must reach data still in the cache: with the store erased by a sync, write
    # one eraseblock and erase it again before any writeback, then read it back.
    block = rng.randrange(layout.ebcnt) * layout.erasesize
    yield Op("sync")
    yield make.write(block, layout.erasesize, "rand")
    yield Op("erase", block, layout.erasesize)
    yield Op("read", block, layout.erasesize)

    def programmable(op: Op) -> Iterator[Op]:
        if (layout.nand and op.kind == "write" and op.length
                and op.offset + op.length <= layout.size
                and not (erased and erased(op.offset, op.length))):
            esz = layout.erasesize
            first = op.offset // esz * esz
            yield Op("erase", first, -(-(op.offset + op.length) // esz) * esz - first)
        yield op

    for op in make.edge_tour(zero_length):
        yield from programmable(op)
    done = 0
    for number in range(count):
        for op in make.random_ops(zero_length):
            yield from programmable(op)
        if number % gap == gap - 1 and done < len(sweep):
            pass_number, offset = sweep[done]
            length = min(chunk, layout.size - offset)
            kind = pass_number % 4
            if kind in (1, 3):
                yield Op("read", offset, length)
            else:
                if kind == 2 or layout.nand:
                    yield Op("erase", offset, length)
                yield from programmable(make.write(offset, length, "rand" if kind == 0
                                                   else "pages"))
            done += 1
            if done % 8 == 0 or done % steps == 0:
                yield Op("sync")
    for pass_number, offset in sweep[done:]:     # a short run still sweeps every pass
        length = min(chunk, layout.size - offset)
        if pass_number % 2:
            yield Op("read", offset, length)
        else:
            yield Op("erase", offset, length)
            yield make.write(offset, length, "pages")
