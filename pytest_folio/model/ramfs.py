"""ramfs with the ``blocksize`` mount option, on the reference page cache (fs/ramfs/inode.c
plus the seed patch "ramfs: enable block size > page size").

File data lives only in the page cache: ``read_folio`` zero-fills (simple_read_folio),
writes leave folios dirty, there is no writepage and the mappings are unevictable, so
nothing is ever written back or reclaimed. A regular file's mapping gets the minimum folio
order log2(blocksize / PAGE_SIZE), as the patch does with mapping_set_folio_min_order.
The reference also caps the maximum order at the minimum: ramfs writes go through
simple_write_begin, which asks for the minimum order only, so every folio of a file has
exactly that order (the kernel may read holes ahead into larger folios; nothing else
differs). That is what makes the seed's dd table: the bigger the block size, the fewer
folios a write creates.

Unlike the seed patch, a block size out of range is EINVAL, not silently clamped.

The default mount supports what kernel ramfs does: read, write, truncate, shared mmap
read and write, fsync as a no-op, copy_file_range (the kernel's generic splice path), and
fallocate is EOPNOTSUPP. ``features="full"`` adds fallocate (with and without
KEEP_SIZE), punch hole, zero range, collapse range and insert range, with ext4/xfs's
block-size alignment rules, each built on the page cache's truncate and split rules
(collapse and insert then move folios to their new index, as extents shift).
Errors are the errnos Linux gives, in Linux's order of checks.
"""

from __future__ import annotations

import errno

from pytest_folio.linux.uapi import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
)
from pytest_folio.model.constants import PAGE_SHIFT, PAGE_SIZE
from pytest_folio.model.filemap import AddressSpace
from pytest_folio.model.folio import (
    Folio,
    folio_mark_uptodate,
    folio_next_index,
    folio_put,
    folio_test_uptodate,
    folio_unlock,
    folio_zero_range,
)
from pytest_folio.model.memory import PhysicalMemory
from pytest_folio.model.pagemap import FGP_CREAT, FGP_LOCK
from pytest_folio.model.stats import Stats
from pytest_folio.model.vfs import MAX_LFS_FILESIZE, Inode, Vfs, raise_errno
from pytest_folio.sizes import ilog2, parse_block_size

RAMFS_MAGIC = 0x858458F6
DEFAULT_MEMORY = 256 << 20

DEFAULT_FEATURES = frozenset({"mmap", "copy_range"})
FULL_FEATURES = DEFAULT_FEATURES | {"fallocate", "punch_hole", "zero_range", "collapse_range",
                                    "insert_range"}


class RamfsAops:
    """ramfs_aops: read_folio zero-fills; no writepage, so dirty folios stay dirty."""

    def read_folio(self, folio: Folio) -> None:
        folio_zero_range(folio, 0, folio.size)


class Ramfs(Vfs):
    """A mounted ramfs: the FileSystem protocol over the reference page cache.

    ``blocksize`` takes bytes or a size such as ``"16k"``; ``memory`` is the size of the
    model's physical memory (one buddy-allocated buffer shared by every file);
    ``ramfs.memory`` and ``ramfs.stats`` are the model objects, and
    ``lookup(path).i_mapping`` a file's page cache, for tests to inspect.
    """

    s_magic = RAMFS_MAGIC

    def __init__(self, blocksize: int | str = PAGE_SIZE, features: str = "default",
                 memory: int = DEFAULT_MEMORY, *, stats: Stats | None = None) -> None:
        try:
            blocksize = parse_block_size(blocksize)
        except (ValueError, TypeError) as exc:
            raise OSError(errno.EINVAL, f"ramfs: blocksize={blocksize!r}: {exc}") from None
        if features not in ("default", "full"):
            raise OSError(errno.EINVAL,
                          f"ramfs: features={features!r}: use 'default' or 'full'")
        self.blocksize = blocksize
        self.blkbits = ilog2(blocksize)
        self.min_order = self.blkbits - PAGE_SHIFT
        self.features = FULL_FEATURES if features == "full" else DEFAULT_FEATURES
        self.stats = stats if stats is not None else Stats()
        try:
            self.memory = PhysicalMemory(memory, self.stats)
        except ValueError as exc:
            raise OSError(errno.EINVAL, f"ramfs: memory={memory!r}: {exc}") from None
        self.a_ops = RamfsAops()
        super().__init__()

    def __repr__(self) -> str:
        return (f"Ramfs(blocksize={self.blocksize}, features="
                f"{'full' if 'fallocate' in self.features else 'default'})")

    def _new_mapping(self) -> AddressSpace:
        """ramfs_get_inode: a regular file's mapping at the block size's folio order."""
        mapping = AddressSpace(self.memory, self.a_ops, self.stats)
        mapping.mapping_set_folio_order_range(self.min_order, self.min_order)
        mapping.unevictable = True
        mapping.i_size = 0
        return mapping

    # -- fallocate ----------------------------------------------------------------------------
    def _fallocate(self, inode: Inode, op: int, keep: bool, offset: int, length: int,
                   what: str) -> None:
        """fallocate with ``features="full"`` (kernel ramfs has no ->fallocate)."""
        assert inode.i_mapping is not None
        if "fallocate" not in self.features:           # no ->fallocate in ramfs
            raise_errno(errno.EOPNOTSUPP, what)
        end = offset + length
        if op == 0:
            self._allocate(inode, offset, end)
            if not keep and end > inode.i_size:
                self._set_size(inode, end)
        elif op == FALLOC_FL_PUNCH_HOLE:
            inode.i_mapping.truncate_inode_pages_range(offset, end - 1)
        elif op == FALLOC_FL_ZERO_RANGE:
            self._allocate(inode, offset, end, zero=True)
            if not keep and end > inode.i_size:
                self._set_size(inode, end)
        elif op in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE):
            if (offset | length) & (self.blocksize - 1):
                raise_errno(errno.EINVAL, f"{what}: not aligned to the block size {self.blocksize}")
            if op == FALLOC_FL_COLLAPSE_RANGE:
                if end >= inode.i_size:
                    raise_errno(errno.EINVAL, f"{what}: reaches EOF ({inode.i_size})")
                self._shift(inode, end, offset)
            else:
                if offset >= inode.i_size:
                    raise_errno(errno.EINVAL, f"{what}: at or past EOF ({inode.i_size})")
                if inode.i_size + length > MAX_LFS_FILESIZE:
                    raise_errno(errno.EFBIG, what)
                self._shift(inode, offset, end)
        else:
            raise_errno(errno.EOPNOTSUPP, what)


    def _allocate(self, inode: Inode, start: int, end: int, zero: bool = False) -> None:
        """Give every page of [start, end) a dirty folio, zeroed when new; the data of
        one already there stays, or with ``zero`` (zero range) reads as zeroes in
        [start, end): a block of a RAM file system stays allocated and is zeroed in
        place, where truncating the range and allocating it again would free and take
        the same folios."""
        mapping = inode.i_mapping
        assert mapping is not None
        index, last = start >> PAGE_SHIFT, (end - 1) >> PAGE_SHIFT
        cached, mask, stats = mapping.i_pages, mapping.min_index_mask, mapping.stats
        # with no folio above the minimum order cached, the first probe is the lookup
        one_probe = mapping.top_order == mapping.min_order
        while index <= last:
            folio = cached.get(index & mask)
            inline = folio is not None and folio.uptodate and not folio.locked
            if folio is not None and inline:
                # the usual case, inline: the lookup's count, then lock, dirty, unlock
                # and put of a folio that already holds its data
                stats.folio_lookups += 1
                folio.referenced = True
            elif folio is None and one_probe:
                # a miss, inline: the lookup's count, then a new folio of the minimum
                # order (never EEXIST after a miss), zeroed; its lock and our reference
                # would be taken and dropped again with nothing in between
                stats.folio_lookups += 1
                folio = mapping.filemap_create_folio(index, self.min_order)
                assert folio is not None
                folio_zero_range(folio, 0, folio.size)
                folio_mark_uptodate(folio)
                inline = True
            else:                          # locked, with a reference of ours
                folio = mapping.filemap_get_folio_flags(index, FGP_CREAT | FGP_LOCK,
                                                        self.min_order)
                assert folio is not None
                if not folio_test_uptodate(folio):
                    folio_zero_range(folio, 0, folio.size)
                    folio_mark_uptodate(folio)
            if zero:
                zfrom = max(start, folio.pos)
                folio_zero_range(folio, zfrom - folio.pos,
                                 min(end, folio.pos + folio.size) - zfrom)
            folio.dirty = True                                  # folio_mark_dirty
            index = folio_next_index(folio)
            if not inline:
                folio_unlock(folio)
                folio_put(folio)

    def _shift(self, inode: Inode, src: int, dst: int) -> None:
        """Move the bytes from ``src`` to EOF so they start at ``dst`` (collapse when
        dst < src, insert when dst > src), as a file system with extents shifts them:
        the folios move to their new index, copying nothing (both offsets are aligned to
        the block size, which is every folio's size); a collapsed range is truncated
        first, an inserted one stays a hole. Bytes past the new EOF read as zeroes."""
        mapping = inode.i_mapping
        assert mapping is not None
        if dst < src:
            mapping.truncate_inode_pages_range(dst, src - 1)
        delta = (dst - src) >> PAGE_SHIFT
        moving = mapping.filemap_get_folios(src >> PAGE_SHIFT, MAX_LFS_FILESIZE >> PAGE_SHIFT)
        mapping.page_cache_move(moving if delta < 0 else moving[::-1], delta)
        size = inode.i_size + dst - src
        self._set_size(inode, size)
        eof = mapping.filemap_get_folio(size >> PAGE_SHIFT) if size & (self.blocksize - 1) else None
        if eof is not None:
            folio_zero_range(eof, size - eof.pos, eof.pos + eof.size - size)
            folio_put(eof)
