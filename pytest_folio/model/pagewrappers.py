"""The page wrappers drivers used before their folio conversion.

Each takes a ``Page`` (one 4 KiB page of a possibly larger folio) and first finds its
head folio, which is the ``compound_head()`` the kernel hides in every wrapper; each of
``lock_page``, ``set_page_dirty``, ``unlock_page`` and ``put_page`` counts exactly one in
``Stats.compound_head``, so a test can show what a conversion to folios saves (seed:
block2mtd, "removes a compound_head() call per page in the read path and four per page
in the write and erase paths"). ``read_mapping_page`` counts none: the kernel gets the
page from the folio by arithmetic (``folio_file_page``), which is why the seed's read
path (read_mapping_page + put_page) saves one per page, not two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from pytest_folio.model.constants import PAGE_SHIFT
from pytest_folio.model.filemap import AddressSpace
from pytest_folio.model.folio import Folio, folio_lock, folio_put, folio_unlock
from pytest_folio.model.page_writeback import folio_mark_dirty
from pytest_folio.model.stats import Stats

R = TypeVar("R")


class Page:
    """``struct page``: page ``index`` of a file, inside the folio ``head``."""

    __slots__ = ("head", "index", "stats")

    def __init__(self, head: Folio, index: int, stats: Stats) -> None:
        self.head = head
        self.index = index
        self.stats = stats

    def __repr__(self) -> str:
        return f"<Page index={self.index} of {self.head!r}>"


def page_folio(page: Page) -> Folio:
    """compound_head(): the folio a page belongs to (counted)."""
    page.stats.compound_head += 1
    return page.head


def page_address(page: Page) -> memoryview:
    """The page's 4 KiB of data (a view into the folio, not a copy)."""
    head = page.head
    offset = (page.index - head.index) << PAGE_SHIFT
    return head.data[offset:offset + (1 << PAGE_SHIFT)]


def read_mapping_page(mapping: AddressSpace, index: int) -> Page:
    """An uptodate page of the mapping; the caller owns a reference (``put_page``)."""
    folio = mapping.read_mapping_folio(index)
    return Page(folio, index, mapping.stats)


class PageWrapper(Generic[R]):
    """A page-API call: the folio call it wraps on the page's head folio, and the
    ``compound_head()`` calls that costs (``compound_heads``, counted on every call).

    The one place the metric is defined: block2mtd's page path, which cannot afford a
    call per wrapper per page, adds up these same ``compound_heads`` in a local."""

    __slots__ = ("__name__", "compound_heads", "folio_call")

    def __init__(self, name: str, folio_call: Callable[[Folio], R]) -> None:
        self.__name__ = name
        self.folio_call = folio_call
        self.compound_heads = 1             # page_folio(page): one compound_head()

    def __call__(self, page: Page) -> R:
        page.stats.compound_head += self.compound_heads
        return self.folio_call(page.head)

    def __repr__(self) -> str:
        return f"<page wrapper {self.__name__} -> {self.folio_call.__name__}>"


lock_page = PageWrapper("lock_page", folio_lock)
unlock_page = PageWrapper("unlock_page", folio_unlock)
set_page_dirty = PageWrapper("set_page_dirty", folio_mark_dirty)
put_page = PageWrapper("put_page", folio_put)
