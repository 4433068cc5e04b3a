"""One-line bugs in the fresh implementations: does the default run catch them?"""

from __future__ import annotations

import errno
import os

from tests.helpers.fresh2 import bufnor, ebram, flatfs, syncfs, treefs
from tests.helpers.fresh2.treefs import PAGE


class TailOffByOne(treefs.Inode):
    """truncate down zeroes the tail of the last page from one byte too far."""

    def truncate(self, size: int) -> None:
        if size < self.size:
            last = -(-size // PAGE)
            for idx in [i for i in self.pages if i >= last]:
                del self.pages[idx]
            if size % PAGE and size // PAGE in self.pages:
                page = self.pages[size // PAGE]
                page[size % PAGE + 1:] = bytes(PAGE - size % PAGE - 1)   # bug: + 1
        self.size = size


class ZeroWriteSkipped(treefs.Inode):
    """A chunk of all-zero bytes is skipped as a hole, also over existing data."""

    def store(self, off: int, data: bytes | bytearray | memoryview) -> None:
        pos, view = off, memoryview(data)
        while view:
            idx, inpage = divmod(pos, PAGE)
            take = min(PAGE - inpage, len(view))
            if any(view[:take]):                    # bug: zeros "are a hole" anyway
                page = self.pages.get(idx)
                if page is None:
                    page = self.pages[idx] = bytearray(PAGE)
                page[inpage:inpage + take] = view[:take]
            view = view[take:]
            pos += take


class _TreeWith(treefs.TreeFS):
    inode_class: type[treefs.Inode] = treefs.Inode

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        node = self.handles[fd].node
        if type(node) is treefs.Inode:
            node.__class__ = self.inode_class
        return fd


class TailOffByOneFS(_TreeWith):
    inode_class = TailOffByOne


class ZeroWriteSkippedFS(_TreeWith):
    inode_class = ZeroWriteSkipped


class NameCharsFS(treefs.TreeFS):
    """NAME_MAX counted in characters, not in the bytes the kernel gets."""

    @staticmethod
    def _check_name(name: str) -> None:
        if len(name) > treefs.NAME_MAX:                 # bug: not os.fsencode(name)
            raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), name[:20])


class EvictionLosesDirtyFS(flatfs.FlatFS):
    """Eviction drops the LRU page without writing it back when it was dirtied by a
    write that did not start on it (the dirty bit set only on a write's first page)."""

    def _write(self, node: flatfs.Node, off: int, data: bytes) -> None:
        bs = self.blocksize
        done = 0
        node.size = max(node.size, off + len(data))
        while done < len(data):
            idx, at = divmod(off + done, bs)
            take = min(bs - at, len(data) - done)
            page = self._page(node, idx)
            page.buf[at:at + take] = data[done:done + take]
            page.dirty = page.dirty or done == 0        # bug: only the first page
            done += take


class FsyncSkipsEmptyFS(syncfs.SyncFS):
    """fsync of an empty file saves nothing (``if f.data:``): a truncate to 0 is undone
    by a cut."""

    def fsync(self, fd: int) -> None:
        if fd in self.fds and not self._is_root(fd) and not self.fds[fd][0].data:
            self.saved_names = {n: g.ino for n, g in self.files.items()}
            return                                      # bug: empty data not saved
        super().fsync(fd)


class BufferReadOffByOne(bufnor.BufferedNor):
    """A read takes the last byte of each buffered page from the array."""

    def read(self, offset: int, length: int) -> bytearray:
        self._range(offset, length)
        out = bytearray(self.array[offset:offset + length])
        for idx in range(offset // bufnor.BUF_PAGE, -(-(offset + length) // bufnor.BUF_PAGE)):
            page = self.buffer.get(idx)
            if page is None:
                continue
            lo = max(offset, idx * bufnor.BUF_PAGE)
            hi = min(offset + length, (idx + 1) * bufnor.BUF_PAGE - 1)   # bug: - 1
            if lo < hi:
                base = idx * bufnor.BUF_PAGE
                out[lo - offset:hi - offset] = page[lo - base:hi - base]
        return out


class EraseKeepsCacheRam(ebram.EraseblockRam):
    """An erase of cached eraseblocks clears the medium but forgets a dirty cached copy
    only for the first eraseblock of the range."""

    def erase(self, offset: int, length: int) -> None:
        first = offset // self.erasesize
        cached = {n: v for n, v in self.cache.items() if n != first}
        super().erase(offset, length)
        for n, v in cached.items():                     # bug: the others come back
            if offset <= n * self.erasesize < offset + length:
                self.cache[n] = v


def tail(blocksize: int) -> TailOffByOneFS:
    return TailOffByOneFS(blocksize)


def zeros(blocksize: int) -> ZeroWriteSkippedFS:
    return ZeroWriteSkippedFS(blocksize)


def namechars(blocksize: int) -> NameCharsFS:
    return NameCharsFS(blocksize)


def evict(blocksize: int, root: str, cache_bytes: int = 32 << 20) -> EvictionLosesDirtyFS:
    return EvictionLosesDirtyFS(blocksize, cache_bytes)


def fsyncempty(blocksize: int) -> FsyncSkipsEmptyFS:
    return FsyncSkipsEmptyFS(blocksize)


def bufread(size: int, erasesize: int, readonly: bool = False) -> BufferReadOffByOne:
    return BufferReadOffByOne(size, erasesize, readonly)


def erasecache(size: int, erasesize: int, readonly: bool = False) -> EraseKeepsCacheRam:
    return EraseKeepsCacheRam(size, erasesize, readonly)
