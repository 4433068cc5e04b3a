"""Folio: a naturally aligned run of 2**order pages of one file, and its kernel-named helpers.

The model is single-threaded, so a lock that is already held can never be released
while we wait: where the kernel would sleep on it, the model raises :class:`FolioDeadlock`
instead of hanging the test.

The per-folio hot paths (``filemap_read``, ``generic_perform_write``, block2mtd's loops)
read and set the fields directly, where a call would cost more than the copy; the rest
of the model goes through these helpers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_folio.model.constants import MAX_PAGECACHE_ORDER, PAGE_SHIFT, PAGE_SIZE

if TYPE_CHECKING:
    from pytest_folio.model.filemap import AddressSpace
    from pytest_folio.model.memory import PhysicalMemory


_ZEROS = memoryview(bytes(PAGE_SIZE << MAX_PAGECACHE_ORDER))


class FolioDeadlock(RuntimeError):
    """The caller already holds the folio lock it is now waiting for."""


class Folio:
    """A folio of the page cache.

    ``data`` is a memoryview into physical memory (``size`` bytes). ``refcount`` counts
    references like the kernel's: the page cache holds one while the folio is cached,
    every lookup that returns a folio takes one that the caller drops with
    :func:`folio_put`. A folio removed from the cache keeps its memory until the last
    reference is gone, so a caller still holding it never writes into someone else's
    pages.
    """

    __slots__ = (
        "data",
        "dirty",
        "index",
        "locked",
        "mapping",
        "memory",
        "nr_pages",
        "order",
        "page_views",
        "pfn",
        "pos",
        "refcount",
        "referenced",
        "size",
        "uptodate",
        "writeback",
    )

    def __init__(self, memory: PhysicalMemory, pfn: int, order: int, index: int = 0) -> None:
        self.memory = memory
        self.pfn = pfn
        self.order = order
        self.nr_pages = 1 << order
        self.size = self.nr_pages << PAGE_SHIFT
        self.index = index
        self.pos = index << PAGE_SHIFT
        self.data = memory._mv[pfn << PAGE_SHIFT:(pfn + self.nr_pages) << PAGE_SHIFT]  # page_view
        self.page_views: tuple[memoryview, ...] | None = None   # folio_page_views()
        self.mapping: AddressSpace | None = None
        self.uptodate = False
        self.dirty = False
        self.locked = False
        self.writeback = False
        self.referenced = False     # accessed since reclaim last looked (second chance)
        self.refcount = 1           # the allocation's reference

    def __repr__(self) -> str:
        flags = [name for name in ("uptodate", "dirty", "locked", "writeback")
                 if getattr(self, name)]
        where = "cached" if self.mapping is not None else "removed"
        return (f"<Folio index={self.index} order={self.order} pfn={self.pfn} "
                f"{'|'.join(flags) or '-'} {where} ref={self.refcount}>")


def folio_lock(folio: Folio) -> None:
    if folio.locked:
        raise FolioDeadlock(f"folio at index {folio.index} is already locked: "
                            "the kernel would wait here forever")
    folio.locked = True


def folio_trylock(folio: Folio) -> bool:
    if folio.locked:
        return False
    folio.locked = True
    return True


def folio_unlock(folio: Folio) -> None:
    if not folio.locked:
        raise RuntimeError(f"folio_unlock: folio at index {folio.index} is not locked")
    folio.locked = False


def folio_get(folio: Folio) -> None:
    folio.refcount += 1


def folio_put(folio: Folio) -> None:
    """Drop a reference; the last one frees the folio's pages."""
    refcount = folio.refcount
    if refcount > 1:                  # the usual case: the cache or another holder stays
        folio.refcount = refcount - 1
        return
    if refcount <= 0 or folio.mapping is not None:
        raise RuntimeError(f"folio_put: folio at index {folio.index} has no reference of "
                           "the caller's left (one put too many)")
    folio.refcount = 0                # the last reference: a folio out of the cache
    folio.memory.free_pages(folio.pfn, folio.order)


def folio_page_views(folio: Folio) -> tuple[memoryview, ...]:
    """page_address() of every page of the folio, in order: made on first use and kept
    with the folio, as the kernel's struct pages are there for every page all along (so
    a caller walking a folio page by page pays for a page what it pays at any order)."""
    views = folio.page_views
    if views is None:
        data = folio.data
        folio.page_views = views = tuple(data[k:k + PAGE_SIZE]
                                         for k in range(0, folio.size, PAGE_SIZE))
    return views


def folio_mark_uptodate(folio: Folio) -> None:
    folio.uptodate = True


def folio_zero_range(folio: Folio, offset: int, length: int) -> None:
    """Zero ``length`` bytes at ``offset`` inside the folio (one slice copy)."""
    folio.data[offset:offset + length] = _ZEROS[:length]


def folio_test_uptodate(folio: Folio) -> bool:
    return folio.uptodate


def folio_test_dirty(folio: Folio) -> bool:
    return folio.dirty


def folio_test_locked(folio: Folio) -> bool:
    return folio.locked


def folio_test_writeback(folio: Folio) -> bool:
    return folio.writeback


def folio_test_large(folio: Folio) -> bool:
    return folio.order > 0


def folio_next_index(folio: Folio) -> int:
    return folio.index + folio.nr_pages
