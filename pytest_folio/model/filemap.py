"""The page cache of one file or block device, with mm/filemap.c's rules.

Folios are kept in a dict keyed by their first page index. Every folio is naturally
aligned and at least the mapping's minimum order, so the folio holding page ``index``
can only start at ``index`` rounded down to some order between the minimum and the
largest order present: a lookup is at most a handful of dict probes and never walks
pages. The hot paths (``filemap_read``, ``generic_perform_write``) touch each folio
once and copy with one memoryview slice assignment per folio.

Kernel rules modelled here (mm/filemap.c); the rest lives where the kernel keeps it:
:mod:`.pagemap` (fgf_t flags, the folio order range), :mod:`.page_writeback`,
:mod:`.truncate`, :mod:`.readahead`, :mod:`.vmscan`, :mod:`.huge_memory` (free functions
taking the mapping or the folio, bound as methods too). What those modules share of
AddressSpace, and callers do not need, is its internal interface: named once, in the
class's docstring (the kernel keeps the same kind of list in mm/internal.h).

- creation (``__filemap_get_folio`` with FGP_CREAT): the index is aligned down to the
  minimum order (``mapping_align_index``), the order is clamped to the maximum and
  lowered to the index's alignment (``__ffs(index)``), then each failed allocation or
  insertion above the minimum order retries one order lower; at the minimum order clean
  folios are reclaimed before ENOMEM; EEXIST repeats the lookup.
- ``filemap_add_folio`` refuses a folio that overlaps a cached one with EEXIST.
"""

from __future__ import annotations

import bisect
import errno
from collections.abc import Iterator
from typing import Protocol, cast

from pytest_folio.model.constants import PAGE_SHIFT, PAGE_SIZE
from pytest_folio.model.folio import (
    Folio,
    FolioDeadlock,
    folio_get,
    folio_lock,
    folio_put,
    folio_trylock,
    folio_zero_range,
)
from pytest_folio.model.huge_memory import split_folio_to_order
from pytest_folio.model.memory import PhysicalMemory
from pytest_folio.model.page_writeback import do_writepages, folio_mark_dirty
from pytest_folio.model.pagemap import (
    FGP_CREAT,
    FGP_FOR_MMAP,
    FGP_LOCK,
    FGP_NOWAIT,
    fgf_set_order,
    mapping_align_index,
    mapping_max_folio_order,
    mapping_min_folio_nrpages,
    mapping_min_folio_order,
    mapping_set_folio_min_order,
    mapping_set_folio_order_range,
    mapping_set_large_folios,
)
from pytest_folio.model.readahead import FileRaState, page_cache_ra_order, page_cache_sync_ra
from pytest_folio.model.stats import Stats
from pytest_folio.model.truncate import (
    invalidate_mapping_pages,
    truncate_inode_pages,
    truncate_inode_pages_range,
)
from pytest_folio.model.vmscan import try_to_free_pages
from pytest_folio.sizes import ffs0, format_size

_BATCH_MIN = 4                # folios from which filemap_read gathers a batch


class AddressSpaceOperations(Protocol):
    """What a backing store provides (``struct address_space_operations``).

    ``read_folio(folio)`` fills ``folio.data`` (the model marks it uptodate afterwards).
    ``writepage(folio)`` (optional) stores ``folio.data``; without it dirty folios stay
    dirty, as ramfs's do.
    """

    def read_folio(self, folio: Folio) -> None: ...


class AddressSpace:
    """``struct address_space``: the folios caching one file or block device.

    ``i_size`` (bytes, or None for "no limit") bounds readahead, as the inode size does
    in the kernel; the owner (block device, file system) keeps it current.
    ``unevictable`` keeps reclaim away (ramfs's ``mapping_set_unevictable``).

    The internal interface, for the model's own modules (pagemap, truncate, readahead,
    page_writeback, huge_memory, invariants, ramfs, block2mtd), not for callers: no
    references are taken or dropped and no order or overlap is checked, so each caller
    keeps the kernel's rules itself.

    - ``i_pages``: the folios by first page index (the kernel's xarray); read it, and
      change it only through the calls below;
    - ``min_order``, ``max_order``, ``min_index_mask`` (``~(min nrpages - 1)``): the
      order range (the kernel's AS_FOLIO_ORDER bits of ``mapping->flags``), set only by
      ``mapping_set_folio_order_range``; ``top_order``: the highest order ever cached,
      which bounds a lookup;
    - ``xa_load(index)``: the folio holding page ``index``, as xa_load finds a
      multi-index entry;
    - ``filemap_get_folios(first, last)``: the folios overlapping pages [first, last], in
      index order;
    - ``page_cache_insert(folio, index)`` / ``page_cache_delete(folio)``: into and out of
      ``i_pages``, ``nrpages`` and the LRU (__filemap_add_folio with folio_add_lru, and
      page_cache_delete); ``page_cache_move(folios, delta)``: shift cached folios (ramfs's
      collapse and insert range);
    - ``filemap_create_folio(index, order, readahead=)``: allocate and insert a folio
      with ``__filemap_get_folio``'s alignment and fallback rules;
    - ``filemap_read_folio(folio)``: ``a_ops.read_folio`` with the folio locked.
    """

    def __init__(self, memory: PhysicalMemory, a_ops: AddressSpaceOperations | None = None,
                 stats: Stats | None = None) -> None:
        self.memory = memory
        self.a_ops = a_ops
        self.stats = stats if stats is not None else memory.stats
        self.i_size: int | None = None
        self.unevictable = False
        self.nrpages = 0
        self.ra = FileRaState()                     # the readahead window (one reader)
        self.i_pages: dict[int, Folio] = {}
        self._sorted: list[int] | None = []
        self.min_order = 0
        self.min_index_mask = -1
        self.max_order = 0
        self.top_order = 0

    # include/linux/pagemap.h's order range, as methods too
    mapping_set_folio_order_range = mapping_set_folio_order_range
    mapping_set_folio_min_order = mapping_set_folio_min_order
    mapping_set_large_folios = mapping_set_large_folios
    mapping_min_folio_order = mapping_min_folio_order
    mapping_max_folio_order = mapping_max_folio_order
    mapping_min_folio_nrpages = mapping_min_folio_nrpages
    mapping_align_index = mapping_align_index

    def xa_load(self, index: int) -> Folio | None:
        """The cached folio holding page ``index`` (no reference, no counting).

        The first probe, at ``index`` aligned to the minimum order, finds every folio of
        the minimum order, head page or not, so a lookup costs the same for any page of
        a folio, as an xarray walk does."""
        folios = self.i_pages
        folio = folios.get(index & self.min_index_mask)
        if folio is not None:
            return folio                  # it starts at or below index and spans it
        for order in range(self.min_order + 1, self.top_order + 1):
            folio = folios.get(index & ~((1 << order) - 1))
            if folio is not None:
                # a folio starting there either holds index or proves nothing does
                return folio if folio.order >= order else None
        return None

    def folios(self) -> list[Folio]:
        """Every cached folio, in index order."""
        return [self.i_pages[i] for i in self._sorted_indices()]

    def _sorted_indices(self) -> list[int]:
        if self._sorted is None:
            self._sorted = sorted(self.i_pages)
        return self._sorted

    def filemap_get_folios(self, first: int, last: int) -> list[Folio]:
        """Folios overlapping pages [first, last], in index order."""
        keys = self._sorted_indices()
        i = max(bisect.bisect_right(keys, first) - 1, 0)
        found = []
        for key in keys[i:]:
            if key > last:
                break
            folio = self.i_pages[key]
            if key + folio.nr_pages > first:
                found.append(folio)
        return found

    def filemap_get_folio(self, index: int) -> Folio | None:
        """The folio holding ``index`` with a reference taken, or None."""
        return self.filemap_get_folio_flags(index, 0)

    def filemap_get_folio_flags(self, index: int, fgp_flags: int = 0,
                                order: int = 0) -> Folio | None:
        """``__filemap_get_folio``: look up, and with FGP_CREAT create a folio of up to
        ``order`` following the kernel's alignment and fallback rules. A created folio
        comes back locked (FGP_CREAT implies FGP_LOCK unless FGP_FOR_MMAP). The caller
        owns one reference (``folio_put``). Without FGP_CREAT a miss returns None."""
        while True:
            self.stats.folio_lookups += 1
            folio = self.xa_load(index)
            if folio is not None:
                if fgp_flags & FGP_LOCK and not folio_trylock(folio):
                    if fgp_flags & FGP_NOWAIT:
                        raise OSError(errno.EAGAIN, "folio is locked (FGP_NOWAIT)")
                    raise FolioDeadlock(f"folio at index {folio.index} is already locked")
                folio.referenced = True
                folio.refcount += 1
                return folio
            if not fgp_flags & FGP_CREAT:
                return None
            folio = self.filemap_create_folio(index, order)
            if folio is None:                      # EEXIST: someone filled the gap
                self.stats.retries += 1
                continue
            if not fgp_flags & FGP_FOR_MMAP:
                folio_lock(folio)
            folio_get(folio)
            return folio

    def filemap_alloc_folio(self, order: int) -> Folio | None:
        """A new folio (not in any mapping) or None if no block of that order is free."""
        pfn = self.memory.alloc_pages(order)
        return None if pfn is None else Folio(self.memory, pfn, order)

    def _overlaps(self, index: int, nr_pages: int) -> bool:
        return self.xa_load(index) is not None or self._holds_smaller(index, nr_pages)

    def _holds_smaller(self, index: int, nr_pages: int) -> bool:
        """A folio smaller than [index, index + nr_pages) starts inside it (what can
        overlap the range once a lookup of ``index`` missed)."""
        step = 1 << self.min_order
        folios = self.i_pages
        return any(map(folios.__contains__, range(index + step, index + nr_pages, step)))

    def page_cache_insert(self, folio: Folio, index: int) -> None:
        folio.index = index
        folio.pos = index << PAGE_SHIFT
        folio.mapping = self
        self.i_pages[index] = folio
        self._sorted = None
        self.nrpages += folio.nr_pages
        if folio.order > self.top_order:
            self.top_order = folio.order
        self.memory.lru[folio] = None

    def page_cache_delete(self, folio: Folio) -> None:
        """Take a folio out of the index and the LRU (its references are the caller's)."""
        del self.i_pages[folio.index]
        self._sorted = None
        self.nrpages -= folio.nr_pages
        del self.memory.lru[folio]
        folio.mapping = None

    def page_cache_move(self, folios: list[Folio], delta: int) -> None:
        """Give cached folios the index ``index + delta`` (collapse and insert range
        shifting extents), in one pass: as :meth:`page_cache_delete` then
        :meth:`page_cache_insert` of each in the order given, which is the order they
        rejoin the LRU in. The caller sees to it that none lands on a folio that is not
        moving."""
        cached = self.i_pages
        lru = self.memory.lru
        for folio in folios:
            del cached[folio.index]
        for folio in folios:
            folio.index = index = folio.index + delta
            folio.pos = index << PAGE_SHIFT
            cached[index] = folio
            del lru[folio]
            lru[folio] = None
        self._sorted = None

    def filemap_add_folio(self, folio: Folio, index: int) -> None:
        """Insert a folio from :meth:`filemap_alloc_folio` at ``index``. It comes back
        locked with the cache's reference added; the caller still owns its own."""
        if not self.min_order <= folio.order <= self.max_order:
            raise ValueError(f"order-{folio.order} folio outside the mapping's order range "
                             f"{self.min_order}..{self.max_order}")
        if index & (folio.nr_pages - 1):
            raise ValueError(f"index {index} is not aligned to an order-{folio.order} folio")
        if folio.mapping is not None:
            raise ValueError("folio is already in a page cache")
        if self._overlaps(index, folio.nr_pages):
            raise OSError(errno.EEXIST, f"pages {index}..{index + folio.nr_pages - 1} "
                          "overlap a cached folio")
        folio_lock(folio)
        folio_get(folio)
        self.page_cache_insert(folio, index)

    def filemap_create_folio(self, index: int, order: int, *,
                             readahead: bool = False) -> Folio | None:
        """Allocate and insert a folio for ``index``, which a lookup just missed
        (unlocked, holding only the cache's reference). None means EEXIST at the minimum
        order: look up again. Readahead never reclaims; it returns None when memory runs
        out."""
        min_order = self.min_order
        index &= self.min_index_mask
        if order <= min_order:
            order = min_order
        else:
            if order > self.max_order:
                order = self.max_order
            if index & ((1 << order) - 1):
                order = ffs0(index)
        memory = self.memory
        while True:
            pfn = memory.alloc_pages(order)
            if pfn is None and order == min_order and not readahead:
                pfn = try_to_free_pages(memory, order, self.stats)
            if pfn is not None:
                # after the miss, only a smaller folio inside the range can overlap
                if order == min_order or not self._holds_smaller(index, 1 << order):
                    folio = Folio(memory, pfn, order)
                    self.page_cache_insert(folio, index)
                    return folio
                memory.free_pages(pfn, order)
                err = errno.EEXIST
            else:
                err = errno.ENOMEM
            if order <= min_order:
                break
            if err == errno.ENOMEM:
                self.stats.alloc_fallbacks += 1
            order -= 1
        if err == errno.EEXIST or readahead:
            return None
        self.stats.enomem += 1
        raise OSError(errno.ENOMEM, (
            f"out of memory: no free order-{min_order} block "
            f"({format_size(PAGE_SIZE << min_order)}) in {format_size(memory.size)} of "
            "physical memory, even after reclaiming every clean folio"))

    def _read_folio(self, folio: Folio) -> None:
        read_folio = getattr(self.a_ops, "read_folio", None)
        if read_folio is None:
            folio_zero_range(folio, 0, folio.size)
        else:
            read_folio(folio)
        folio.uptodate = True                      # folio_mark_uptodate
        self.stats.read_folio += 1

    def filemap_read_folio(self, folio: Folio) -> None:
        """read_folio with the folio locked, as the kernel's filemap_read_folio runs it
        (every caller's folio is unlocked: just created, or checked; so the flag,
        inline)."""
        folio.locked = True                        # folio_lock
        try:
            self._read_folio(folio)
        finally:
            folio.locked = False                   # folio_unlock

    def read_mapping_folio(self, index: int) -> Folio:
        """An uptodate folio holding ``index``, read through ``a_ops.read_folio`` if
        needed (at the minimum order, as do_read_cache_folio does). Unlocked; the caller
        owns one reference."""
        folio = self.i_pages.get(index & self.min_index_mask)
        if folio is not None and folio.uptodate:
            # the usual case, inline (a call costs more than the copy that follows):
            # xa_load's first probe, then filemap_get_folio's accounting and reference
            self.stats.folio_lookups += 1
            folio.referenced = True
            folio.refcount += 1
            return folio
        # with no folio above the minimum order cached, that probe was the whole lookup
        probed = folio is None and self.top_order == self.min_order
        while True:
            if probed:                 # filemap_get_folio's count, of the lookup above
                self.stats.folio_lookups += 1
                probed = False
            else:
                folio = self.filemap_get_folio(index)
            if folio is None:
                folio = self.filemap_create_folio(index, self.min_order)
                if folio is None:
                    self.stats.retries += 1
                    continue
                folio.refcount += 1
                self.filemap_read_folio(folio)
                return folio
            if not folio.uptodate:
                if folio.locked:
                    folio_put(folio)
                    raise FolioDeadlock(f"folio at index {folio.index} is locked and not "
                                        "uptodate")
                self.filemap_read_folio(folio)
            return folio

    # dirtying and writeback (mm/page-writeback.c)

    folio_mark_dirty = staticmethod(folio_mark_dirty)

    def filemap_write_and_wait(self) -> None:
        self.filemap_write_and_wait_range(0, -1)

    def filemap_write_and_wait_range(self, lstart: int, lend: int) -> None:
        """Write back every dirty folio overlapping bytes [lstart, lend] (lend -1: to the
        end) through ``a_ops.writepage`` (:func:`page_writeback.do_writepages`)."""
        do_writepages(self, lstart, lend)

    def filemap_remove_folio(self, folio: Folio) -> None:
        """Take a folio out of the cache and drop the cache's reference."""
        if folio.mapping is not self:
            raise ValueError("folio is not in this mapping")
        self.page_cache_delete(folio)
        folio_put(folio)

    def split_folio(self, folio: Folio, new_order: int | None = None) -> bool:
        """Split one of this mapping's folios to ``new_order`` (default: the minimum
        order); see :func:`huge_memory.split_folio_to_order`."""
        if folio.mapping is not self:
            raise ValueError("folio is not in this mapping")
        return split_folio_to_order(folio, self.min_order if new_order is None else new_order)

    # mm/truncate.c's entry points, as methods too (the functions take the mapping first)
    truncate_inode_pages_range = truncate_inode_pages_range
    truncate_inode_pages = truncate_inode_pages
    invalidate_mapping_pages = invalidate_mapping_pages

    page_cache_ra_order = page_cache_ra_order      # mm/readahead.c, as a method too

    def filemap_read(self, pos: int, length: int) -> bytes:
        """``length`` bytes at ``pos`` through the cache; misses are read ahead with
        growing folio order. The caller clamps to its file size.

        The usual cases take no loop over folios in Python but one that marks them
        accessed: the whole read inside one cached folio, or, over four or more folios,
        every page cached and uptodate in folios of the minimum order, gathered as one
        batch (as filemap_get_read_batch fills a folio_batch) whose lookups and copy run
        in C."""
        if pos < 0:
            raise OSError(errno.EINVAL, f"filemap_read at negative position {pos}")
        if length <= 0:
            return b""
        end = pos + length
        folios = self.i_pages
        folio = folios.get(pos >> PAGE_SHIFT & self.min_index_mask)
        if folio is not None and folio.uptodate:
            boundary = folio.pos + folio.size
            if end <= boundary:
                folio.referenced = True        # all in one folio: no batch to gather
                stats = self.stats
                stats.folio_lookups += 1
                stats.bytes_copied += length
                offset = pos - folio.pos
                return bytes(folio.data[offset:offset + length])
            # across into the next folio only (large folios): two, gathered at once
            after = folios.get(folio.index + folio.nr_pages)
            if after is not None and after.uptodate and end <= boundary + after.size:
                folio.referenced = after.referenced = True
                stats = self.stats
                stats.folio_lookups += 2
                stats.bytes_copied += length
                return b"".join((folio.data[pos - folio.pos:], after.data[:end - boundary]))
        if length >> PAGE_SHIFT >> self.min_order < _BATCH_MIN:
            return self._filemap_read_folios(pos, end)   # a few folios: a loop is cheaper
        # Folios starting at every minimum-order index of the range; a None (a page not
        # cached in a folio of the minimum order) fails the uptodate test below.
        batch = cast("list[Folio]", list(map(folios.get, range(
            pos >> PAGE_SHIFT & self.min_index_mask, ((end - 1) >> PAGE_SHIFT) + 1,
            1 << self.min_order))))
        # Marked accessed while checked: should one not be uptodate (or a None), the
        # loop below marks the ones before it again, on its way to it.
        try:
            for folio in batch:
                if not folio.uptodate:
                    return self._filemap_read_folios(pos, end)
                folio.referenced = True
        except AttributeError:
            return self._filemap_read_folios(pos, end)
        stats = self.stats
        stats.folio_lookups += len(batch)
        stats.bytes_copied += length
        views = [folio.data for folio in batch]
        last = batch[-1]
        if end != last.pos + last.size:                   # both ends may be partial
            views[-1] = views[-1][:end - last.pos]
        if pos != batch[0].pos:
            views[0] = views[0][pos - batch[0].pos:]
        return b"".join(views)

    def _filemap_read_folios(self, pos: int, end: int) -> bytes:
        """filemap_read folio by folio: misses, larger folios, folios not uptodate."""
        length = end - pos
        folios = self.i_pages
        chunks = []
        index = pos >> PAGE_SHIFT
        while pos < end:
            folio = folios.get(index)
            if folio is None:
                folio = self.xa_load(index)
                if folio is None:
                    folio = page_cache_sync_ra(self, index, (end - 1) >> PAGE_SHIFT)
            if not folio.uptodate:
                if folio.locked:
                    raise FolioDeadlock(f"read of folio at index {folio.index}, locked and "
                                        "not uptodate")
                self._read_folio(folio)
            offset = pos - folio.pos
            n = folio.size - offset
            if n > end - pos:
                n = end - pos
            chunks.append(folio.data[offset:offset + n] if n != folio.size else folio.data)
            folio.referenced = True
            pos += n
            index = folio.index + folio.nr_pages
        stats = self.stats
        stats.folio_lookups += len(chunks)
        stats.bytes_copied += length
        return bytes(chunks[0]) if len(chunks) == 1 else b"".join(chunks)

    def generic_perform_write(self, pos: int, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` into the cache at ``pos``, creating folios as needed (order from
        the write's length, like iomap's ``fgf_set_order``), reading a folio first when
        the write covers only part of a folio that is not uptodate. Marks folios dirty;
        the caller updates its file size. Returns the bytes written."""
        if pos < 0:
            raise OSError(errno.EINVAL, f"generic_perform_write at negative position {pos}")
        src = memoryview(data).cast("B")
        total = len(src)
        folios = self.i_pages
        mask = self.min_index_mask
        stats = self.stats
        done = 0
        while done < total:
            index = pos >> PAGE_SHIFT
            stats.folio_lookups += 1
            folio = folios.get(index & mask)       # xa_load's first probe, inline
            if folio is None:
                if self.top_order != self.min_order:    # else that probe was the lookup
                    folio = self.xa_load(index)
                while folio is None:
                    folio = self.filemap_create_folio(index, fgf_set_order(total - done))
                    if folio is None:
                        stats.retries += 1
                        folio = self.xa_load(index)
            if folio.locked:
                raise FolioDeadlock(f"write to folio at index {folio.index}, which the "
                                    "caller holds locked")
            offset = pos - folio.pos
            n = folio.size - offset
            if n > total - done:
                n = total - done
            if not folio.uptodate:
                if n != folio.size:
                    self._read_folio(folio)
                folio.uptodate = True
            folio.data[offset:offset + n] = src[done:done + n]
            folio.dirty = True
            folio.referenced = True
            pos += n
            done += n
        stats.bytes_copied += total
        return total

    def __iter__(self) -> Iterator[Folio]:
        return iter(self.folios())

    def __repr__(self) -> str:
        return (f"<AddressSpace orders {self.min_order}..{self.max_order}, "
                f"{len(self.i_pages)} folios, {self.nrpages} pages>")


# Kernel-style spellings: the methods above as functions taking the mapping first
read_mapping_folio = AddressSpace.read_mapping_folio
filemap_get_folio = AddressSpace.filemap_get_folio
