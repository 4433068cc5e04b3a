"""What include/linux/pagemap.h defines: the fgf_t flags, ``fgf_set_order``, and a
mapping's folio order range.

The order-range helpers are free functions taking the mapping, as the kernel's inline
ones are; :class:`~pytest_folio.model.filemap.AddressSpace` binds them as methods too.

- ``mapping_set_folio_order_range``: orders clamped to MAX_PAGECACHE_ORDER; the model
  refuses max < min with ValueError where the kernel silently raises max.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_folio.model.constants import MAX_PAGECACHE_ORDER, PAGE_SHIFT, PAGE_SIZE
from pytest_folio.sizes import format_size

if TYPE_CHECKING:
    from pytest_folio.model.filemap import AddressSpace

# fgf_t bits
FGP_ACCESSED = 0x01
FGP_LOCK = 0x02
FGP_CREAT = 0x04
FGP_WRITE = 0x08
FGP_NOFS = 0x10
FGP_NOWAIT = 0x20
FGP_FOR_MMAP = 0x40
FGP_STABLE = 0x80
FGP_WRITEBEGIN = FGP_LOCK | FGP_WRITE | FGP_CREAT | FGP_STABLE


def fgf_set_order(size: int) -> int:
    """The folio order a write of ``size`` bytes asks for."""
    shift = size.bit_length() - 1 if size > 0 else 0
    return 0 if shift <= PAGE_SHIFT else shift - PAGE_SHIFT


def mapping_set_folio_order_range(mapping: AddressSpace, min_order: int,
                                  max_order: int) -> None:
    """Allow folios of ``min_order`` to ``max_order``; both clamped to
    MAX_PAGECACHE_ORDER as in the kernel. Set it before the mapping holds folios."""
    for name, value in (("minimum", min_order), ("maximum", max_order)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} folio order must be a whole number >= 0, "
                             f"not {value!r}")
    min_order = min(min_order, MAX_PAGECACHE_ORDER)
    max_order = min(max_order, MAX_PAGECACHE_ORDER)
    if max_order < min_order:
        raise ValueError(f"folio order range {min_order}..{max_order}: the maximum "
                         "order must not be below the minimum")
    if mapping.nrpages:
        raise ValueError("set the folio order range before the mapping holds folios")
    if mapping.memory.size < PAGE_SIZE << min_order:
        raise ValueError(
            f"physical memory of {format_size(mapping.memory.size)} is too small for "
            f"order-{min_order} folios: it needs at least "
            f"{format_size(PAGE_SIZE << min_order)}")
    mapping.min_order = min_order
    mapping.min_index_mask = ~((1 << min_order) - 1)
    mapping.max_order = max_order
    mapping.top_order = max(mapping.top_order, min_order)


def mapping_set_folio_min_order(mapping: AddressSpace, min_order: int) -> None:
    """Minimum order, any larger order allowed (what set_blocksize and LBS file systems
    use)."""
    mapping_set_folio_order_range(mapping, min_order, MAX_PAGECACHE_ORDER)


def mapping_set_large_folios(mapping: AddressSpace) -> None:
    mapping_set_folio_order_range(mapping, 0, MAX_PAGECACHE_ORDER)


def mapping_min_folio_order(mapping: AddressSpace) -> int:
    return mapping.min_order


def mapping_max_folio_order(mapping: AddressSpace) -> int:
    return mapping.max_order


def mapping_min_folio_nrpages(mapping: AddressSpace) -> int:
    return 1 << mapping.min_order


def mapping_align_index(mapping: AddressSpace, index: int) -> int:
    """``index`` rounded down to the minimum order (where a folio holding it starts)."""
    return index & mapping.min_index_mask
