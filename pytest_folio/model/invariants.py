"""Checks that a mapping (and the memory under it) obeys the page cache's rules.

Property tests call these after every step; a failure names the rule and the folio, so
a shrunk Hypothesis example points straight at the broken invariant.
"""

from __future__ import annotations

import itertools

from pytest_folio.model.constants import MAX_PAGECACHE_ORDER, PAGE_SHIFT
from pytest_folio.model.filemap import AddressSpace
from pytest_folio.model.memory import PhysicalMemory


class InvariantError(AssertionError):
    """A page-cache or allocator invariant does not hold."""


def check_mapping(mapping: AddressSpace) -> None:
    """Every folio: order within the mapping's range, index naturally aligned, owned by
    this mapping, data the size of the folio, a live allocation of its order, on the
    LRU; folios never overlap in the file nor share physical pages; nrpages adds up."""
    lo, hi = mapping.mapping_min_folio_order(), mapping.mapping_max_folio_order()
    memory = mapping.memory
    previous_end = -1
    total = 0
    frames: list[tuple[int, int]] = []
    for key, folio in sorted(mapping.i_pages.items()):
        where = f"folio at index {folio.index} (order {folio.order})"
        if key != folio.index:
            raise InvariantError(f"{where} is filed under index {key}")
        if not lo <= folio.order <= hi:
            raise InvariantError(f"{where}: order outside the mapping's range {lo}..{hi}")
        if folio.index % folio.nr_pages:
            raise InvariantError(f"{where}: index not naturally aligned")
        if folio.mapping is not mapping:
            raise InvariantError(f"{where}: folio.mapping is not this mapping")
        if folio.index < previous_end:
            raise InvariantError(f"{where} overlaps the folio before it (ends at page "
                                 f"{previous_end})")
        if folio.pos != folio.index << PAGE_SHIFT or len(folio.data) != folio.size:
            raise InvariantError(f"{where}: pos or data size does not match the folio")
        if folio.refcount < 1:
            raise InvariantError(f"{where}: cached without the cache's reference")
        if memory.allocated.get(folio.pfn) != folio.order:
            raise InvariantError(f"{where}: pfn {folio.pfn} is not an allocated "
                                 f"order-{folio.order} block")
        if folio not in memory.lru:
            raise InvariantError(f"{where} is not on the LRU")
        previous_end = folio.index + folio.nr_pages
        total += folio.nr_pages
        frames.append((folio.pfn, folio.nr_pages))
    if total != mapping.nrpages:
        raise InvariantError(f"nrpages is {mapping.nrpages} but the folios hold {total} pages")
    frames.sort()
    for (pfn, nr), (next_pfn, _) in itertools.pairwise(frames):
        if pfn + nr > next_pfn:
            raise InvariantError(f"physical pages {next_pfn}.. are shared by two folios")


def check_memory(memory: PhysicalMemory) -> None:
    """The buddy allocator: free blocks aligned, in range, disjoint from allocated blocks
    and fully merged (no two free buddies); free plus allocated pages make up memory."""
    blocks: list[tuple[int, int]] = []
    for order, free in enumerate(memory.free_area):
        for pfn in free:
            if pfn & ((1 << order) - 1) or pfn + (1 << order) > memory.nr_pages:
                raise InvariantError(f"free order-{order} block at pfn {pfn} is misplaced")
            if order < MAX_PAGECACHE_ORDER and pfn ^ (1 << order) in free:
                raise InvariantError(f"free order-{order} buddies at pfn {pfn} not merged")
            blocks.append((pfn, 1 << order))
    free_pages = sum(n for _, n in blocks)
    if free_pages != memory.nr_free:
        raise InvariantError(f"nr_free is {memory.nr_free} but the free lists hold {free_pages}")
    blocks.extend((pfn, 1 << order) for pfn, order in memory.allocated.items())
    blocks.sort()
    for (pfn, nr), (next_pfn, _) in itertools.pairwise(blocks):
        if pfn + nr > next_pfn:
            raise InvariantError(f"pfn {next_pfn} is in two blocks (free or allocated)")
    covered = sum(n for _, n in blocks)
    if covered != memory.nr_pages:
        raise InvariantError(f"free and allocated blocks cover {covered} of "
                             f"{memory.nr_pages} pages")
