"""Readahead with growing folio order (mm/readahead.c).

A read that misses the cache reads ahead a window of pages; while reads stay sequential
each round doubles the window and raises the folio order by two
(``page_cache_ra_order``), up to the mapping's maximum and the window's size, aligned,
never past i_size: 4K reads grow 16K, 64K, 256K, 1M, 2M folios.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pytest_folio.model.constants import MAX_PAGECACHE_ORDER, PAGE_SHIFT
from pytest_folio.model.folio import Folio, folio_next_index
from pytest_folio.sizes import ffs0

if TYPE_CHECKING:
    from pytest_folio.model.filemap import AddressSpace


@dataclasses.dataclass(slots=True)
class FileRaState:
    """``struct file_ra_state``: where the last round ended, its size and order."""

    next: int = -1                             # first page after the last round
    size: int = 0                              # the last round's window, in pages
    order: int = 0                             # the last round's folio order
    ra_pages: int = 1 << MAX_PAGECACHE_ORDER   # largest window, in pages


def page_cache_ra_order(mapping: AddressSpace, index: int, nr_pages: int,
                        new_order: int = 0) -> int:
    """Read ahead ``nr_pages`` from ``index`` in folios of ``new_order`` + 2 (capped by
    the maximum order and the window, at least the minimum), aligned, the window's end
    rounded up to that order, never past i_size, skipping cached folios. Returns the
    order used, for the next round."""
    min_order = mapping.mapping_min_folio_order()
    max_order = mapping.mapping_max_folio_order()
    if new_order < max_order:
        new_order += 2
    new_order = min(new_order, max_order, max(nr_pages, 1).bit_length() - 1)
    new_order = max(new_order, min_order)
    index &= ~((1 << min_order) - 1)
    # End the window on a boundary of the new order, so the next round starts aligned
    # and can use its larger order from its first folio.
    limit = ((index + nr_pages - 1) | ((1 << new_order) - 1))
    if mapping.i_size is not None:
        limit = min(limit, (mapping.i_size - 1) >> PAGE_SHIFT)
    while index <= limit:
        cached = mapping.xa_load(index)
        if cached is not None:
            index = folio_next_index(cached)
            continue
        order = new_order
        if index & ((1 << order) - 1):
            order = ffs0(index)
        while order > min_order and index + (1 << order) - 1 > limit:
            order -= 1
        folio = mapping.filemap_create_folio(index, order, readahead=True)
        if folio is None:
            break
        mapping.filemap_read_folio(folio)
        mapping.stats.readahead += 1
        index = folio_next_index(folio)
    mapping.ra.next = index
    return new_order


def page_cache_sync_ra(mapping: AddressSpace, index: int, last: int) -> Folio:
    """A read missing page ``index`` (reading up to page ``last``): grow the window and
    the order while reads stay sequential, read ahead, and return the folio holding
    ``index`` (created at the minimum order if readahead ran out of memory)."""
    ra = mapping.ra
    wanted = last - index + 1
    if index == ra.next:
        size = min(max(ra.size * 2, wanted), ra.ra_pages)
        order = ra.order
    else:
        size = min(max(wanted, 4), ra.ra_pages)
        order = 0
    ra.order = page_cache_ra_order(mapping, index, size, order)
    ra.size = size
    folio = mapping.xa_load(index)
    while folio is None:                       # readahead ran out of memory
        folio = mapping.filemap_create_folio(index, mapping.mapping_min_folio_order())
        if folio is None:
            mapping.stats.retries += 1
            folio = mapping.xa_load(index)
            continue
        mapping.filemap_read_folio(folio)
    return folio
