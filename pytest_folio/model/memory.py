"""Physical memory: one buffer under a buddy allocator.

The buffer is an anonymous ``mmap`` so untouched memory costs no RSS, and every folio's
data is a ``memoryview`` slice of it: copies in and out of the page cache are single
``memcpy`` calls and two folios can never silently share storage without the allocator
knowing. The allocator keeps one free list per order (0..MAX_PAGECACHE_ORDER), splits a
larger block on allocation and merges freed buddies, as mm/page_alloc.c does, so
fragmentation behaves like the kernel's: high orders run out first.
"""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING

from pytest_folio.model.constants import MAX_PAGECACHE_ORDER, PAGE_SHIFT, PAGE_SIZE
from pytest_folio.model.stats import Stats
from pytest_folio.sizes import format_size

if TYPE_CHECKING:
    from pytest_folio.model.folio import Folio


# An anonymous mmap is shared memory (MAP_SHARED): MADV_DONTNEED would only unmap its
# pages, MADV_REMOVE frees them (Linux); elsewhere DONTNEED is the best there is.
_DISCARD = getattr(mmap, "MADV_REMOVE", getattr(mmap, "MADV_DONTNEED", None))


def discard_pages(mm: mmap.mmap) -> None:
    """Free the pages of an anonymous mapping now; it reads as zeroes afterwards."""
    if _DISCARD is not None:
        mm.madvise(_DISCARD)


class PhysicalMemory:
    """``size`` bytes of page frames handed out in naturally aligned blocks of 2**order pages.

    ``lru`` is the memory's LRU list of page-cache folios (oldest first, shared by every
    mapping on this memory) that reclaim walks when an allocation at a mapping's minimum
    order finds no free block.
    """

    def __init__(self, size: int, stats: Stats | None = None) -> None:
        if not isinstance(size, int) or size < PAGE_SIZE or size % PAGE_SIZE:
            raise ValueError(
                f"physical memory size {size!r} must be a positive multiple of the page "
                f"size ({PAGE_SIZE})")
        try:
            self._mm = mmap.mmap(-1, size)
        except (OSError, OverflowError) as exc:
            raise ValueError(
                f"cannot reserve {format_size(size)} of physical memory for the model: "
                f"{exc}") from None
        self._mv = memoryview(self._mm)
        self.size = size
        self.nr_pages = size >> PAGE_SHIFT
        self.stats = stats if stats is not None else Stats()
        # free_area[order]: start pfns of free blocks of 2**order pages
        self.free_area: list[set[int]] = [set() for _ in range(MAX_PAGECACHE_ORDER + 1)]
        self.allocated: dict[int, int] = {}     # start pfn -> order of every handed-out block
        self.nr_free = 0
        self.pinned: list[int] = []             # order-0 pages held by fragment()
        self.lru: dict[Folio, None] = {}        # insertion-ordered: oldest first
        self._carve(0, self.nr_pages)

    def _carve(self, pfn: int, end: int) -> None:
        """Put [pfn, end) on the free lists as the largest naturally aligned blocks."""
        while pfn < end:
            order = MAX_PAGECACHE_ORDER
            while order and (pfn & ((1 << order) - 1) or pfn + (1 << order) > end):
                order -= 1
            self.free_area[order].add(pfn)
            self.nr_free += 1 << order
            pfn += 1 << order

    def alloc_pages(self, order: int) -> int | None:
        """A free block of 2**order pages (its first pfn), or None when none is left.

        Never reclaims: the page cache decides when reclaim is worth it.
        """
        free_area = self.free_area
        if free_area[order]:                   # the usual case: no block to split
            pfn = free_area[order].pop()
            current = order
        else:
            for current in range(order + 1, MAX_PAGECACHE_ORDER + 1):
                if free_area[current]:
                    pfn = free_area[current].pop()
                    break
            else:
                return None
        while current > order:             # split: keep the low half, free the high half
            current -= 1
            free_area[current].add(pfn + (1 << current))
        self.allocated[pfn] = order
        self.nr_free -= 1 << order
        self.stats.allocations[order] += 1
        return pfn

    def free_pages(self, pfn: int, order: int) -> None:
        """Return a block from :meth:`alloc_pages`, merging it with free buddies."""
        allocated = self.allocated.pop(pfn, None)
        if allocated != order:
            if allocated is not None:
                self.allocated[pfn] = allocated
            raise ValueError(f"free_pages({pfn}, {order}): not an allocated order-{order} block")
        self.nr_free += 1 << order
        free_area = self.free_area
        while order < MAX_PAGECACHE_ORDER:
            buddy = pfn ^ (1 << order)
            if buddy not in free_area[order]:
                break
            free_area[order].remove(buddy)
            pfn &= ~(1 << order)
            order += 1
        free_area[order].add(pfn)

    def split_pages(self, pfn: int, order: int, new_order: int) -> None:
        """Turn one allocated block into 2**(order-new_order) blocks (a folio split)."""
        if self.allocated.get(pfn) != order or not 0 <= new_order <= order:
            raise ValueError(f"split_pages({pfn}, {order}, {new_order}): not a block to split")
        for sub in range(pfn, pfn + (1 << order), 1 << new_order):
            self.allocated[sub] = new_order

    def release(self) -> None:
        """Hand every page of the buffer back to the operating system now; it reads as
        zeroes afterwards. For the owner of a finished model: mappings and their folios
        refer to each other, so without this the buffer lives until Python's cycle
        collector runs, which can be many tests later."""
        discard_pages(self._mm)

    @property
    def buffer(self) -> memoryview:
        """All of physical memory (for tools that compare against raw copies of it)."""
        return self._mv

    def page_view(self, pfn: int, order: int) -> memoryview:
        """The bytes of a block: a view into the one buffer, never a copy."""
        return self._mv[pfn << PAGE_SHIFT:(pfn + (1 << order)) << PAGE_SHIFT]

    def free_area_counts(self) -> list[int]:
        """Free blocks per order, like /proc/buddyinfo."""
        return [len(blocks) for blocks in self.free_area]

    def largest_free_order(self) -> int:
        """The highest order that can be allocated right now (-1 when memory is full)."""
        for order in range(MAX_PAGECACHE_ORDER, -1, -1):
            if self.free_area[order]:
                return order
        return -1

    def fragment(self, fraction: float = 1.0, order: int = 1) -> int:
        """Pin one order-0 page inside ``fraction`` of the free aligned blocks of 2**order
        pages, so allocations of ``order`` and above become scarce (none at 1.0) while
        smaller ones still succeed. The chosen blocks are evenly spread and the choice is
        deterministic. Pinned pages cost 1/2**order of the affected memory; returns how
        many were pinned. :meth:`unfragment` gives them back.
        """
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fragment fraction {fraction} must be between 0 and 1")
        if not 1 <= order <= MAX_PAGECACHE_ORDER:
            raise ValueError(f"fragment order {order} must be 1..{MAX_PAGECACHE_ORDER}")
        # Every free aligned block of 2**order pages lies inside one free buddy block.
        starts = sorted(
            sub for current in range(order, MAX_PAGECACHE_ORDER + 1)
            for pfn in self.free_area[current]
            for sub in range(pfn, pfn + (1 << current), 1 << order))
        chosen = [start for i, start in enumerate(starts)
                  if int((i + 1) * fraction) != int(i * fraction)]
        for start in chosen:
            # the first page of the upper half: the lower half stays usable at order-1
            self._take_page(start + (1 << (order - 1)))
        return len(chosen)

    def unfragment(self) -> None:
        """Free every page pinned by :meth:`fragment`."""
        for pfn in self.pinned:
            self.free_pages(pfn, 0)
        self.pinned.clear()

    def _take_page(self, pfn: int) -> None:
        """Allocate one specific free page (splitting the free block around it)."""
        for current in range(MAX_PAGECACHE_ORDER + 1):
            base = pfn & ~((1 << current) - 1)
            if base in self.free_area[current]:
                break
        else:
            raise ValueError(f"page {pfn} is not free")
        self.free_area[current].remove(base)
        while current:
            current -= 1
            half = 1 << current
            if pfn >= base + half:
                self.free_area[current].add(base)
                base += half
            else:
                self.free_area[current].add(base + half)
        self.allocated[pfn] = 0
        self.nr_free -= 1
        self.pinned.append(pfn)

    def __repr__(self) -> str:
        return (f"<PhysicalMemory {format_size(self.size)}, "
                f"{format_size(self.nr_free << PAGE_SHIFT)} free>")
