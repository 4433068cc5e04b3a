"""Splitting a large folio into smaller ones (mm/huge_memory.c).

Truncate and punch hole split a partially covered large folio so the covered pieces can
go; the pieces are folios of their own over the same pages, with the original's flags.
"""

from __future__ import annotations

from pytest_folio.model.folio import Folio


def split_folio_to_order(folio: Folio, new_order: int) -> bool:
    """Split a cached folio into folios of ``new_order``; False when it cannot be split:
    already at that order, or someone else holds a reference (the kernel cannot freeze
    the refcount). A locked folio's lock stays with its first piece only."""
    mapping = folio.mapping
    if mapping is None:
        raise ValueError("folio is not in a page cache")
    if new_order < mapping.mapping_min_folio_order():
        raise ValueError(f"cannot split below the mapping's minimum order "
                         f"{mapping.mapping_min_folio_order()}")
    if new_order >= folio.order or folio.refcount != 1:
        return False
    memory = folio.memory
    memory.split_pages(folio.pfn, folio.order, new_order)
    mapping.page_cache_delete(folio)
    folio.refcount = 0
    for k in range(0, folio.nr_pages, 1 << new_order):
        piece = Folio(memory, folio.pfn + k, new_order)
        piece.uptodate = folio.uptodate
        piece.dirty = folio.dirty
        piece.locked = folio.locked and k == 0
        piece.referenced = folio.referenced
        mapping.page_cache_insert(piece, folio.index + k)
    mapping.stats.splits += 1
    return True


def split_folio(folio: Folio) -> bool:
    """Split to the mapping's minimum order (never below it)."""
    if folio.mapping is None:
        raise ValueError("folio is not in a page cache")
    return split_folio_to_order(folio, folio.mapping.mapping_min_folio_order())
