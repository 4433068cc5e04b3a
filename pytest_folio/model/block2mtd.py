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

What a path costs per page is independent of the folio's size, as in the kernel: the page
path looks every page up (one probe for any page of a folio) and copies it; the folio
path looks up and copies each folio once. An operation on cached pages runs its lookups,
compares and copies in C as one batch (:meth:`Block2MTD._gather`), so that the Python
interpreter's cost per lookup stays below a page copy's, as the kernel's does, and the
base-vs-patched shape of the seed's table comes out. Where a batch cannot stand for the
driver's steps (a page to read in, a folio someone holds locked, a fault about to be
injected between lookup and lock) the operation loops step by step as the driver does;
both ways leave the same bytes, dirty folios and counters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from io import BytesIO
from itertools import compress, cycle, islice, repeat
from operator import and_, attrgetter, getitem, not_
from typing import cast

from pytest_folio.linux.mtdcore import mtd_check_erase, mtd_check_read, mtd_check_write
from pytest_folio.linux.uapi import MTD_CAP_RAM, MTD_RAM, MTD_WRITEABLE
from pytest_folio.model.blockdev import TORN_WRITEBACK, BlockDevice
from pytest_folio.model.constants import MAX_PAGECACHE_ORDER, PAGE_SHIFT, PAGE_SIZE
from pytest_folio.model.folio import (
    Folio,
    folio_lock,
    folio_page_views,
    folio_put,
    folio_unlock,
)
from pytest_folio.model.page_writeback import folio_mark_dirty
from pytest_folio.model.pagewrappers import lock_page, put_page, set_page_dirty, unlock_page
from pytest_folio.model.stats import Stats

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
_DATA = attrgetter("data")
_WHOLE = slice(None)
_UPTODATE = attrgetter("uptodate")
_LOCKED = attrgetter("locked")
_PAGE_VIEWS = attrgetter("page_views")
# 0xFF over the largest folio: ``_ERASED_ANY.startswith(view)`` is "view is erased", one
# memcmp without a copy for a step of any size
_ERASED_ANY = _ERASED_PAGES[1 << MAX_PAGECACHE_ORDER]


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
                 retry: bool = True, name: str | None = None, torn: str = "prefix") -> None:
        if api not in APIS:
            raise ValueError(f"block2mtd api must be one of {', '.join(APIS)}, not {api!r}")
        if not isinstance(erasesize, int) or erasesize <= 0 or bdev.size % erasesize:
            raise ValueError(f"erasesize {erasesize!r} must be a divisor of the device size "
                             f"{bdev.size} (block2mtd: \"erasesize must be a divisor of "
                             "device size\")")
        if torn not in TORN_WRITEBACK:
            raise ValueError(f"block2mtd torn must be one of {', '.join(TORN_WRITEBACK)}, "
                             f"not {torn!r}")
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
        self.per_page = api == "page"
        self.torn = torn            # what a power cut does to the folio under writeback
        self.power_cuts = 0

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

    # A batch stands for the step loop it was checked against: a subclass that overrides
    # _write or _erase (a test's injected bug, a user's variant of the driver) runs its own.
    _batch_writes = True
    _batch_erases = True

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls._batch_writes = cls._write is Block2MTD._write
        cls._batch_erases = cls._erase is Block2MTD._erase

    # -- MTDDevice -------------------------------------------------------------------------

    def read(self, offset: int, length: int) -> bytes:
        mtd_check_read(offset, length, self.size)
        if length == 0:
            return b""
        steps = self._gather(offset, offset + length, locking=False)
        if steps is None:
            buf = bytearray(length)
            self._read_loop(memoryview(buf), offset, length)
            data = bytes(buf)
        else:
            self._count_locked_steps(len(steps[0]), 0)        # put_page(page)
            data = b"".join(steps[1])
        self.stats.model.bytes_copied += length
        return data

    def write(self, offset: int, data: bytes) -> None:
        mtd_check_write(offset, len(data), self.size, self.flags, self.name)
        data = bytes(data)
        if data and not (self._batch_writes and self._write_batch(data, offset)):
            self._write(data, offset)

    def erase(self, offset: int, length: int) -> None:
        mtd_check_erase(offset, length, self.size, self.flags, self.name)
        index, pages = offset >> PAGE_SHIFT, length >> PAGE_SHIFT  # page granular, as the driver
        if pages and not (self._batch_erases and self._erase_batch(index, pages)):
            self._erase(index, pages)

    def sync(self) -> None:
        self.bdev.sync_blockdev()

    def reopen(self) -> None:
        """Module exit and load again: sync, then the block device's last close drops its
        page cache (kill_bdev), so everything is read back from the store."""
        self.sync()
        self.bdev.invalidate_bdev()

    def power_cut(self) -> None:
        """The machine loses power and block2mtd is loaded again on the same disk: what
        was written back stays, the rest of the page cache is lost, and the folio under
        writeback lands as ``torn`` says (see ``BlockDevice.power_cut``)."""
        self.bdev.power_cut(self.torn, self.power_cuts)
        self.power_cuts += 1

    @property
    def power_cut_unit(self) -> int:
        """What a cut lands whole or not at all: a folio, unless its writeback tears
        (``torn="prefix"``), then a page."""
        return PAGE_SIZE if self.torn == "prefix" else PAGE_SIZE << self.folio_order

    def drop_caches(self) -> None:
        """``echo 1 > /proc/sys/vm/drop_caches``: the block device's clean folios leave
        its page cache (invalidate_mapping_pages); dirty and locked ones stay."""
        self.bdev.invalidate_bdev()

    def close(self) -> None:
        """As module exit: block2mtd_sync(), then let go of the block device."""
        self.sync()
        self.bdev.close()

    def _lock_still_mapped(self, folio: Folio) -> bool:
        """folio_lock (lock_page on the page path), then the series' first patch: if
        invalidate_bdev() dropped the folio between lookup and lock, release it (unlock,
        put) and say so, so the caller looks it up again (with ``retry=False`` the check
        is gone and the write goes to the dropped folio)."""
        if self.before_lock is not None:
            self.before_lock(folio)
        folio_lock(folio)
        stats = self.stats.model
        if self.per_page:
            stats.compound_head += _LOCK_HEADS
        if self.retry and folio.mapping is not self.mapping:
            folio_unlock(folio)
            folio_put(folio)
            stats.retries += 1
            if self.per_page:
                stats.compound_head += _UNLOCK_PUT_HEADS
            return False
        return True

    # -- the two paths ----------------------------------------------------------------
    #
    # One loop per operation serves both APIs, so the paths differ only in what the
    # conversion changed: the page path steps page by page (each page looked up again,
    # one probe whatever the folio's size, as the xarray's) and pays each wrapper's
    # compound_heads, the very counts the wrappers in pagewrappers add when called; the
    # folio path steps folio by folio and pays none. The kernel's wrappers are inline
    # (lock_page(page) is folio_lock(page_folio(page))), so the page path calls the folio
    # functions on the page's folio; read_mapping_page() hands back the page of the folio
    # by arithmetic (folio_file_page) and costs none. The counts go into a local and
    # reach the stats once per call (exact even when a lookup raises); the lock's (and
    # a retry's) are counted where the lock is taken.

    def _gather(self, pos: int, end: int, locking: bool
                ) -> tuple[list[Folio], list[memoryview]] | None:
        """The steps over bytes [pos, end) as one batch (as filemap_read's folio_batch):
        each step's folio (one step per page on the page path, per folio on the folio
        path) and the bytes of it the step covers, gathered by lookups and slices that
        run in C at a cost per step independent of the folio's size. None when a page
        is not cached in an uptodate folio of the minimum order or, for a write or an
        erase (``locking``), a folio is locked or a fault is about to be injected: the
        step-by-step loop then reads folios in, locks and retries as the driver does.

        Nothing can change between the lookups and the last step in a single-threaded
        model, so a batch takes no references (a folio_get and folio_put per lookup in
        the kernel) and locks nothing (folio_lock then folio_unlock of a folio nobody
        holds, with nothing to drop it between lookup and lock); what those cost in
        compound_heads its caller counts per step as the loop does. Each looked-up
        folio is marked accessed and the lookups are counted. Per page the page path
        pays the same at every order (a probe, a page address); what it checks and
        marks on a folio it does once per folio, so the 4K page path, whose pages are
        folios, pays for that per page as the folio path does."""
        if locking and self.before_lock is not None:
            return None
        mapping = self.mapping
        mask = mapping.min_index_mask
        nr = ~mask + 1                           # pages in a folio of the minimum order
        first, last = pos >> PAGE_SHIFT, (end - 1) >> PAGE_SHIFT
        by_page = self.per_page and nr > 1       # steps inside folios
        if by_page:                              # read_mapping_page() for every page
            # (the probe for a page inside a folio lands on the folio's first page)
            off = first & ~mask
            found = list(map(mapping.i_pages.get,
                             map(and_, range(first, last + 1), repeat(mask))))
            # each folio once, where its first step is (a page's flags are its folio's)
            folios = found[:1] + found[nr - off::nr]
        else:                                    # read_mapping_folio() for every folio
            # (or read_mapping_page() for every page, each page a folio)
            folios = found = list(map(mapping.i_pages.get, range(first & mask, last + 1, nr)))
        try:                    # a None (a miss, or a folio above the minimum order) raises
            if (not all(map(_UPTODATE, folios))
                    or (locking and any(map(_LOCKED, folios)))):
                return None
        except AttributeError:
            return None
        batch, heads = cast("tuple[list[Folio], list[Folio]]", (found, folios))
        for folio in heads:
            folio.referenced = True              # folio_mark_accessed
        views: list[memoryview]
        if by_page:                              # page_address(page) of every page
            for folio in heads:
                if folio.page_views is None:
                    folio_page_views(folio)
            views = list(map(getitem, map(_PAGE_VIEWS, batch),
                             islice(cycle(range(nr)), off, None)))
            start_first, start_last = first << PAGE_SHIFT, last << PAGE_SHIFT
        else:                                    # folio_address(folio) of every folio
            views = list(map(_DATA, batch))      # (a page's address, when it is a folio)
            start_first, start_last = batch[0].pos, batch[-1].pos
        if end - start_last != len(views[-1]):   # the ends may be partial
            views[-1] = views[-1][:end - start_last]
        if pos != start_first:
            views[0] = views[0][pos - start_first:]
        mapping.stats.folio_lookups += len(batch)
        return batch, views

    def _count_locked_steps(self, steps: int, locked: int) -> None:
        """A batch's compound_heads, as the loop counts them: on the page path one per
        step (put_page) and three more per step that locked its page (lock_page,
        set_page_dirty, unlock_page)."""
        if self.per_page:
            self.stats.model.compound_head += (steps * _PUT_HEADS
                                               + locked * (_LOCK_HEADS + _DIRTY_UNLOCK_HEADS))

    def _read_loop(self, buf: memoryview, pos: int, length: int) -> None:
        read_mapping_folio = self.mapping.read_mapping_folio
        per_page = self.per_page
        put_heads = _PUT_HEADS if per_page else 0
        heads = done = 0
        try:
            while done < length:
                folio = read_mapping_folio(pos >> PAGE_SHIFT)    # or read_mapping_page()
                offset = pos - folio.pos
                cpylen = PAGE_SIZE - (pos & _IN_PAGE) if per_page else folio.size - offset
                if cpylen > length - done:
                    cpylen = length - done
                buf[done:done + cpylen] = folio.data[offset:offset + cpylen]
                folio_put(folio)                                 # put_page(page)
                heads += put_heads
                done += cpylen
                pos += cpylen
        finally:
            self.stats.model.compound_head += heads

    def _write_batch(self, data: bytes, pos: int) -> bool:
        """:meth:`_write` as one batch (False when :meth:`_gather` cannot make one): each
        step's bytes compared with ``data`` in place and copied only where they differ,
        those steps' folios marked dirty; the same bytes, dirty folios and counters as
        the loop."""
        steps = self._gather(pos, pos + len(data), locking=True)
        if steps is None:
            return False
        batch, views = steps
        length = len(data)
        step = PAGE_SIZE if self.per_page else PAGE_SIZE << self.mapping.min_order
        # where each step's bytes lie in data: the steps end at page or folio boundaries
        starts = [0, *range(step - (pos & (step - 1)), length, step), length]
        changed = list(map(not_, map(data.startswith, views, starts)))
        if all(changed):            # the usual case: every step copied, in order
            deque(map(BytesIO(data).readinto, views), 0)
        else:
            src = memoryview(data)
            for view, start in compress(zip(views, starts, strict=False), changed):
                view[:] = src[start:start + len(view)]
        for folio in compress(batch, changed):
            folio.dirty = True                                   # set_page_dirty(page)
        copied = sum(compress(map(len, views), changed))
        self.stats.model.bytes_copied += copied
        self._count_locked_steps(len(batch), sum(changed))
        return True

    def _erase_batch(self, index: int, pages: int) -> bool:
        """:meth:`_erase` as one batch (False when :meth:`_gather` cannot make one): the
        steps that are all 0xFF left alone, the others (on the folio path: their pages
        that are not all 0xFF) filled, their folios marked dirty; the same bytes, dirty
        folios and counters as the loop."""
        steps = self._gather(index << PAGE_SHIFT, (index + pages) << PAGE_SHIFT, locking=True)
        if steps is None:
            return False
        batch, views = steps
        changed = list(map(not_, map(_ERASED_ANY.startswith, views)))
        if len(views) == pages:          # steps of one page: a page not erased needs no
            written = sum(changed)       # second look
            deque(map(memoryview.__setitem__, compress(views, changed), repeat(_WHOLE),
                      repeat(_ERASED_PAGE)), 0)
        else:                            # a second look, page by page, inside each folio
            written = 0
            first = index - batch[0].index       # the first step may start inside its folio
            for folio, view in compress(zip(batch, views, strict=True), changed):
                # every page's first byte in one copy: a page whose first byte is not
                # 0xFF is not erased, with no look at the rest (memchr_inv stops there)
                heads = view[::PAGE_SIZE].tobytes()
                if 0xFF not in heads:            # no page erased: fill the whole step
                    view[:] = _ERASED_PAGES[len(heads)]
                    written += len(heads)
                    continue
                start = first if folio is batch[0] else 0
                for page, head in zip(folio_page_views(folio)[start:start + len(heads)], heads,
                                      strict=True):
                    if head != 0xFF or not _ERASED_ANY.startswith(page):
                        page[:] = _ERASED_PAGE
                        written += 1
        for folio in compress(batch, changed):
            folio.dirty = True                                   # set_page_dirty(page)
        self._count_locked_steps(len(batch), sum(changed))
        self.stats.erase_pages_written += written
        self.stats.erase_pages_skipped += pages - written
        return True

    def _write(self, data: bytes, pos: int) -> None:
        read_mapping_folio = self.mapping.read_mapping_folio
        per_page = self.per_page
        put_heads, dirty_heads = (_PUT_HEADS, _DIRTY_UNLOCK_HEADS) if per_page else (0, 0)
        stats = self.stats.model
        heads = done = 0
        length = len(data)
        try:
            while done < length:
                folio = read_mapping_folio(pos >> PAGE_SHIFT)    # or read_mapping_page()
                offset = pos - folio.pos
                cpylen = PAGE_SIZE - (pos & _IN_PAGE) if per_page else folio.size - offset
                if cpylen > length - done:
                    cpylen = length - done
                dst = folio.data[offset:offset + cpylen]
                src = data[done:done + cpylen]
                if dst.tobytes() != src:
                    if not self._lock_still_mapped(folio):
                        continue
                    dst[:] = src
                    stats.bytes_copied += cpylen
                    folio_mark_dirty(folio)                      # set_page_dirty(page)
                    folio_unlock(folio)                          # unlock_page(page)
                    heads += dirty_heads
                folio_put(folio)                                 # put_page(page)
                heads += put_heads
                done += cpylen
                pos += cpylen
        finally:
            stats.compound_head += heads

    def _erase(self, index: int, pages: int) -> None:
        """Fill pages [index, index + pages) with 0xFF, leaving alone (and not dirtying)
        the pages that are all 0xFF already: one look at the whole step first, then, on
        the folio path, page by page inside a folio that is not all erased."""
        read_mapping_folio = self.mapping.read_mapping_folio
        per_page = self.per_page
        put_heads, dirty_heads = (_PUT_HEADS, _DIRTY_UNLOCK_HEADS) if per_page else (0, 0)
        stats = self.stats
        heads = written = skipped = 0
        end = index + pages
        erased, erased_nr = _ERASED_PAGE, 1      # steps come in runs of one size
        try:
            while index < end:
                folio = read_mapping_folio(index)                # or read_mapping_page()
                first = index - folio.index
                nr = 1 if per_page else folio.nr_pages - first
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
                    folio_mark_dirty(folio)                      # set_page_dirty(page)
                    folio_unlock(folio)                          # unlock_page(page)
                    heads += dirty_heads
                folio_put(folio)                                 # put_page(page)
                heads += put_heads
                index += nr
        finally:
            stats.model.compound_head += heads
            stats.erase_pages_written += written
            stats.erase_pages_skipped += skipped


def make_reference_block2mtd(*, size: int, erasesize: int, folio_order: int,
                             api: str = "folio", retry: bool = True,
                             read_only: bool = False, torn: str = "prefix") -> Block2MTD:
    """The bundled reference device: block2mtd on an in-memory block device whose logical
    block size is the folio size, so its page cache holds folios of ``folio_order``
    (``read_only``: on a read-only block device, so without MTD_WRITEABLE)."""
    bdev = BlockDevice(size, logical_block_size=PAGE_SIZE << folio_order,
                       name=f"ram-{PAGE_SIZE << folio_order >> 10}k", read_only=read_only)
    return Block2MTD(bdev, erasesize, api=api, retry=retry, torn=torn)
