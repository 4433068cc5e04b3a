"""Taking folios out of the page cache by range (mm/truncate.c).

- truncate (:func:`truncate_inode_pages_range`): whole folios in the range go; a partially
  covered folio is zeroed in the range and, if large, split to the minimum order (never
  below) so the covered pieces can go; a folio that cannot be split (already at the
  minimum order, or someone holds a reference) is kept if dirty and dropped if clean, as
  ``truncate_inode_partial_folio`` does.
- invalidate (:func:`invalidate_mapping_pages`) drops only clean, unlocked folios not
  under writeback that lie wholly inside the range. Unlike the kernel it ignores extra
  references, so the drop-between-lookup-and-lock race of block2mtd can be reproduced;
  the folio's memory still lives until the holder's ``folio_put``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_folio.model.constants import PAGE_SHIFT
from pytest_folio.model.folio import (
    Folio,
    FolioDeadlock,
    folio_next_index,
    folio_put,
    folio_test_dirty,
    folio_test_large,
    folio_test_locked,
    folio_test_writeback,
    folio_zero_range,
)
from pytest_folio.model.huge_memory import split_folio

if TYPE_CHECKING:
    from pytest_folio.model.filemap import AddressSpace

_NO_END = (1 << 63) - 1


def truncate_inode_folio(mapping: AddressSpace, folio: Folio) -> None:
    """Remove one of the mapping's folios, dropping its dirty data (folio_cancel_dirty)
    and the cache's reference (filemap_remove_folio, without its check: the callers
    found the folio in the mapping)."""
    folio.dirty = False
    mapping.page_cache_delete(folio)
    folio_put(folio)
    mapping.stats.truncated += 1


def truncate_inode_pages_range(mapping: AddressSpace, lstart: int, lend: int = -1) -> None:
    """Remove the cached bytes [lstart, lend] (lend inclusive, -1: to the end), as
    truncate and punch hole do (see the module docstring for partial folios)."""
    if lend < 0:
        lend = _NO_END
    if lend < lstart:
        return
    for folio in mapping.filemap_get_folios(lstart >> PAGE_SHIFT, lend >> PAGE_SHIFT):
        if folio.locked:                                     # a hot loop: the fields
            raise FolioDeadlock(f"truncate of folio at index {folio.index}, which the "
                                "caller holds locked")
        start = folio.pos
        end = start + folio.size - 1
        if lstart <= start and end <= lend:
            truncate_inode_folio(mapping, folio)
            continue
        zfrom = max(lstart, start)
        folio_zero_range(folio, zfrom - start, min(lend, end) - zfrom + 1)
        if not folio_test_large(folio):
            continue
        if split_folio(folio):
            for piece in mapping.filemap_get_folios(start >> PAGE_SHIFT, end >> PAGE_SHIFT):
                if lstart <= piece.pos and piece.pos + piece.size - 1 <= lend:
                    truncate_inode_folio(mapping, piece)
        elif not folio_test_dirty(folio):
            truncate_inode_folio(mapping, folio)


def truncate_inode_pages(mapping: AddressSpace, lstart: int) -> None:
    truncate_inode_pages_range(mapping, lstart, -1)


def invalidate_mapping_pages(mapping: AddressSpace, start: int = 0, end: int = -1) -> int:
    """Drop clean, unlocked folios not under writeback that lie wholly in pages
    [start, end] (end -1: to the end). Returns how many were dropped."""
    last = _NO_END if end < 0 else end
    dropped = 0
    for folio in mapping.filemap_get_folios(start, last):
        if (folio.index < start or folio_next_index(folio) - 1 > last
                or folio_test_dirty(folio) or folio_test_locked(folio)
                or folio_test_writeback(folio)):
            continue
        mapping.filemap_remove_folio(folio)
        dropped += 1
    mapping.stats.invalidated += dropped
    return dropped
