"""Reclaim (mm/vmscan.c): clean folios leave the LRU when an allocation would fail.

One LRU per :class:`~pytest_folio.model.memory.PhysicalMemory` holds every cached folio
of every mapping on it, oldest first; an allocation at a mapping's minimum order calls
:func:`try_to_free_pages` before it gives up with ENOMEM.
"""

from __future__ import annotations

from pytest_folio.model.folio import folio_test_dirty, folio_test_locked, folio_test_writeback
from pytest_folio.model.memory import PhysicalMemory
from pytest_folio.model.stats import Stats


def try_to_free_pages(memory: PhysicalMemory, order: int, stats: Stats) -> int | None:
    """Reclaim clean folios from the memory's LRU, oldest first, until a block of
    ``order`` can be allocated; returns it, or None when nothing more can be freed.

    A folio that was accessed since the last scan gets a second chance (moved to the
    young end, its referenced bit cleared), like the kernel's referenced-bit LRU. Dirty,
    locked, writeback, referenced-by-a-caller and unevictable folios are passed over.
    """
    lru = memory.lru
    budget = 2 * len(lru)
    while budget > 0 and lru:
        budget -= 1
        folio = next(iter(lru))
        mapping = folio.mapping
        if (folio_test_dirty(folio) or folio_test_locked(folio)
                or folio_test_writeback(folio) or folio.refcount != 1
                or mapping is None or mapping.unevictable):
            del lru[folio]
            lru[folio] = None
            continue
        if folio.referenced:
            folio.referenced = False
            del lru[folio]
            lru[folio] = None
            continue
        mapping.filemap_remove_folio(folio)
        stats.reclaims += 1
        pfn = memory.alloc_pages(order)
        if pfn is not None:
            return pfn
    return None
