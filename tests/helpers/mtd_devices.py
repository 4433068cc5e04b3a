"""MTD devices for testing the suites: a correct RAM device, one with a folio cache, and
deliberately broken ones, one bug class each, as they happen in flash drivers and in
folio conversions. Every broken device must be caught by the default suites.
"""

from __future__ import annotations

import errno
from collections import OrderedDict
from typing import cast

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
        self._erase_range(offset, length)
        if not length:          # mtd_erase: nothing to do once the range is checked
            return
        if offset % self.erasesize or length % self.erasesize:
            raise OSError(errno.EINVAL, f"erase of {length} at {offset} is not aligned")
        self._erase(offset, length)

    def _erase_range(self, offset: int, length: int) -> None:
        """mtd_erase's range check: the first byte must be inside, even for nothing."""
        if offset >= self.size:
            raise OSError(errno.EINVAL, f"erase at {offset} is outside {self.name}")
        self._range("erase", offset, length)

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


class _FolioPieces:
    """What the cached devices share: a range cut at their folios' boundaries."""

    folio_size: int

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


class CachedRamMTD(_FolioPieces, RamMTD):
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


class FolioCacheMTD(_FolioPieces, RamMTD):
    """RAM flash behind a small write-back cache of folios larger than a page, as a
    folio-converted flash driver has: an LRU of ``cache_folios`` folios, dirty tracking,
    writeback on eviction, sync, reopen and close, and the shortcuts drivers take: an
    erase leaves folios already all 0xFF alone, a write of unchanged bytes dirties
    nothing, and a write covering a whole folio does not read it first.
    ``readonly=True`` makes a device without MTD_WRITEABLE.
    """

    def __init__(self, size: int = 2 << 20, erasesize: int = 64 << 10,
                 folio_order: int = 2, cache_folios: int = 8, readonly: bool = False,
                 **kwargs: object) -> None:
        super().__init__(size=size, erasesize=erasesize, name="foliocache",
                         flags=MTD_CAP_RAM & ~MTD_WRITEABLE if readonly else MTD_CAP_RAM)
        self.folio_size = PAGE_SIZE << folio_order
        self.cache: OrderedDict[int, _Folio] = OrderedDict()
        self.cache_folios = cache_folios

    # the cache
    def _read_folio(self, index: int) -> _Folio:
        start = index * self.folio_size
        return _Folio(bytearray(self.store[start:start + self.folio_size]))

    def _evict_one(self) -> None:
        index, folio = self.cache.popitem(last=False)
        self._writeback(index, folio)

    def _lookup(self, index: int, whole: bool = False) -> _Folio:
        """The cached folio, read in unless the caller overwrites all of it."""
        folio = self.cache.get(index)
        if folio is not None:
            self.cache.move_to_end(index)
            return folio
        while len(self.cache) >= self.cache_folios:
            self._evict_one()
        if whole:          # not read in: the store is out of date until written back
            folio = _Folio(bytearray(self.folio_size))
            folio.dirty = True
        else:
            folio = self._read_folio(index)
        self.cache[index] = folio
        return folio

    def _writeback(self, index: int, folio: _Folio) -> None:
        if folio.dirty:
            start = index * self.folio_size
            self.store[start:start + self.folio_size] = folio.data
            folio.dirty = False

    # the driver
    def _read(self, offset: int, length: int) -> bytes:
        return b"".join(bytes(self._lookup(i).data[o:o + n])
                        for i, o, n in self._segments(offset, length))

    def _store_piece(self, index: int, off: int, piece: bytes) -> None:
        folio = self._lookup(index, whole=len(piece) == self.folio_size)
        if folio.data[off:off + len(piece)] != piece:      # unchanged: dirties nothing
            folio.data[off:off + len(piece)] = piece
            folio.dirty = True

    def _write(self, offset: int, data: bytes) -> None:
        pos = 0
        for i, o, n in self._segments(offset, len(data)):
            self._store_piece(i, o, data[pos:pos + n])
            pos += n

    def _erase(self, offset: int, length: int) -> None:
        for i, o, n in self._segments(offset, length):
            folio = self._lookup(i)
            if folio.data[o:o + n] != b"\xff" * n:           # erased already: leave it
                folio.data[o:o + n] = b"\xff" * n
                folio.dirty = True

    def sync(self) -> None:
        for index, folio in self.cache.items():
            self._writeback(index, folio)

    def reopen(self) -> None:
        """Close and open again: write everything back, start with an empty cache."""
        self.sync()
        self.cache.clear()

    def drop_caches(self) -> None:
        """Drop the clean folios; the dirty ones stay until they are written back."""
        for index in [i for i, folio in self.cache.items() if not folio.dirty]:
            del self.cache[index]

    def close(self) -> None:
        self.sync()
        super().close()


class PageEraseMTD(FolioCacheMTD):
    """A folio cache that erases page by page, as block2mtd does: an erase of part of an
    eraseblock erases the ``length >> PAGE_SHIFT`` pages from the page holding
    ``offset`` (where mtdram answers EINVAL)."""

    def erase(self, offset: int, length: int) -> None:
        self._writeable()
        self._erase_range(offset, length)
        self._erase_pages(offset, length)

    def _erase_pages(self, offset: int, length: int) -> None:
        pages = length // PAGE_SIZE
        if pages:
            self._erase(offset // PAGE_SIZE * PAGE_SIZE, pages * PAGE_SIZE)


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


# ---- broken folio caches: one line wrong each ---------------------------------------
# Each overrides one method of FolioCacheMTD with the correct code and one line changed
# (marked "bug:").

FF = b"\xff"


class EvictionDropsDirty(FolioCacheMTD):
    """Cache pressure: the evicted folio is dropped without being written back."""

    def _evict_one(self) -> None:
        self.cache.popitem(last=False)        # bug: no _writeback


class WholeFolioWriteNotReadNotDirty(FolioCacheMTD):
    """A folio that a write covers whole is not read in, and then the unchanged-write
    shortcut compares with its blank memory: a folio of zeros is never written back."""

    def _lookup(self, index: int, whole: bool = False) -> _Folio:
        folio = self.cache.get(index)
        if folio is not None:
            self.cache.move_to_end(index)
            return folio
        while len(self.cache) >= self.cache_folios:
            self._evict_one()
        folio = _Folio(bytearray(self.folio_size)) if whole else self._read_folio(index)
        self.cache[index] = folio                  # bug: a blank folio is not dirty
        return folio


class EvictionWritesBackAtTheNewIndex(FolioCacheMTD):
    """Eviction writes the old folio's data where the folio being read in goes."""

    def _lookup(self, index: int, whole: bool = False) -> _Folio:
        folio = self.cache.get(index)
        if folio is not None:
            self.cache.move_to_end(index)
            return folio
        while len(self.cache) >= self.cache_folios:
            _, old = self.cache.popitem(last=False)
            self._writeback(index, old)           # bug: the new folio's index
        folio = self._read_folio(index)
        folio.dirty = whole
        self.cache[index] = folio
        return folio


class WritebackWritesOnePage(FolioCacheMTD):
    """A folio conversion that kept the page-sized writeback: only the folio's first
    page reaches the store."""

    def _writeback(self, index: int, folio: _Folio) -> None:
        if folio.dirty:
            start = index * self.folio_size
            self.store[start:start + PAGE_SIZE] = folio.data[:PAGE_SIZE]   # bug
            folio.dirty = False


class WritebackAtPageIndex(FolioCacheMTD):
    """Writeback places folio ``index`` at ``index * PAGE_SIZE`` (a page index where a
    folio index belongs)."""

    def _writeback(self, index: int, folio: _Folio) -> None:
        if folio.dirty:
            start = index * PAGE_SIZE                          # bug
            self.store[start:start + self.folio_size] = folio.data
            folio.dirty = False


class ReadFolioAtPageIndex(FolioCacheMTD):
    """Reading a folio in fetches it from ``index * PAGE_SIZE``."""

    def _read_folio(self, index: int) -> _Folio:
        start = index * PAGE_SIZE                              # bug
        return _Folio(bytearray(self.store[start:start + self.folio_size]))


class SyncClearsDirtyWithoutWriting(FolioCacheMTD):
    """sync marks every folio clean but writes none: later evictions lose the data."""

    def sync(self) -> None:
        for folio in self.cache.values():
            folio.dirty = False                                # bug: no _writeback


class SyncSkipsTheNewestFolio(FolioCacheMTD):
    """An off-by-one in the sync loop: the most recently used folio is not written."""

    def sync(self) -> None:
        for index, folio in list(self.cache.items())[:-1]:     # bug: [:-1]
            self._writeback(index, folio)


class ReopenWithoutWriteback(FolioCacheMTD):
    """Release drops the cache without writing dirty folios back."""

    def reopen(self) -> None:
        self.cache.clear()                                     # bug: no sync first


class PartialFolioWriteSkipsTheRead(FolioCacheMTD):
    """The "no need to read a folio we overwrite" shortcut tests the start, not the
    length: a write from a folio's start that does not cover it zeroes its rest."""

    def _store_piece(self, index: int, off: int, piece: bytes) -> None:
        folio = self._lookup(index, whole=off == 0)            # bug: not the length
        if folio.data[off:off + len(piece)] != piece:
            folio.data[off:off + len(piece)] = piece
            folio.dirty = True


class PartialFolioWriteOfAPageSkipsTheRead(FolioCacheMTD):
    """The same shortcut taken for any write of at least a page."""

    def _store_piece(self, index: int, off: int, piece: bytes) -> None:
        folio = self._lookup(index, whole=len(piece) >= PAGE_SIZE)   # bug
        if folio.data[off:off + len(piece)] != piece:
            folio.data[off:off + len(piece)] = piece
            folio.dirty = True


class PartialWriteNotDirty(FolioCacheMTD):
    """Only a write of a whole folio marks it dirty."""

    def _store_piece(self, index: int, off: int, piece: bytes) -> None:
        folio = self._lookup(index, whole=len(piece) == self.folio_size)
        if folio.data[off:off + len(piece)] != piece:
            folio.data[off:off + len(piece)] = piece
            folio.dirty = len(piece) == self.folio_size        # bug


class ErasedLookingWriteNotDirty(FolioCacheMTD):
    """A write of all-0xFF data is taken for an erase that needs no writeback."""

    def _store_piece(self, index: int, off: int, piece: bytes) -> None:
        folio = self._lookup(index, whole=len(piece) == self.folio_size)
        if folio.data[off:off + len(piece)] != piece:
            folio.data[off:off + len(piece)] = piece
            folio.dirty = piece != FF * len(piece)             # bug


class ZeroPagesTreatedAsHoles(FolioCacheMTD):
    """All-0x00 pieces are skipped as if they were holes, leaving the old data."""

    def _store_piece(self, index: int, off: int, piece: bytes) -> None:
        folio = self._lookup(index, whole=len(piece) == self.folio_size)
        if folio.data[off:off + len(piece)] != piece and any(piece):   # bug: any()
            folio.data[off:off + len(piece)] = piece
            folio.dirty = True


class UnchangedCheckLooksAtTheFirstPage(FolioCacheMTD):
    """The unchanged-write shortcut compares only the first page of each piece."""

    def _store_piece(self, index: int, off: int, piece: bytes) -> None:
        folio = self._lookup(index, whole=len(piece) == self.folio_size)
        if folio.data[off:off + PAGE_SIZE] != piece[:PAGE_SIZE]:    # bug
            folio.data[off:off + len(piece)] = piece
            folio.dirty = True


class UnchangedCheckAgainstTheStore(FolioCacheMTD):
    """The unchanged-write shortcut compares with the store, not with the cached folio
    (which may hold newer, dirty data)."""

    def _store_piece(self, index: int, off: int, piece: bytes) -> None:
        folio = self._lookup(index, whole=len(piece) == self.folio_size)
        start = index * self.folio_size + off
        if self.store[start:start + len(piece)] != piece:     # bug: the store
            folio.data[off:off + len(piece)] = piece
            folio.dirty = True


class EraseShortcutLooksAtTheFirstPage(FolioCacheMTD):
    """Erase skips a piece when its first page is all 0xFF."""

    def _erase(self, offset: int, length: int) -> None:
        for i, o, n in self._segments(offset, length):
            folio = self._lookup(i)
            if folio.data[o:o + PAGE_SIZE] != FF * min(n, PAGE_SIZE):   # bug
                folio.data[o:o + n] = FF * n
                folio.dirty = True


class EraseShortcutChecksTheStore(FolioCacheMTD):
    """Erase skips a piece that is all 0xFF in the store, whatever the cache holds."""

    def _erase(self, offset: int, length: int) -> None:
        for i, o, n in self._segments(offset, length):
            folio = self._lookup(i)
            start = i * self.folio_size + o
            if self.store[start:start + n] != FF * n:          # bug: the store
                folio.data[o:o + n] = FF * n
                folio.dirty = True


class EraseNotDirty(FolioCacheMTD):
    """Erase fills the cached folio but does not mark it dirty."""

    def _erase(self, offset: int, length: int) -> None:
        for i, o, n in self._segments(offset, length):
            folio = self._lookup(i)
            if folio.data[o:o + n] != FF * n:
                folio.data[o:o + n] = FF * n                   # bug: not dirtied


class EraseOnlyCachedFolios(FolioCacheMTD):
    """Erase works on the folios in the cache and forgets the others."""

    def _erase(self, offset: int, length: int) -> None:
        for i, o, n in self._segments(offset, length):
            if i not in self.cache:                            # bug
                continue
            folio = self._lookup(i)
            if folio.data[o:o + n] != FF * n:
                folio.data[o:o + n] = FF * n
                folio.dirty = True


class EraseWholeFolios(FolioCacheMTD):
    """Erase goes by folios: with eraseblocks smaller than a folio, the neighbouring
    eraseblocks in the same folio are erased too."""

    def _erase(self, offset: int, length: int) -> None:
        for i, _o, _n in self._segments(offset, length):
            o, n = 0, self.folio_size                          # bug: whole folio
            folio = self._lookup(i)
            if folio.data[o:o + n] != FF * n:
                folio.data[o:o + n] = FF * n
                folio.dirty = True


class MultiBlockEraseErasesTheFirst(FolioCacheMTD):
    """A multi-eraseblock erase erases only its first eraseblock."""

    def _erase(self, offset: int, length: int) -> None:
        super()._erase(offset, min(length, self.erasesize))    # bug


class EraseBatchOfFour(FolioCacheMTD):
    """Erases go in batches of four eraseblocks, and only the first batch is done."""

    def _erase(self, offset: int, length: int) -> None:
        super()._erase(offset, min(length, 4 * self.erasesize))   # bug


class MultiBlockEraseSkipsTheLast(FolioCacheMTD):
    """The eraseblock loop of a multi-block erase stops one eraseblock early."""

    def _erase(self, offset: int, length: int) -> None:
        blocks = range(offset, offset + length - self.erasesize, self.erasesize)  # bug
        for block in blocks or [offset]:
            super()._erase(block, self.erasesize)


class EraseOfTheLastBlockIsEinval(FolioCacheMTD):
    """The erase range check is off by one: erasing the last eraseblock is EINVAL."""

    def erase(self, offset: int, length: int) -> None:
        if offset + length >= self.size:                       # bug: >=
            raise OSError(errno.EINVAL, "erase past the end")
        super().erase(offset, length)


class ReadEndingAtTheLastByteIsEinval(FolioCacheMTD):
    """The read range check is off by one: a read that ends at the last byte fails."""

    def read(self, offset: int, length: int) -> bytes:
        if offset + length >= self.size:                       # bug: >=
            raise OSError(errno.EINVAL, "read past the end")
        return super().read(offset, length)


class WriteEndingAtTheLastByteIsEinval(FolioCacheMTD):
    """The write range check is off by one."""

    def write(self, offset: int, data: bytes) -> None:
        if offset + len(data) >= self.size:                    # bug: >=
            raise OSError(errno.EINVAL, "write past the end")
        super().write(offset, data)


class ReadAcrossFoliosRepeatsTheFirst(FolioCacheMTD):
    """A read across a folio boundary copies every piece from the first folio."""

    def _read(self, offset: int, length: int) -> bytes:
        pieces = self._segments(offset, length)
        first = pieces[0][0] if pieces else 0
        return b"".join(bytes(self._lookup(first).data[o:o + n])   # bug: first
                        for _i, o, n in pieces)


class WriteAcrossFoliosWrapsInTheFirst(FolioCacheMTD):
    """A write across a folio boundary puts its tail at the start of the first folio."""

    def _write(self, offset: int, data: bytes) -> None:
        pos = 0
        pieces = self._segments(offset, len(data))
        for _i, o, n in pieces:
            self._store_piece(pieces[0][0], o, data[pos:pos + n])   # bug: first folio
            pos += n


class WholeFolioReadsBypassTheCache(FolioCacheMTD):
    """A "direct" fast path for reads of whole folios copies from the store, which may
    be older than the dirty cached folio."""

    def _read(self, offset: int, length: int) -> bytes:
        return b"".join(
            bytes(self.store[i * self.folio_size:(i + 1) * self.folio_size])
            if n == self.folio_size else bytes(self._lookup(i).data[o:o + n])  # bug
            for i, o, n in self._segments(offset, length))


class ZeroLengthReadReturnsTheFolio(FolioCacheMTD):
    """A do-while segment loop: a read of nothing returns the rest of the folio."""

    def _read(self, offset: int, length: int) -> bytes:
        if not length:                                          # bug: one segment anyway
            index, off = divmod(offset, self.folio_size)
            return bytes(self._lookup(index).data[off:])
        return super()._read(offset, length)


class UnalignedWriteRoundedDown(FolioCacheMTD):
    """A write's offset is rounded down to 512 bytes (a sector-based driver)."""

    def _write(self, offset: int, data: bytes) -> None:
        super()._write(offset & ~511, data)                     # bug


class ReadOnlyStillErases(FolioCacheMTD):
    """A read-only device refuses writes but not erases."""

    def erase(self, offset: int, length: int) -> None:
        self._erase_range(offset, length)                      # bug: no _writeable()
        if not length:
            return
        if offset % self.erasesize or length % self.erasesize:
            raise OSError(errno.EINVAL, f"erase of {length} at {offset} is not aligned")
        self._erase(offset, length)


class ReadOnlyRefusesOnlyAtWriteback(FolioCacheMTD):
    """A read-only device takes writes into its cache and refuses only at writeback,
    so the write succeeds and reads return the new data."""

    def write(self, offset: int, data: bytes) -> None:
        self._range("write", offset, len(data))                # bug: no _writeable()
        self._write(offset, bytes(data))

    def _writeback(self, index: int, folio: _Folio) -> None:
        if folio.dirty and not self.flags & MTD_WRITEABLE:
            folio.dirty = False
            return
        super()._writeback(index, folio)


# ---- the interface's edges (issue 22): partial last folios, operations of nothing,
# erases of part of an eraseblock, reads over partly cached ranges, answers of the
# wrong type or length ---------------------------------------------------------------


class PartialLastFolioReadAsZeroes(FolioCacheMTD):
    """A folio that reaches past the end of the device is taken for a hole when read in:
    the last eraseblocks' data reads back as zeroes once the folio left the cache."""

    def _read_folio(self, index: int) -> _Folio:
        start = index * self.folio_size
        if start + self.folio_size > self.size:                 # bug: "past the end"
            return _Folio(bytearray(self.size - start))
        return super()._read_folio(index)


class PartialLastFolioNotWrittenBack(FolioCacheMTD):
    """Writeback skips a folio that reaches past the end of the device (a bounds check
    on the folio, not on the bytes inside): writes to the last eraseblocks are lost."""

    def _writeback(self, index: int, folio: _Folio) -> None:
        if (index + 1) * self.folio_size > self.size:          # bug: nothing written
            folio.dirty = False
            return
        super()._writeback(index, folio)


class LastPartialFolioOutOfRange(FolioCacheMTD):
    """The range check counts whole folios: the bytes of a partial last folio are EINVAL."""

    def _range(self, what: str, offset: int, length: int) -> None:
        end = self.size // self.folio_size * self.folio_size  # bug: whole folios only
        if offset < 0 or length < 0 or offset + length > end:
            raise OSError(errno.EINVAL, f"{what} of {length} at {offset} is outside")


class ZeroLengthEraseIsEinval(FolioCacheMTD):
    """The driver refuses an erase of nothing, which mtd_erase answers 0 without calling
    it (only a device that skips the MTD core's checks reaches the driver with it)."""

    def erase(self, offset: int, length: int) -> None:
        if not length:                                          # bug
            raise OSError(errno.EINVAL, "erase of nothing")
        super().erase(offset, length)


class ZeroLengthEraseErasesABlock(FolioCacheMTD):
    """A do-while loop over eraseblocks: an erase of nothing erases the eraseblock at
    its offset."""

    def erase(self, offset: int, length: int) -> None:
        self._writeable()
        self._erase_range(offset, length)
        if not length:                                          # bug: one block anyway
            start = offset // self.erasesize * self.erasesize
            self._erase(start, self.erasesize)
            return
        super().erase(offset, length)


class ZeroLengthWriteAtTheEndIsEinval(FolioCacheMTD):
    """The write range check tests the first byte: a write of nothing at the device's
    end is EINVAL (mtd_write takes it)."""

    def write(self, offset: int, data: bytes) -> None:
        if offset >= self.size:                                 # bug: even for nothing
            raise OSError(errno.EINVAL, "write past the end")
        super().write(offset, data)


class ZeroLengthReadAtTheEndIsEinval(FolioCacheMTD):
    """The read range check tests the first byte: a read of nothing at the device's end
    is EINVAL (mtd_read takes it)."""

    def read(self, offset: int, length: int) -> bytes:
        if offset >= self.size:                                 # bug: even for nothing
            raise OSError(errno.EINVAL, "read past the end")
        return super().read(offset, length)


class UnalignedEraseRoundsOutToEraseblocks(PageEraseMTD):
    """An erase of part of an eraseblock erases the whole eraseblocks it touches."""

    def _erase_pages(self, offset: int, length: int) -> None:
        esz = self.erasesize
        if length:                                              # bug: whole blocks
            start = offset // esz * esz
            self._erase(start, -(-(offset + length) // esz) * esz - start)


class UnalignedEraseRoundsOutToFolios(PageEraseMTD):
    """A folio conversion of the page-by-page erase: it erases the whole folios the
    pages lie in."""

    def _erase_pages(self, offset: int, length: int) -> None:
        fsz = self.folio_size
        pages = length // PAGE_SIZE
        if pages:
            start = offset // PAGE_SIZE * PAGE_SIZE // fsz * fsz      # bug: folios
            end = -(-(offset // PAGE_SIZE * PAGE_SIZE + pages * PAGE_SIZE) // fsz) * fsz
            self._erase(start, min(end, self.size) - start)


class UnalignedEraseSkipsPartPages(PageEraseMTD):
    """Only the pages wholly inside the range are erased (the start rounded up): an
    erase from the middle of a page erases one page less than block2mtd does."""

    def _erase_pages(self, offset: int, length: int) -> None:
        first = -(-offset // PAGE_SIZE)                         # bug: rounded up
        last = (offset + length) // PAGE_SIZE
        if last > first:
            self._erase(first * PAGE_SIZE, (last - first) * PAGE_SIZE)


class UnalignedEraseRefusedAcrossEraseblocks(PageEraseMTD):
    """Pages are erased, unless the range crosses an eraseblock boundary: then EINVAL,
    a rule between mtdram's and block2mtd's."""

    def _erase_pages(self, offset: int, length: int) -> None:
        esz = self.erasesize
        if length % esz and offset // esz != (offset + length - 1) // esz:   # bug
            raise OSError(errno.EINVAL, "erase crosses an eraseblock")
        super()._erase_pages(offset, length)


class DropCachesDropsDirty(FolioCacheMTD):
    """drop_caches drops every folio, dirty ones too: what was not synced is lost."""

    def drop_caches(self) -> None:
        self.cache.clear()                                      # bug: dirty ones too


class ColdReadBypassesTheCache(FolioCacheMTD):
    """A "cold read" fast path: a read whose first folio is not cached is served from
    the store, missing dirty folios cached further in the range."""

    def _read(self, offset: int, length: int) -> bytes:
        if offset // self.folio_size not in self.cache:        # bug: the first only
            return bytes(self.store[offset:offset + length])
        return super()._read(offset, length)


class ReadReturnsAViewOfTheFolio(FolioCacheMTD):
    """A zero-copy read inside one folio returns a view of the cached folio, which
    changes when the device is written later."""

    def _read(self, offset: int, length: int) -> bytes:
        pieces = self._segments(offset, length)
        if len(pieces) == 1:
            index, off, n = pieces[0]
            view = memoryview(self._lookup(index).data)[off:off + n]   # bug
            return cast("bytes", view)
        return super()._read(offset, length)


class ReadRoundedUpToThePage(FolioCacheMTD):
    """A read is copied out in whole pages: it returns up to the end of its last page."""

    def _read(self, offset: int, length: int) -> bytes:
        end = min(self.size, -(-(offset + length) // PAGE_SIZE) * PAGE_SIZE)   # bug
        return super()._read(offset, end - offset)


class ZeroLengthReadReturnsNone(FolioCacheMTD):
    """A read of nothing answers None ("no data") instead of empty bytes."""

    def read(self, offset: int, length: int) -> bytes:
        data = super().read(offset, length)
        return cast("bytes", None) if not length else data          # bug


EDGE_BUGS: dict[str, type[FolioCacheMTD]] = {
    "partial_last_folio_read_as_zeroes": PartialLastFolioReadAsZeroes,
    "partial_last_folio_not_written_back": PartialLastFolioNotWrittenBack,
    "last_partial_folio_out_of_range": LastPartialFolioOutOfRange,
    "zero_length_erase_is_einval": ZeroLengthEraseIsEinval,
    "zero_length_erase_erases_a_block": ZeroLengthEraseErasesABlock,
    "zero_length_write_at_the_end_is_einval": ZeroLengthWriteAtTheEndIsEinval,
    "zero_length_read_at_the_end_is_einval": ZeroLengthReadAtTheEndIsEinval,
    "unaligned_erase_rounds_out_to_eraseblocks": UnalignedEraseRoundsOutToEraseblocks,
    "unaligned_erase_rounds_out_to_folios": UnalignedEraseRoundsOutToFolios,
    "unaligned_erase_skips_part_pages": UnalignedEraseSkipsPartPages,
    "unaligned_erase_refused_across_eraseblocks": UnalignedEraseRefusedAcrossEraseblocks,
    "drop_caches_drops_dirty": DropCachesDropsDirty,
    "cold_read_bypasses_the_cache": ColdReadBypassesTheCache,
    "read_returns_a_view_of_the_folio": ReadReturnsAViewOfTheFolio,
    "read_rounded_up_to_the_page": ReadRoundedUpToThePage,
    "zero_length_read_returns_none": ZeroLengthReadReturnsNone,
}


# ---- bugs of kinds no issue named, to see whether the default run generalizes ------


class WriteAcrossEraseblocksStopsAtTheBoundary(FolioCacheMTD):
    """The driver programs one eraseblock per call and forgets to loop: a write that
    crosses an eraseblock boundary keeps only its first part."""

    def _write(self, offset: int, data: bytes) -> None:
        room = self.erasesize - offset % self.erasesize
        super()._write(offset, data[:room])                     # bug: no loop


class WholeDeviceEraseSkipsTheLastBlock(FolioCacheMTD):
    """A chip-erase path for an erase of the whole device, off by one eraseblock."""

    def _erase(self, offset: int, length: int) -> None:
        if offset == 0 and length == self.size:
            length -= self.erasesize                            # bug
        super()._erase(offset, length)


class SyncStopsAtTheFirstCleanFolio(FolioCacheMTD):
    """sync writes back the dirty folios in cache order until it meets a clean one."""

    def sync(self) -> None:
        for index, folio in self.cache.items():
            if not folio.dirty:
                break                                           # bug: continue
            self._writeback(index, folio)


class WornEraseblockStopsErasing(FolioCacheMTD):
    """A wear counter per eraseblock, checked the wrong way round: after 24 erases an
    eraseblock is silently left as it is."""

    def _erase(self, offset: int, length: int) -> None:
        counts = self.__dict__.setdefault("erase_counts", {})
        for block in range(offset // self.erasesize, -(-(offset + length) // self.erasesize)):
            counts[block] = counts.get(block, 0) + 1
            start = max(offset, block * self.erasesize)
            end = min(offset + length, (block + 1) * self.erasesize)
            if counts[block] <= 24:                             # bug: skip, no EIO
                super()._erase(start, end - start)


UNNAMED_BUGS: dict[str, type[FolioCacheMTD]] = {
    "write_across_eraseblocks_stops_at_the_boundary": WriteAcrossEraseblocksStopsAtTheBoundary,
    "whole_device_erase_skips_the_last_block": WholeDeviceEraseSkipsTheLastBlock,
    "sync_stops_at_the_first_clean_folio": SyncStopsAtTheFirstCleanFolio,
    "worn_eraseblock_stops_erasing": WornEraseblockStopsErasing,
}


# ---- the state after a failed call (issue 32) -----------------------------------------


class PastTheEndWriteStoresItsFirstPart(FolioCacheMTD):
    """A write running past the end stores the part before the end, then fails with
    EINVAL (the range check done per folio, after the folios before it were written)."""

    def write(self, offset: int, data: bytes) -> None:
        self._writeable()
        if 0 <= offset < self.size < offset + len(data):
            self._write(offset, bytes(data[:self.size - offset]))   # bug: check first
        super().write(offset, data)


RANGE_BUGS: dict[str, type[FolioCacheMTD]] = {
    "past_the_end_write_stores_its_first_part": PastTheEndWriteStoresItsFirstPart,
}
BROKEN.update(RANGE_BUGS)


FOLIO_CACHE_BUGS: dict[str, type[FolioCacheMTD]] = {
    "eviction_drops_dirty": EvictionDropsDirty,
    "whole_folio_write_not_read_not_dirty": WholeFolioWriteNotReadNotDirty,
    "eviction_writes_back_at_the_new_index": EvictionWritesBackAtTheNewIndex,
    "writeback_writes_one_page": WritebackWritesOnePage,
    "writeback_at_page_index": WritebackAtPageIndex,
    "read_folio_at_page_index": ReadFolioAtPageIndex,
    "sync_clears_dirty_without_writing": SyncClearsDirtyWithoutWriting,
    "sync_skips_the_newest_folio": SyncSkipsTheNewestFolio,
    "reopen_without_writeback": ReopenWithoutWriteback,
    "partial_folio_write_skips_the_read": PartialFolioWriteSkipsTheRead,
    "partial_folio_write_of_a_page_skips_the_read": PartialFolioWriteOfAPageSkipsTheRead,
    "partial_write_not_dirty": PartialWriteNotDirty,
    "erased_looking_write_not_dirty": ErasedLookingWriteNotDirty,
    "zero_pages_treated_as_holes": ZeroPagesTreatedAsHoles,
    "unchanged_check_looks_at_the_first_page": UnchangedCheckLooksAtTheFirstPage,
    "unchanged_check_against_the_store": UnchangedCheckAgainstTheStore,
    "erase_shortcut_looks_at_the_first_page": EraseShortcutLooksAtTheFirstPage,
    "erase_shortcut_checks_the_store": EraseShortcutChecksTheStore,
    "erase_not_dirty": EraseNotDirty,
    "erase_only_cached_folios": EraseOnlyCachedFolios,
    "erase_whole_folios": EraseWholeFolios,
    "multi_block_erase_erases_the_first": MultiBlockEraseErasesTheFirst,
    "erase_batch_of_four": EraseBatchOfFour,
    "multi_block_erase_skips_the_last": MultiBlockEraseSkipsTheLast,
    "erase_of_the_last_block_is_einval": EraseOfTheLastBlockIsEinval,
    "read_ending_at_the_last_byte_is_einval": ReadEndingAtTheLastByteIsEinval,
    "write_ending_at_the_last_byte_is_einval": WriteEndingAtTheLastByteIsEinval,
    "read_across_folios_repeats_the_first": ReadAcrossFoliosRepeatsTheFirst,
    "write_across_folios_wraps_in_the_first": WriteAcrossFoliosWrapsInTheFirst,
    "whole_folio_reads_bypass_the_cache": WholeFolioReadsBypassTheCache,
    "zero_length_read_returns_the_folio": ZeroLengthReadReturnsTheFolio,
    "unaligned_write_rounded_down": UnalignedWriteRoundedDown,
    "readonly_still_erases": ReadOnlyStillErases,
    "readonly_refuses_only_at_writeback": ReadOnlyRefusesOnlyAtWriteback,
}
BROKEN.update(FOLIO_CACHE_BUGS)


# ---- power cuts: bugs that only a power cut shows -----------------------------------


class PowerCutMTD(FolioCacheMTD):
    """FolioCacheMTD whose store survives a power cut and whose cache does not: a correct
    device for the power-cut suites. It writes each folio back as one unit, and says so."""

    def __init__(self, size: int = 2 << 20, erasesize: int = 64 << 10,
                 folio_order: int = 2, cache_folios: int = 8, readonly: bool = False,
                 **kwargs: object) -> None:
        super().__init__(size=size, erasesize=erasesize, folio_order=folio_order,
                         cache_folios=cache_folios, readonly=readonly)
        self.name = "powercut"
        self.power_cut_unit = self.folio_size

    def settle(self) -> None:
        """What a release does after the sync before the cache goes (nothing here)."""

    def reopen(self) -> None:
        self.sync()
        self.settle()
        self.cache.clear()

    def close(self) -> None:
        self.sync()
        self.settle()
        self.closed = True

    def power_cut(self) -> None:
        self.cache.clear()


class SyncWithoutFlush(PowerCutMTD):
    """Writeback goes to the disk's volatile write cache; sync forgets the flush that
    makes it durable (a missing REQ_PREFLUSH). Reads, reopen and close see the data, a
    power cut loses it."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)    # type: ignore[arg-type]
        self.volatile: dict[int, bytes] = {}

    def _writeback(self, index: int, folio: _Folio) -> None:
        if folio.dirty:
            self.volatile[index] = bytes(folio.data)
            folio.dirty = False

    def _read_folio(self, index: int) -> _Folio:
        folio = super()._read_folio(index)
        if index in self.volatile:
            folio.data[:] = self.volatile[index]
        return folio

    def settle(self) -> None:
        """The flush: the volatile write cache onto the store."""
        for index, data in self.volatile.items():
            self.store[index * self.folio_size:(index + 1) * self.folio_size] = data
        self.volatile.clear()

    def sync(self) -> None:
        super().sync()                                         # bug: no self.settle()

    def power_cut(self) -> None:
        super().power_cut()
        self.volatile.clear()


class SyncWritesTheWrongPages(PowerCutMTD):
    """Dirty state per page inside a large folio (as iomap's per-block state): sync
    writes as many pages as are dirty, but counted from the folio's first page, not the
    dirty ones. The pages it missed stay dirty and reach the store at eviction, reopen
    or close, so only a power cut after a sync shows it."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)    # type: ignore[arg-type]
        self.dirty_pages: dict[int, set[int]] = {}

    def _mark(self, index: int, off: int, length: int) -> None:
        self.dirty_pages.setdefault(index, set()).update(
            range(off // PAGE_SIZE, (off + length - 1) // PAGE_SIZE + 1))

    def _store_piece(self, index: int, off: int, piece: bytes) -> None:
        super()._store_piece(index, off, piece)
        self._mark(index, off, len(piece))

    def _erase(self, offset: int, length: int) -> None:
        super()._erase(offset, length)
        for i, o, n in self._segments(offset, length):
            self._mark(i, o, n)

    def _writeback(self, index: int, folio: _Folio) -> None:
        super()._writeback(index, folio)
        self.dirty_pages.pop(index, None)

    def sync(self) -> None:
        for index, folio in self.cache.items():
            pages = self.dirty_pages.pop(index, set())
            if not folio.dirty:
                continue
            if not pages:             # dirtied whole, without a read
                self._writeback(index, folio)
                continue
            written = set(range(len(pages)))                   # bug: not sorted(pages)
            for page in written:
                start = index * self.folio_size + page * PAGE_SIZE
                self.store[start:start + PAGE_SIZE] = folio.data[
                    page * PAGE_SIZE:(page + 1) * PAGE_SIZE]
            left = pages - written
            if left:
                self.dirty_pages[index] = left
            folio.dirty = bool(left)

    def settle(self) -> None:
        """Release: every folio still dirty goes back whole."""
        for index, folio in self.cache.items():
            self._writeback(index, folio)


class EraseQueuedPastSync(PowerCutMTD):
    """Erase queues the erased pages (reads see 0xFF at once, the cached folios are
    updated in place) and reports the erase done; writeback of a folio retires its
    pages from the queue, reopen and close apply the rest, but sync forgets the queue:
    an erase reported done and synced comes back undone after a power cut."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)    # type: ignore[arg-type]
        self.erasing: set[int] = set()

    def _read_folio(self, index: int) -> _Folio:
        folio = super()._read_folio(index)
        first = index * self.folio_size // PAGE_SIZE
        for page in range(self.folio_size // PAGE_SIZE):
            if first + page in self.erasing:
                folio.data[page * PAGE_SIZE:(page + 1) * PAGE_SIZE] = FF * PAGE_SIZE
        return folio

    def _erase(self, offset: int, length: int) -> None:
        self.erasing.update(range(offset // PAGE_SIZE, (offset + length) // PAGE_SIZE))
        for i, o, n in self._segments(offset, length):
            folio = self.cache.get(i)
            if folio is not None:
                folio.data[o:o + n] = FF * n

    def _writeback(self, index: int, folio: _Folio) -> None:
        if folio.dirty:
            super()._writeback(index, folio)
            first = index * self.folio_size // PAGE_SIZE
            self.erasing.difference_update(range(first, first + self.folio_size // PAGE_SIZE))

    def settle(self) -> None:
        """The queued erases onto the store."""
        for page in self.erasing:
            self.store[page * PAGE_SIZE:(page + 1) * PAGE_SIZE] = FF * PAGE_SIZE
        self.erasing.clear()

    def sync(self) -> None:
        super().sync()                                         # bug: no self.settle()

    def power_cut(self) -> None:
        super().power_cut()
        self.erasing.clear()


class WritebackDropsTheLastByte(PowerCutMTD):
    """Writeback of the folio that holds the device's last byte stores one byte short
    (the end computed as ``size - 1`` where ``size`` was meant): reads see the byte in
    the cache, and a power cut after a sync finds it as it was."""

    def _writeback(self, index: int, folio: _Folio) -> None:
        start = index * self.folio_size
        if folio.dirty and start + len(folio.data) >= self.size:
            end = self.size - 1                                # bug: one short
            self.store[start:end] = folio.data[:end - start]
            folio.dirty = False
            return
        super()._writeback(index, folio)


class SyncStopsAt1MiB(PowerCutMTD):
    """sync writes back the dirty folios of the device's first MiB only (a writeback
    range of 1 MiB where the whole device was meant); the rest reaches the store at
    eviction, reopen or close, so only a power cut after a sync shows it."""

    def sync(self) -> None:
        for index, folio in self.cache.items():
            if index * self.folio_size < 1 << 20:              # bug: range_end = 1 MiB
                self._writeback(index, folio)


POWER_CUT_BUGS: dict[str, type[PowerCutMTD]] = {
    "sync_without_flush": SyncWithoutFlush,
    "sync_writes_the_wrong_pages": SyncWritesTheWrongPages,
    "erase_queued_past_sync": EraseQueuedPastSync,
    "writeback_drops_the_last_byte": WritebackDropsTheLastByte,
    "sync_stops_at_1mib": SyncStopsAt1MiB,
}
BROKEN.update(POWER_CUT_BUGS)
BROKEN.update(EDGE_BUGS)
BROKEN.update(UNNAMED_BUGS)
