"""MTD devices for testing the suites: a correct RAM device, one with a folio cache, and
deliberately broken ones, one bug class each, as they happen in flash drivers and in
folio conversions. Every broken device must be caught by the default suites.
"""

from __future__ import annotations

import errno

from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.targets.protocols import (
    MTD_CAP_NANDFLASH,
    MTD_CAP_RAM,
    MTD_CAP_ROM,
    MTD_NANDFLASH,
    MTD_RAM,
    MTD_ROM,
    MTD_WRITEABLE,
)


class RamMTD:
    """A correct RAM MTD device (like mtdram): erase is eraseblock aligned, EINVAL outside."""

    def __init__(self, size: int = 2 << 20, erasesize: int = 64 << 10, writesize: int = 1,
                 type: int = MTD_RAM, flags: int = MTD_CAP_RAM, name: str = "ram",
                 oobsize: int = 0, **ignored: object) -> None:
        self.name = name
        self.type = type
        self.flags = flags
        self.size = size
        self.erasesize = erasesize
        self.writesize = writesize
        self.oobsize = oobsize
        self.store = bytearray(b"\xff") * size
        self.closed = False

    # The checks mtd_read/mtd_write/mtd_erase do before calling the driver.
    def _range(self, what: str, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise OSError(errno.EINVAL, f"{what} of {length} at {offset} is outside {self.name}")

    def _writeable(self) -> None:
        if not self.flags & MTD_WRITEABLE:
            raise OSError(errno.EROFS, f"{self.name} is read-only")

    def read(self, offset: int, length: int) -> bytes:
        self._range("read", offset, length)
        return self._read(offset, length)

    def write(self, offset: int, data: bytes) -> None:
        self._writeable()
        self._range("write", offset, len(data))
        self._write(offset, bytes(data))

    def erase(self, offset: int, length: int) -> None:
        self._writeable()
        self._range("erase", offset, length)
        if offset % self.erasesize or length % self.erasesize or not length:
            raise OSError(errno.EINVAL, f"erase of {length} at {offset} is not aligned")
        self._erase(offset, length)

    def sync(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    # The driver's own part; broken devices override these.
    def _read(self, offset: int, length: int) -> bytes:
        return bytes(self.store[offset:offset + length])

    def _write(self, offset: int, data: bytes) -> None:
        self.store[offset:offset + len(data)] = data

    def _erase(self, offset: int, length: int) -> None:
        self.store[offset:offset + length] = b"\xff" * length


class NandRamMTD(RamMTD):
    """A NAND-typed RAM device (2 KiB pages), for the NAND-only tests."""

    def __init__(self, size: int = 2 << 20, erasesize: int = 128 << 10,
                 **kwargs: object) -> None:
        super().__init__(size=size, erasesize=erasesize, writesize=2048, type=MTD_NANDFLASH,
                         flags=MTD_CAP_NANDFLASH, name="nandram", oobsize=64)


class _Folio:
    __slots__ = ("data", "dirty", "in_cache")

    def __init__(self, data: bytearray) -> None:
        self.data = data
        self.dirty = False
        self.in_cache = True


class CachedRamMTD(RamMTD):
    """A RAM device behind a folio cache, as block2mtd sits on the bdev page cache.

    Every ``drop_every``-th lookup in the write and erase paths simulates the flusher
    writing the folio back and invalidate_bdev() dropping it between lookup and lock;
    like the fixed block2mtd, this device checks after locking that the folio is still
    cached and retries when it is not.
    """

    def __init__(self, size: int = 2 << 20, erasesize: int = 64 << 10,
                 folio_order: int = 2, drop_every: int = 5, **kwargs: object) -> None:
        super().__init__(size=size, erasesize=erasesize, name="cachedram")
        self.folio_size = PAGE_SIZE << folio_order
        self.cache: dict[int, _Folio] = {}
        self.drop_every = drop_every
        self.lookups = 0
        self.retries = 0

    def _get_folio(self, index: int) -> _Folio:
        folio = self.cache.get(index)
        if folio is None:
            start = index * self.folio_size
            folio = _Folio(bytearray(self.store[start:start + self.folio_size]))
            self.cache[index] = folio
        return folio

    def _race_window(self, index: int, folio: _Folio) -> None:
        """Between filemap lookup and folio_lock: a concurrent invalidate may drop it."""
        self.lookups += 1
        if self.drop_every and self.lookups % self.drop_every == 0:
            self._writeback(index, folio)      # the flusher wrote it back: now clean
            folio.in_cache = False             # and invalidate_bdev() drops it
            del self.cache[index]

    def _locked_folio(self, index: int) -> _Folio:
        while True:
            folio = self._get_folio(index)
            self._race_window(index, folio)
            if folio.in_cache:
                return folio
            self.retries += 1

    def _segments(self, offset: int, length: int) -> list[tuple[int, int, int]]:
        """(folio index, offset in folio, length) covering [offset, offset+length)."""
        out = []
        while length > 0:
            index, off = divmod(offset, self.folio_size)
            n = min(length, self.folio_size - off)
            out.append((index, off, n))
            offset += n
            length -= n
        return out

    def _read(self, offset: int, length: int) -> bytes:
        return b"".join(bytes(self._get_folio(i).data[o:o + n])
                        for i, o, n in self._segments(offset, length))

    def _fill(self, offset: int, data: bytes) -> None:
        pos = 0
        for i, o, n in self._segments(offset, len(data)):
            folio = self._locked_folio(i)
            folio.data[o:o + n] = data[pos:pos + n]
            folio.dirty = True
            pos += n

    def _write(self, offset: int, data: bytes) -> None:
        self._fill(offset, data)

    def _erase(self, offset: int, length: int) -> None:
        self._fill(offset, b"\xff" * length)

    def _writeback(self, index: int, folio: _Folio) -> None:
        if folio.dirty:
            start = index * self.folio_size
            self.store[start:start + self.folio_size] = folio.data
            folio.dirty = False

    def sync(self) -> None:
        for index, folio in self.cache.items():
            self._writeback(index, folio)


# ---- broken devices: one bug class each ---------------------------------------------


class EraseFillsZero(RamMTD):
    """Erase writes 0x00 instead of 0xFF (a memset with the wrong value)."""

    def _erase(self, offset: int, length: int) -> None:
        self.store[offset:offset + length] = bytes(length)


class ReadOnlyAcceptsWrites(RamMTD):
    """A ROM that forgets the MTD_WRITEABLE check and writes anyway."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(type=MTD_ROM, flags=MTD_CAP_ROM, name="rom")

    def _writeable(self) -> None:
        pass


class OffByOnePageAtEraseblockEnd(RamMTD):
    """A page loop that stops one page early when a write ends on an eraseblock boundary."""

    def _write(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if end % self.erasesize == 0 and len(data) > PAGE_SIZE:
            data = data[:-PAGE_SIZE]
        super()._write(offset, data)


class EraseWrongBlock(RamMTD):
    """Erase addresses the next eraseblock (an index/offset mix-up), wrapping at the end."""

    def _erase(self, offset: int, length: int) -> None:
        for block in range(offset, offset + length, self.erasesize):
            super()._erase((block + self.erasesize) % self.size, self.erasesize)


class ShortReadAtFolioBoundary(CachedRamMTD):
    """A folio read loop that returns after the first folio, without an error."""

    def _read(self, offset: int, length: int) -> bytes:
        i, o, n = self._segments(offset, length)[0] if length else (0, 0, 0)
        return bytes(self._get_folio(i).data[o:o + n]) if length else b""


class LostWriteOnFolioDrop(CachedRamMTD):
    """The race the seed's first patch fixes: no recheck after locking, so a write lands
    in a folio that invalidate_bdev() already dropped from the cache and is lost."""

    def _locked_folio(self, index: int) -> _Folio:
        folio = self._get_folio(index)
        self._race_window(index, folio)
        return folio


class StaleCacheAfterErase(CachedRamMTD):
    """Erase writes the store directly and forgets to invalidate cached folios."""

    def _erase(self, offset: int, length: int) -> None:
        self.store[offset:offset + length] = b"\xff" * length


class PartialLastPageWrite(RamMTD):
    """Writes only whole pages: the tail of a write that ends inside a page is dropped."""

    def _write(self, offset: int, data: bytes) -> None:
        end = offset + len(data)
        whole_end = max(offset, end - end % PAGE_SIZE)
        super()._write(offset, data[:whole_end - offset])


class AliasingOffset(RamMTD):
    """An address mask one bit too narrow: the upper half of the device wraps onto the
    lower half (a 32-bit offset truncation, scaled to a small device)."""

    def _mask(self, offset: int) -> int:
        return offset % (self.size // 2)

    def _read(self, offset: int, length: int) -> bytes:
        return super()._read(self._mask(offset), length)

    def _write(self, offset: int, data: bytes) -> None:
        super()._write(self._mask(offset), data)

    def _erase(self, offset: int, length: int) -> None:
        super()._erase(self._mask(offset), length)


class OutOfRangeWraps(RamMTD):
    """No range check on write: a write past the end wraps around to offset 0."""

    def _range(self, what: str, offset: int, length: int) -> None:
        if what != "write":
            super()._range(what, offset, length)

    def _write(self, offset: int, data: bytes) -> None:
        head = max(0, min(len(data), self.size - offset))
        self.store[offset:offset + head] = data[:head]
        self.store[:len(data) - head] = data[head:]       # the wrapped tail


BROKEN = {
    "erase_fills_zero": EraseFillsZero,
    "readonly_accepts_writes": ReadOnlyAcceptsWrites,
    "off_by_one_page_at_eraseblock_end": OffByOnePageAtEraseblockEnd,
    "erase_wrong_block": EraseWrongBlock,
    "short_read_at_folio_boundary": ShortReadAtFolioBoundary,
    "lost_write_on_folio_drop": LostWriteOnFolioDrop,
    "stale_cache_after_erase": StaleCacheAfterErase,
    "partial_last_page_write": PartialLastPageWrite,
    "aliasing_offset": AliasingOffset,
    "out_of_range_wraps": OutOfRangeWraps,
}
