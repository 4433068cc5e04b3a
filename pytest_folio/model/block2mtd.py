"""block2mtd: an MTD device on top of a block device's page cache.

As drivers/mtd/devices/block2mtd.c does it: type MTD_RAM, flags MTD_CAP_RAM, writesize 1,
writebufsize PAGE_SIZE, no OOB, named ``block2mtd: <dev>``, size cut down to whole pages;
the erasesize must divide the device size. Data lives in ``bdev->bd_mapping``: a read
copies out of cached folios, a write copies in and marks them dirty (only when the bytes
change), an erase fills with 0xFF only the pages that are not all 0xFF already, and
``sync`` is sync_blockdev.

Two code paths show what the folio conversion (seed: "mtd: block2mtd: convert to
folios") changes: ``api="page"`` walks page by page through the page wrappers, each of
which counts a compound_head (one per page read, four per page written or erased);
``api="folio"`` walks whole folios and counts none. Both then check, with the folio
locked, that it is still in the mapping and retry if it was dropped (the race the
series' first patch fixes); ``retry=False`` removes that check so the lost write can be
reproduced, and :meth:`Block2MTD.drop_folio_before_lock` opens the window for the race.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_folio.model.blockdev import BlockDevice
from pytest_folio.model.constants import PAGE_SHIFT, PAGE_SIZE
from pytest_folio.model.folio import Folio, folio_lock, folio_put, folio_unlock
from pytest_folio.model.mtdcore import mtd_check_erase, mtd_check_read, mtd_check_write
from pytest_folio.model.page_writeback import folio_mark_dirty
from pytest_folio.model.pagewrappers import lock_page, put_page, set_page_dirty, unlock_page
from pytest_folio.model.stats import Stats
from pytest_folio.uapi import MTD_CAP_RAM, MTD_RAM, MTD_WRITEABLE

PAGE_MASK = ~(PAGE_SIZE - 1)
_IN_PAGE = PAGE_SIZE - 1
APIS = ("folio", "page")


class _ErasedPages(dict[int, bytes]):
    """``_ERASED_PAGES[n]``: n pages of 0xFF, made once, so checking a folio for "erased"
    is one memcmp (a dict lookup, cheaper per folio than any function call)."""

    def __missing__(self, nr_pages: int) -> bytes:
        self[nr_pages] = erased = b"\xff" * (nr_pages << PAGE_SHIFT)
        return erased


_ERASED_PAGES = _ErasedPages()
# What the page path's wrappers cost, from the wrappers themselves (pagewrappers)
_PUT_HEADS = put_page.compound_heads
_LOCK_HEADS = lock_page.compound_heads
_DIRTY_UNLOCK_HEADS = set_page_dirty.compound_heads + unlock_page.compound_heads
_UNLOCK_PUT_HEADS = unlock_page.compound_heads + put_page.compound_heads
_ERASED_PAGE = _ERASED_PAGES[1]


class Block2MTDStats:
    """The model's counters plus block2mtd's own, in one ``snapshot()``.

    Attribute reads fall through to the model's :class:`Stats` (``stats.compound_head``).
    """

    def __init__(self, model: Stats) -> None:
        self.model = model
        self.erase_pages_written = 0   # pages an erase filled with 0xFF
        self.erase_pages_skipped = 0   # pages an erase found all 0xFF and left alone

    def __getattr__(self, name: str) -> int:
        return getattr(self.model, name)

    def snapshot(self) -> dict[str, int]:
        flat = self.model.snapshot()
        flat["erase_pages_written"] = self.erase_pages_written
        flat["erase_pages_skipped"] = self.erase_pages_skipped
        return flat

    def reset(self) -> None:
        self.model.reset()
        self.erase_pages_written = self.erase_pages_skipped = 0

    def delta(self, before: dict[str, int]) -> dict[str, int]:
        now = self.snapshot()
        return {k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)}


class Block2MTD:
    """An MTDDevice over ``bdev``'s page cache (see the module docstring)."""

    type = MTD_RAM
    writesize = 1
    writebufsize = PAGE_SIZE
    oobsize = 0

    def __init__(self, bdev: BlockDevice, erasesize: int, api: str = "folio",
                 retry: bool = True, name: str | None = None) -> None:
        if api not in APIS:
            raise ValueError(f"block2mtd api must be one of {', '.join(APIS)}, not {api!r}")
        if not isinstance(erasesize, int) or erasesize <= 0 or bdev.size % erasesize:
            raise ValueError(f"erasesize {erasesize!r} must be a divisor of the device size "
                             f"{bdev.size} (block2mtd: \"erasesize must be a divisor of "
                             "device size\")")
        self.bdev = bdev
        self.mapping = bdev.bd_mapping
        self.stats = Block2MTDStats(bdev.stats)
        self.name = name or f"block2mtd: {bdev.name}"
        self.size = bdev.size & PAGE_MASK
        self.erasesize = erasesize
        self.flags = MTD_CAP_RAM & ~MTD_WRITEABLE if bdev.read_only else MTD_CAP_RAM
        self.api = api
        self.retry = retry
        # Called with the folio between its lookup and folio_lock in write and erase:
        # the window in which invalidate_bdev() can drop it.
        self.before_lock: Callable[[Folio], None] | None = None
        if api == "page":
            self._read, self._write, self._erase = (
                self._read_pages, self._write_pages, self._erase_pages)
        else:
            self._read, self._write, self._erase = (
                self._read_folios, self._write_folios, self._erase_folios)

    @property
    def folio_order(self) -> int:
        """The order of the folios caching the device (its block size's)."""
        return self.mapping.mapping_min_folio_order()

    def __repr__(self) -> str:
        return (f"<Block2MTD {self.name!r} size={self.size} erasesize={self.erasesize} "
                f"api={self.api} retry={'on' if self.retry else 'off'}>")

    # -- fault injection ------------------------------------------------------------------

    def drop_folio_before_lock(self, times: int = 1) -> None:
        """The next ``times`` writes or erases that are about to lock a folio first see
        invalidate_bdev() run, which drops it from the page cache when it is clean: the
        race of the seed's first patch."""
        remaining = times

        def drop(folio: Folio) -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0:
                self.before_lock = None
            self.bdev.invalidate_bdev()

        self.before_lock = drop if times > 0 else None

    # -- MTDDevice -------------------------------------------------------------------------

    def read(self, offset: int, length: int) -> bytes:
        mtd_check_read(offset, length, self.size)
        buf = bytearray(length)
        self._read(memoryview(buf), offset, length)
        self.stats.model.bytes_copied += length
        return bytes(buf)

    def write(self, offset: int, data: bytes) -> None:
        mtd_check_write(offset, len(data), self.size, self.flags, self.name)
        self._write(bytes(data), offset)

    def erase(self, offset: int, length: int) -> None:
        mtd_check_erase(offset, length, self.size, self.flags, self.name)
        self._erase(offset >> PAGE_SHIFT, length >> PAGE_SHIFT)  # page granular, as the driver

    def sync(self) -> None:
        self.bdev.sync_blockdev()

    def reopen(self) -> None:
        """Module exit and load again: sync, then the block device's last close drops its
        page cache (kill_bdev), so everything is read back from the store."""
        self.sync()
        self.bdev.invalidate_bdev()

    def close(self) -> None:
        """As module exit: block2mtd_sync(), then let go of the block device."""
        self.sync()
        self.bdev.close()

    def _lock_still_mapped(self, folio: Folio) -> bool:
        """folio_lock, then the series' first patch: if invalidate_bdev() dropped the folio
        between lookup and lock, release it and say so, so the caller looks it up again
        (with ``retry=False`` the check is gone and the write goes to the dropped folio)."""
        if self.before_lock is not None:
            self.before_lock(folio)
        folio_lock(folio)
        if self.retry and folio.mapping is not self.mapping:
            folio_unlock(folio)
            folio_put(folio)
            self.stats.model.retries += 1
            return False
        return True

    # Hot loops: both paths avoid min() and other builtin calls (a call costs more than
    # copying a page here), so that what separates them is only the conversion's change.
    #
    # -- api="page": the per-page wrappers, as before the folio conversion --------------
    #
    # The kernel's wrappers are inline: lock_page(page) is folio_lock(page_folio(page)),
    # so all they add to a folio call is the compound_head(). They are spelled that way
    # here (the folio call on the page's folio) so that the page path differs from the
    # folio path only in what the conversion removed: it goes page by page, looks each
    # page up (one probe, the same for every page of a folio, as the xarray's), and
    # pays each wrapper's compound_heads, the very counts the wrappers in pagewrappers
    # add when called. read_mapping_page() hands back the page of the folio by
    # arithmetic (folio_file_page) and costs none. The counts go into a local and reach
    # the stats once per call (exact even when a lookup raises), so that counting costs
    # no more than the kernel's inline compound_head() does.

    def _read_pages(self, buf: memoryview, pos: int, length: int) -> None:
        read_mapping_folio = self.mapping.read_mapping_folio
        heads = 0
        done = 0
        try:
            while done < length:
                folio = read_mapping_folio(pos >> PAGE_SHIFT)    # read_mapping_page()
                offset = pos - folio.pos
                cpylen = PAGE_SIZE - (pos & _IN_PAGE)            # to the end of the page
                if cpylen > length - done:
                    cpylen = length - done
                buf[done:done + cpylen] = folio.data[offset:offset + cpylen]
                heads += _PUT_HEADS                              # put_page(page)
                if folio.refcount > 1:             # folio_put, its usual case inline
                    folio.refcount -= 1
                else:
                    folio_put(folio)
                done += cpylen
                pos += cpylen
        finally:
            self.stats.model.compound_head += heads

    def _write_pages(self, data: bytes, pos: int) -> None:
        read_mapping_folio = self.mapping.read_mapping_folio
        stats = self.stats.model
        heads = 0
        done, length = 0, len(data)
        try:
            while done < length:
                folio = read_mapping_folio(pos >> PAGE_SHIFT)    # read_mapping_page()
                offset = pos - folio.pos
                cpylen = PAGE_SIZE - (pos & _IN_PAGE)            # to the end of the page
                if cpylen > length - done:
                    cpylen = length - done
                dst = folio.data[offset:offset + cpylen]
                src = data[done:done + cpylen]
                if dst.tobytes() != src:
                    heads += _LOCK_HEADS                         # lock_page(page)
                    if not self._lock_still_mapped(folio):
                        heads += _UNLOCK_PUT_HEADS               # unlock_page, put_page
                        continue
                    dst[:] = src
                    stats.bytes_copied += cpylen
                    heads += _DIRTY_UNLOCK_HEADS                 # set_page_dirty, unlock_page
                    folio_mark_dirty(folio)
                    folio_unlock(folio)
                heads += _PUT_HEADS                              # put_page(page)
                if folio.refcount > 1:             # folio_put, its usual case inline
                    folio.refcount -= 1
                else:
                    folio_put(folio)
                done += cpylen
                pos += cpylen
        finally:
            stats.compound_head += heads

    def _erase_pages(self, index: int, pages: int) -> None:
        read_mapping_folio = self.mapping.read_mapping_folio
        stats = self.stats
        heads = written = skipped = 0
        end = index + pages
        try:
            while index < end:
                folio = read_mapping_folio(index)                # page = read_mapping_page()
                start = (index - folio.index) << PAGE_SHIFT      # page_address(page)
                addr = folio.data[start:start + PAGE_SIZE]
                if addr.tobytes() == _ERASED_PAGE:
                    skipped += 1
                else:
                    heads += _LOCK_HEADS                         # lock_page(page)
                    if not self._lock_still_mapped(folio):
                        heads += _UNLOCK_PUT_HEADS               # unlock_page, put_page
                        continue
                    addr[:] = _ERASED_PAGE
                    heads += _DIRTY_UNLOCK_HEADS                 # set_page_dirty, unlock_page
                    folio_mark_dirty(folio)
                    folio_unlock(folio)
                    written += 1
                heads += _PUT_HEADS                              # put_page(page)
                if folio.refcount > 1:             # folio_put, its usual case inline
                    folio.refcount -= 1
                else:
                    folio_put(folio)
                index += 1
        finally:
            stats.model.compound_head += heads
            stats.erase_pages_written += written
            stats.erase_pages_skipped += skipped

    # -- api="folio": whole folios, no compound_head ----------------------------------

    def _read_folios(self, buf: memoryview, pos: int, length: int) -> None:
        read_mapping_folio = self.mapping.read_mapping_folio
        done = 0
        while done < length:
            folio = read_mapping_folio(pos >> PAGE_SHIFT)
            offset = pos - folio.pos
            cpylen = folio.size - offset
            if cpylen > length - done:
                cpylen = length - done
            buf[done:done + cpylen] = folio.data[offset:offset + cpylen]
            if folio.refcount > 1:             # folio_put, its usual case inline
                folio.refcount -= 1
            else:
                folio_put(folio)
            done += cpylen
            pos += cpylen

    def _write_folios(self, data: bytes, pos: int) -> None:
        read_mapping_folio = self.mapping.read_mapping_folio
        stats = self.stats.model
        done, length = 0, len(data)
        while done < length:
            folio = read_mapping_folio(pos >> PAGE_SHIFT)
            offset = pos - folio.pos
            cpylen = folio.size - offset
            if cpylen > length - done:
                cpylen = length - done
            dst = folio.data[offset:offset + cpylen]
            src = data[done:done + cpylen]
            if dst.tobytes() != src:
                if not self._lock_still_mapped(folio):
                    continue
                dst[:] = src
                stats.bytes_copied += cpylen
                folio_mark_dirty(folio)
                folio_unlock(folio)
            if folio.refcount > 1:             # folio_put, its usual case inline
                folio.refcount -= 1
            else:
                folio_put(folio)
            done += cpylen
            pos += cpylen

    def _erase_folios(self, index: int, pages: int) -> None:
        read_mapping_folio = self.mapping.read_mapping_folio
        stats = self.stats
        written = skipped = 0
        end = index + pages
        erased, erased_nr = _ERASED_PAGE, 1      # folios come in runs of one size
        try:
            while index < end:
                folio = read_mapping_folio(index)
                nr = folio.nr_pages
                if folio.index == index and nr <= end - index:   # the whole folio: usual
                    view = folio.data
                else:
                    first = index - folio.index
                    nr -= first
                    if nr > end - index:
                        nr = end - index
                    view = folio.data[first << PAGE_SHIFT:(first + nr) << PAGE_SHIFT]
                if nr != erased_nr:
                    erased, erased_nr = _ERASED_PAGES[nr], nr
                if view.tobytes() == erased:
                    skipped += nr
                else:
                    if not self._lock_still_mapped(folio):
                        continue
                    if nr == 1:              # the one page is not erased: no second look
                        view[:] = _ERASED_PAGE
                        written += 1
                    else:
                        for start in range(0, nr << PAGE_SHIFT, PAGE_SIZE):
                            page = view[start:start + PAGE_SIZE]
                            if page.tobytes() == _ERASED_PAGE:
                                skipped += 1
                            else:
                                page[:] = _ERASED_PAGE
                                written += 1
                    folio_mark_dirty(folio)
                    folio_unlock(folio)
                if folio.refcount > 1:             # folio_put, its usual case inline
                    folio.refcount -= 1
                else:
                    folio_put(folio)
                index += nr
        finally:
            stats.erase_pages_written += written
            stats.erase_pages_skipped += skipped


def make_reference_block2mtd(*, size: int, erasesize: int, folio_order: int,
                             api: str = "folio", retry: bool = True,
                             read_only: bool = False) -> Block2MTD:
    """The bundled reference device: block2mtd on an in-memory block device whose logical
    block size is the folio size, so its page cache holds folios of ``folio_order``
    (``read_only``: on a read-only block device, so without MTD_WRITEABLE)."""
    bdev = BlockDevice(size, logical_block_size=PAGE_SIZE << folio_order,
                       name=f"ram-{PAGE_SIZE << folio_order >> 10}k", read_only=read_only)
    return Block2MTD(bdev, erasesize, api=api, retry=retry)
