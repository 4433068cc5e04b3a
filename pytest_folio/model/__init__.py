"""The reference model: a folio-aware page cache, block device, block2mtd and ramfs.

Names follow the kernel (mm/filemap.c, include/linux/pagemap.h) so a kernel developer
recognises them; see docs/model.md.
"""

from pytest_folio.model.blockdev import BlockDevice, invalidate_bdev, sync_blockdev
from pytest_folio.model.constants import MAX_PAGECACHE_ORDER, PAGE_SHIFT, PAGE_SIZE
from pytest_folio.model.filemap import AddressSpace, filemap_get_folio, read_mapping_folio
from pytest_folio.model.folio import (
    Folio,
    FolioDeadlock,
    folio_get,
    folio_lock,
    folio_mark_uptodate,
    folio_put,
    folio_trylock,
    folio_unlock,
)
from pytest_folio.model.invariants import InvariantError, check_mapping, check_memory
from pytest_folio.model.memory import PhysicalMemory
from pytest_folio.model.page_writeback import folio_mark_dirty
from pytest_folio.model.pagemap import FGP_CREAT, FGP_FOR_MMAP, FGP_LOCK, FGP_NOWAIT, FGP_WRITEBEGIN
from pytest_folio.model.pagewrappers import (
    Page,
    lock_page,
    page_address,
    page_folio,
    put_page,
    read_mapping_page,
    set_page_dirty,
    unlock_page,
)
from pytest_folio.model.stats import Stats

__all__ = [
    "FGP_CREAT",
    "FGP_FOR_MMAP",
    "FGP_LOCK",
    "FGP_NOWAIT",
    "FGP_WRITEBEGIN",
    "MAX_PAGECACHE_ORDER",
    "PAGE_SHIFT",
    "PAGE_SIZE",
    "AddressSpace",
    "BlockDevice",
    "Folio",
    "FolioDeadlock",
    "InvariantError",
    "Page",
    "PhysicalMemory",
    "Stats",
    "check_mapping",
    "check_memory",
    "filemap_get_folio",
    "folio_get",
    "folio_lock",
    "folio_mark_dirty",
    "folio_mark_uptodate",
    "folio_put",
    "folio_trylock",
    "folio_unlock",
    "invalidate_bdev",
    "lock_page",
    "page_address",
    "page_folio",
    "put_page",
    "read_mapping_folio",
    "read_mapping_page",
    "set_page_dirty",
    "sync_blockdev",
    "unlock_page",
]
