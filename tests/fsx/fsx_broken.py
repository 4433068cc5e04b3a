"""Deliberately broken file systems: each wraps a correct FileSystem and injects one bug of
a class real file systems have had. fsx must catch every one of them.

The wrappers build the broken call out of plain pread/pwrite/ftruncate on the healthy
file system where they need to, so they work on any base (the in-memory MemFS, the
reference ramfs, a tmpfs directory). Each class docstring names the real-world bug class.
"""

from __future__ import annotations

import errno
import os

from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.targets.protocols import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
    FileSystem,
)

JUNK = 0xA5


def _page_end(pos: int) -> int:
    return -(-pos // PAGE_SIZE) * PAGE_SIZE


class PassThrough:
    """Every call handed to the healthy file system unchanged."""

    extra_features: frozenset[str] = frozenset()

    def __init__(self, inner: FileSystem) -> None:
        self.inner = inner
        self.blocksize = inner.blocksize
        self.features = inner.features | self.extra_features

    def size(self, fd: int) -> int:
        return self.inner.fstat(fd).st_size

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return self.inner.open(path, flags, mode)

    def close(self, fd: int) -> None:
        self.inner.close(fd)

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        return self.inner.pread(fd, n, offset)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return self.inner.pwrite(fd, data, offset)

    def ftruncate(self, fd: int, length: int) -> None:
        self.inner.ftruncate(fd, length)

    def fstat(self, fd: int) -> os.stat_result:
        return self.inner.fstat(fd)

    def fsync(self, fd: int) -> None:
        self.inner.fsync(fd)

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        self.inner.fallocate(fd, mode, offset, length)

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        return self.inner.copy_file_range(src, dst, count, offset_src, offset_dst)

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        return self.inner.mmap_read(fd, offset, length)

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        self.inner.mmap_write(fd, offset, data)

    def unlink(self, path: str) -> None:
        self.inner.unlink(path)

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        self.inner.mkdir(path, mode)

    def rmdir(self, path: str) -> None:
        self.inner.rmdir(path)

    def rename(self, src: str, dst: str) -> None:
        self.inner.rename(src, dst)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def stat(self, path: str) -> os.stat_result:
        return self.inner.stat(path)


class StaleDataAfterTruncateUp(PassThrough):
    """Truncate down does not zero the rest of the new EOF page; truncating up again from
    that EOF exposes the old bytes (the partial-page zeroing bugs of truncate_setsize
    callers)."""

    stale: tuple[int, bytes] | None = None

    def ftruncate(self, fd: int, length: int) -> None:
        size = self.size(fd)
        if length < size:
            end = min(size, _page_end(length))
            self.stale = (length, self.inner.pread(fd, end - length, length))
            self.inner.ftruncate(fd, length)
            return
        self.inner.ftruncate(fd, length)
        if self.stale is not None and self.stale[0] == size and length > size:
            self.inner.pwrite(fd, self.stale[1][:length - size], size)
        self.stale = None


class WritePastEofNoZeroFill(PassThrough):
    """A write that starts beyond EOF leaves junk in the rest of the old EOF page instead
    of zeroes (block_write_begin-style partial block not zeroed)."""

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        size = self.size(fd)
        n = self.inner.pwrite(fd, data, offset)
        end = min(offset, _page_end(size))
        if end > size:
            self.inner.pwrite(fd, bytes([JUNK]) * (end - size), size)
        return n


class WriteLostAfterCloseOpen(PassThrough):
    """Data written since the last fsync is dropped when the file is closed (dirty pages
    discarded on release instead of written back)."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self.undo: list[tuple[int, bytes]] = []

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        self.undo.append((offset, self.inner.pread(fd, len(data), offset)))
        return self.inner.pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        self.undo.clear()
        self.inner.fsync(fd)

    def close(self, fd: int) -> None:
        for offset, old in reversed(self.undo):
            self.inner.pwrite(fd, old, offset)
        self.undo.clear()
        self.inner.close(fd)


class MmapWriteNotPersisted(PassThrough):
    """msync writes back only the first page of a shared mapping; the rest of a mapped
    write is lost."""

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        first = PAGE_SIZE - offset % PAGE_SIZE
        self.inner.mmap_write(fd, offset, data[:first])


class PunchHoleOffByOnePage(PassThrough):
    """Punching a hole also zeroes the page after the range (an off-by-one in the end
    index of the truncate_pagecache_range call)."""

    extra_features = frozenset({"punch_hole"})

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        if mode != FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE:
            return self.inner.fallocate(fd, mode, offset, length)
        end = min(self.size(fd), offset + length + PAGE_SIZE)
        if end > offset:
            self.inner.pwrite(fd, bytes(end - offset), offset)
        return None


class CollapseRangeWrongShift(PassThrough):
    """Collapse range moves the data after the range by one block too little (an
    off-by-one in the extent shift), leaving a block of the removed range behind."""

    extra_features = frozenset({"collapse_range"})

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        if mode != FALLOC_FL_COLLAPSE_RANGE:
            return self.inner.fallocate(fd, mode, offset, length)
        size, end, bs = self.size(fd), offset + length, self.blocksize
        if offset % bs or length % bs or end >= size:
            raise OSError(errno.EINVAL, "collapse range: unaligned or reaching EOF")
        shift = length - bs if length > bs else length
        self.inner.pwrite(fd, self.inner.pread(fd, size - end, end), end - shift)
        self.inner.ftruncate(fd, size - length)
        return None


class CopyRangeShortCopy(PassThrough):
    """copy_file_range copies only to the end of the source's first page but reports the
    whole count (a short copy reported as complete)."""

    extra_features = frozenset({"copy_range"})

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        first = min(count, PAGE_SIZE - offset_src % PAGE_SIZE)
        self.inner.pwrite(dst, self.inner.pread(src, first, offset_src), offset_dst)
        if offset_dst + count > self.size(dst):
            self.inner.ftruncate(dst, offset_dst + count)
        return count


class SizeNotUpdatedAfterExtendingWrite(PassThrough):
    """A write that starts inside the file and ends past EOF does not update i_size, so
    the part past the old EOF is gone."""

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        size = self.size(fd)
        if offset < size < offset + len(data):
            self.inner.pwrite(fd, data[:size - offset], offset)
            return len(data)
        return self.inner.pwrite(fd, data, offset)


class ZeroRangeNotZeroingTail(PassThrough):
    """FALLOC_FL_ZERO_RANGE zeroes whole pages but leaves the partial page at the end of
    the range untouched."""

    extra_features = frozenset({"zero_range"})

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        if mode & ~FALLOC_FL_KEEP_SIZE != FALLOC_FL_ZERO_RANGE:
            return self.inner.fallocate(fd, mode, offset, length)
        size, end = self.size(fd), offset + length
        zero_end = min(end - end % PAGE_SIZE, size)
        if zero_end > offset:
            self.inner.pwrite(fd, bytes(zero_end - offset), offset)
        if not mode & FALLOC_FL_KEEP_SIZE and end > size:
            self.inner.ftruncate(fd, end)
        return None


class FsyncDropsDirtyData(PassThrough):
    """Writes wait in a write-back cache; fsync writes back all but the newest dirty range
    and then forgets them all (an off-by-one in the writeback loop)."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self.dirty: list[tuple[int, bytes]] = []

    def _cached_size(self, fd: int) -> int:
        return max([self.size(fd), *(off + len(data) for off, data in self.dirty)])

    def _writeback(self, fd: int, dirty: list[tuple[int, bytes]]) -> None:
        for offset, data in dirty:
            self.inner.pwrite(fd, data, offset)
        self.dirty.clear()

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        self.dirty.append((offset, bytes(data)))
        return len(data)

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        n = max(0, min(n, self._cached_size(fd) - offset))
        buf = bytearray(self.inner.pread(fd, n, offset).ljust(n, b"\0"))
        for off, data in self.dirty:
            lo, hi = max(off, offset), min(off + len(data), offset + n)
            if lo < hi:
                buf[lo - offset:hi - offset] = data[lo - off:hi - off]
        return bytes(buf)

    def fstat(self, fd: int) -> os.stat_result:
        st = self.inner.fstat(fd)
        fields = list(st[:10])
        fields[6] = self._cached_size(fd)
        return os.stat_result(fields, {"st_blksize": st.st_blksize,
                                       "st_blocks": st.st_blocks})

    def fsync(self, fd: int) -> None:
        self._writeback(fd, self.dirty[:-1])
        self.inner.fsync(fd)

    def _flush(self, fd: int) -> None:
        self._writeback(fd, self.dirty)

    def close(self, fd: int) -> None:
        self._flush(fd)
        self.inner.close(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        self._flush(fd)
        self.inner.ftruncate(fd, length)

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        self._flush(fd)
        self.inner.fallocate(fd, mode, offset, length)

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        self._flush(src)
        return self.inner.copy_file_range(src, dst, count, offset_src, offset_dst)

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        self._flush(fd)
        return self.inner.mmap_read(fd, offset, length)

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        self._flush(fd)
        self.inner.mmap_write(fd, offset, data)


class MmapReadStaleAfterWrite(PassThrough):
    """Pages read through a mapping are kept and a later write(2) does not invalidate
    them, so mapped reads return the old data (mmap/page-cache incoherency). Every other
    call invalidates the pages it changes, as it should."""

    def __init__(self, inner: FileSystem) -> None:
        super().__init__(inner)
        self.pages: dict[int, bytes] = {}

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        self.inner.mmap_read(fd, offset, length)  # the target's own range checks
        out = bytearray()
        for index in range(offset // PAGE_SIZE, _page_end(offset + length) // PAGE_SIZE):
            page = self.pages.get(index)
            if page is None:
                page = self.inner.pread(fd, PAGE_SIZE, index * PAGE_SIZE).ljust(
                    PAGE_SIZE, b"\0")
                self.pages[index] = page
            out += page
        skip = offset % PAGE_SIZE
        return bytes(out[skip:skip + length])

    def _invalidate(self, start: int, end: int | None = None) -> None:
        first = start // PAGE_SIZE
        last = None if end is None else _page_end(end) // PAGE_SIZE
        for index in [i for i in self.pages if i >= first and (last is None or i < last)]:
            del self.pages[index]

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        self._invalidate(offset, offset + len(data))
        self.inner.mmap_write(fd, offset, data)

    def ftruncate(self, fd: int, length: int) -> None:
        self._invalidate(min(length, self.size(fd)))
        self.inner.ftruncate(fd, length)

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        shifts = mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE)
        self._invalidate(offset, None if shifts else offset + length)
        self.inner.fallocate(fd, mode, offset, length)

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        self._invalidate(offset_dst, offset_dst + count)
        return self.inner.copy_file_range(src, dst, count, offset_src, offset_dst)


class InsertRangeNoZeroFill(PassThrough):
    """Insert range shifts the data up but leaves the old bytes in the inserted gap
    instead of a hole that reads as zeroes."""

    extra_features = frozenset({"insert_range"})

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        if mode != FALLOC_FL_INSERT_RANGE:
            return self.inner.fallocate(fd, mode, offset, length)
        size, bs = self.size(fd), self.blocksize
        if offset % bs or length % bs or offset >= size:
            raise OSError(errno.EINVAL, "insert range: unaligned or at EOF")
        self.inner.pwrite(fd, self.inner.pread(fd, size - offset, offset), offset + length)
        return None


class FallocKeepSizeExtends(PassThrough):
    """fallocate with FALLOC_FL_KEEP_SIZE past EOF changes the file size anyway."""

    extra_features = frozenset({"fallocate"})

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        if mode not in (0, FALLOC_FL_KEEP_SIZE):
            return self.inner.fallocate(fd, mode, offset, length)
        if offset + length > self.size(fd):
            self.inner.ftruncate(fd, offset + length)
        return None


BUGS: tuple[type[PassThrough], ...] = (
    StaleDataAfterTruncateUp,
    WritePastEofNoZeroFill,
    WriteLostAfterCloseOpen,
    MmapWriteNotPersisted,
    PunchHoleOffByOnePage,
    CollapseRangeWrongShift,
    CopyRangeShortCopy,
    SizeNotUpdatedAfterExtendingWrite,
    ZeroRangeNotZeroingTail,
    FsyncDropsDirtyData,
    MmapReadStaleAfterWrite,
    InsertRangeNoZeroFill,
    FallocKeepSizeExtends,
)
