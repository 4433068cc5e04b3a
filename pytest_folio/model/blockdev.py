"""A block device with its page cache (``bdev->bd_mapping``), backed by memory or a file.

The logical block size sets the mapping's minimum folio order, as set_blocksize does
for block sizes above PAGE_SIZE: a 16 KiB-sector device caches in folios of at least
16 KiB. The backing store is an anonymous mmap (no RSS until written) or a regular file
the caller named; the model never opens anything else.

A device's size is whole 512-byte sectors (its capacity), at least one logical block; it
need not be whole folios (a loop device over a file of any size): the last folio then
reaches past the end, reads zeroes there and writes back only its part inside, as
block_read_full_folio and the writeback of a block device's last folio do.
"""

from __future__ import annotations

import errno
import mmap
import os
import random
import stat
from types import TracebackType

from pytest_folio.model.constants import MAX_PAGECACHE_ORDER, PAGE_SHIFT, PAGE_SIZE
from pytest_folio.model.filemap import AddressSpace
from pytest_folio.model.folio import Folio
from pytest_folio.model.memory import PhysicalMemory, discard_pages
from pytest_folio.model.page_writeback import (
    folio_clear_dirty_for_io,
    folio_end_writeback,
    folio_start_writeback,
    writeback_folio,
)
from pytest_folio.model.stats import Stats
from pytest_folio.model.truncate import truncate_inode_pages
from pytest_folio.sizes import blocksize_order, format_size, is_power_of_two

# What a power cut does to the folio under writeback: its first pages reach the store,
# any number of them (a large folio's bio is done sector by sector, in no promised
# order; the model keeps to prefixes), all of them, or none.
TORN_WRITEBACK = ("prefix", "whole", "none")
MIN_LOGICAL_BLOCK_SIZE = 512
MAX_LOGICAL_BLOCK_SIZE = PAGE_SIZE << MAX_PAGECACHE_ORDER
_HUGE = PAGE_SIZE << MAX_PAGECACHE_ORDER


def check_logical_block_size(size: int) -> int:
    if (not isinstance(size, int) or not is_power_of_two(size)
            or not MIN_LOGICAL_BLOCK_SIZE <= size <= MAX_LOGICAL_BLOCK_SIZE):
        raise ValueError(
            f"logical block size {size!r} must be a power of two from "
            f"{format_size(MIN_LOGICAL_BLOCK_SIZE)} to {format_size(MAX_LOGICAL_BLOCK_SIZE)}")
    return size


class BlockDeviceOperations:
    """The bdev's address_space_operations: folios read and write the backing store.
    A folio reaching past the end of the device reads zeroes there and writes only the
    part inside."""

    def __init__(self, bdev: BlockDevice) -> None:
        self.bdev = bdev

    def read_folio(self, folio: Folio) -> None:
        bdev = self.bdev
        n = max(0, min(folio.size, bdev.size - folio.pos))
        bdev._read_into(folio.data[:n], folio.pos)
        if n < folio.size:
            folio.data[n:] = bytes(folio.size - n)

    def writepage(self, folio: Folio) -> None:
        bdev = self.bdev
        if bdev.read_only:
            raise OSError(errno.EROFS, f"block device {bdev.name} is read-only")
        n = max(0, min(folio.size, bdev.size - folio.pos))
        bdev._write_from(folio.data[:n], folio.pos)

    def write_pages_torn(self, folio: Folio, nr_pages: int) -> None:
        """The part of a folio's write the device had done when the power failed: its
        first ``nr_pages`` pages."""
        bdev = self.bdev
        n = max(0, min(nr_pages << PAGE_SHIFT, bdev.size - folio.pos))
        bdev._write_from(folio.data[:n], folio.pos)


class BlockDevice:
    """``size`` bytes of storage in ``logical_block_size`` sectors and its page cache.

    With ``path`` the store is that regular file (created or extended to ``size`` unless
    read-only); otherwise memory. ``memory``/``stats`` share a model with other objects;
    by default the device gets physical memory big enough to cache all of itself.
    """

    def __init__(self, size: int, logical_block_size: int = 512, path: str | os.PathLike[str]
                 | None = None, read_only: bool = False, memory: PhysicalMemory | None = None,
                 stats: Stats | None = None, name: str | None = None) -> None:
        check_logical_block_size(logical_block_size)
        if (not isinstance(size, int) or size < logical_block_size
                or size % MIN_LOGICAL_BLOCK_SIZE):
            raise ValueError(f"block device size {size!r} must be whole 512-byte sectors "
                             "and at least its logical block size "
                             f"{format_size(logical_block_size)}")
        self.size = size
        self.logical_block_size = logical_block_size
        self.read_only = read_only
        self.path = None if path is None else os.fspath(path)
        self.name = name or self.path or "ram0"
        self._owns_memory = memory is None
        if memory is None:
            memory = PhysicalMemory(-(-size // _HUGE) * _HUGE + _HUGE, stats)
        self.memory = memory
        self.stats = stats if stats is not None else memory.stats
        self.bd_mapping = AddressSpace(memory, BlockDeviceOperations(self), self.stats)
        self.bd_mapping.mapping_set_folio_min_order(blocksize_order(logical_block_size))
        self.bd_mapping.i_size = size
        self._fd = -1
        self._store: memoryview | None = None
        self._store_map: mmap.mmap | None = None
        if self.path is None:
            try:
                self._store_map = mmap.mmap(-1, size)
                self._store = memoryview(self._store_map)
            except (OSError, OverflowError) as exc:
                raise ValueError(f"cannot reserve {format_size(size)} for the block "
                                 f"device's store: {exc}") from None
        else:
            self._open_file(self.path)

    def _open_file(self, path: str) -> None:
        try:
            existing = os.stat(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ValueError(f"cannot open backing file {path}: {exc.strerror}") from None
        else:
            # refuse before opening: opening a device node can already do something
            if not stat.S_ISREG(existing.st_mode):
                raise ValueError(f"backing file {path} is not a regular file (the model "
                                 "never writes real devices)")
        flags = os.O_RDONLY if self.read_only else os.O_RDWR | os.O_CREAT
        try:
            fd = os.open(path, flags | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ValueError(f"cannot open backing file {path}: {exc.strerror}") from None
        st = os.fstat(fd)
        try:
            if not stat.S_ISREG(st.st_mode):
                raise ValueError(f"backing file {path} is not a regular file (the model "
                                 "never writes real devices)")
            if st.st_size < self.size:
                if self.read_only:
                    raise ValueError(f"read-only backing file {path} holds "
                                     f"{st.st_size} bytes, less than the device size "
                                     f"{self.size}")
                os.ftruncate(fd, self.size)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    # -- the backing store --------------------------------------------------------------

    def _read_into(self, buf: memoryview, pos: int) -> None:
        if self._store is not None:
            buf[:] = self._store[pos:pos + len(buf)]
            return
        while len(buf):
            n = os.preadv(self._fd, [buf], pos)
            if n == 0:
                buf[:] = bytes(len(buf))       # a file shrunk behind our back reads zeroes
                return
            buf = buf[n:]
            pos += n

    def _write_from(self, buf: memoryview, pos: int) -> None:
        if self._store is not None:
            self._store[pos:pos + len(buf)] = buf
            return
        while len(buf):
            n = os.pwrite(self._fd, buf, pos)
            buf = buf[n:]
            pos += n

    def read_backing(self, pos: int, length: int) -> bytes:
        """What the store holds, bypassing the page cache (what a reboot would see)."""
        self._check_range(pos, length)
        buf = bytearray(length)
        self._read_into(memoryview(buf), pos)
        return bytes(buf)

    def write_backing(self, pos: int, data: bytes) -> None:
        """Change the store behind the page cache's back (a write the cache did not see)."""
        self._check_range(pos, len(data))
        self._write_from(memoryview(data).cast("B"), pos)

    def _check_range(self, pos: int, length: int) -> None:
        if pos < 0 or length < 0 or pos + length > self.size:
            raise OSError(errno.EINVAL, f"range {pos}+{length} is outside the "
                          f"{self.size}-byte device {self.name}")

    # -- the kernel's calls -------------------------------------------------------------

    def invalidate_bdev(self) -> int:
        """Drop every clean, unlocked folio of the device's page cache (how many)."""
        return self.bd_mapping.invalidate_mapping_pages(0, -1)

    def sync_blockdev(self) -> None:
        """Write every dirty folio back to the store (and fsync a backing file)."""
        self.bd_mapping.filemap_write_and_wait()
        if self._fd >= 0 and not self.read_only:
            os.fsync(self._fd)

    def power_cut(self, torn: str = "prefix", cut: int = 0) -> None:
        """The power fails and the device is attached again: every folio of the page
        cache is gone without writeback (what a reboot reads is the store), except what
        the flusher had got onto the store before the cut. Background writeback may
        have been at any dirty folio: of the dirty folios in index order, the first
        ``k`` were written back whole and the next one was under writeback at the cut,
        and lands as ``torn`` says (:data:`TORN_WRITEBACK`): a prefix of its pages, whole,
        or not at all. ``k`` and the prefix are drawn from ``cut`` (the cut's number), so
        a run of cuts sees every mix and the same run sees the same ones."""
        if torn not in TORN_WRITEBACK:
            raise ValueError(f"torn writeback must be one of {', '.join(TORN_WRITEBACK)}, "
                             f"not {torn!r}")
        mapping = self.bd_mapping
        ops = BlockDeviceOperations(self)
        dirty = [folio for folio in mapping.folios() if folio.dirty]
        rng = random.Random(cut)
        flushed = rng.randrange(len(dirty) + 1)
        if not self.read_only:
            for folio in dirty[:flushed]:
                writeback_folio(mapping, folio, ops.writepage)
            if flushed < len(dirty):
                folio = dirty[flushed]
                landed = {"whole": folio.nr_pages, "none": 0}.get(
                    torn, rng.randrange(folio.nr_pages + 1))
                folio_clear_dirty_for_io(folio)
                folio_start_writeback(folio)
                ops.write_pages_torn(folio, landed)    # and then the power is gone
                folio_end_writeback(folio)
        truncate_inode_pages(mapping, 0)              # dirty or not: the memory is gone

    def bdev_read_only(self) -> bool:
        return self.read_only

    def bdev_nr_bytes(self) -> int:
        return self.size

    def close(self) -> None:
        """Close a backing file (nothing is written back: call sync_blockdev first)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def release(self) -> None:
        """Close, then hand the pages of the page cache (when the device made its own
        memory) and of the in-memory store back to the operating system now: for a
        device no one reads again (a finished test), whose objects would otherwise wait
        for Python's cycle collector. Both read as zeroes afterwards."""
        self.close()
        if self._owns_memory:
            self.memory.release()
        if self._store_map is not None:
            discard_pages(self._store_map)

    def __enter__(self) -> BlockDevice:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<BlockDevice {self.name} {format_size(self.size)}, "
                f"{format_size(self.logical_block_size)} blocks>")


def invalidate_bdev(bdev: BlockDevice) -> int:
    return bdev.invalidate_bdev()


def sync_blockdev(bdev: BlockDevice) -> None:
    bdev.sync_blockdev()
