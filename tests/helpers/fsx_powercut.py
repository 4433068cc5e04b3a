"""A file system that survives power cuts, and file systems whose only bug shows after
one (``--folio-fs=tests.helpers.fsx_powercut:NAME``).

:class:`PowerCutFS` is :class:`~fsx_cachedfs.CachedFS` with a disk under it: each file's
blocks are on the disk once written back (by fsync, eviction or the last close); the
directory and the sizes are on the disk as of the last commit, which every fsync makes
(data first, then the metadata, as a journal in ordered mode does). A truncate that
shrinks a file commits the new size at once, before its blocks are freed, and a file
that loses its last name keeps its blocks until a commit says so, so a cut never finds
a size without its data. :meth:`PowerCutFS.power_cut` keeps only the disk: the cache,
the open files and every uncommitted name and size are gone; blocks past a file's size
on the disk are freed and the rest of its last block zeroed, as recovery does.

The broken ones change one method each (the line marked "bug:"); every other suite
passes on them, since they differ only in what is on the disk at a cut.
"""

from __future__ import annotations

from pytest_folio.model.constants import PAGE_SIZE
from tests.helpers.fsx_cachedfs import CachedFS, Folio, Inode


class PowerCutFS(CachedFS):
    """CachedFS on a disk that keeps what was written back and committed."""

    def __init__(self, blocksize: int = PAGE_SIZE, root: str | None = None, *,
                 cache_bytes: int = 1 << 20) -> None:
        super().__init__(blocksize, root, cache_bytes=cache_bytes)
        self.power_cut_unit = blocksize          # a folio is one block, written whole
        self.disk_names: dict[str, Inode] = dict(self.names)
        self.disk_size: dict[int, int] = {}

    # -- the disk ----------------------------------------------------------------------
    def commit(self, inode: Inode) -> None:
        """A journal commit: the directory as it is now, and ``inode``'s size; files that
        lost their last name since the last commit give their blocks back."""
        self.disk_size[inode.ino] = inode.size
        gone = set(self.disk_names.values()) - set(self.names.values())
        self.disk_names = dict(self.names)
        for old in gone:
            self.iput(old)

    def on_disk(self, inode: Inode) -> bool:
        return any(i is inode for i in self.disk_names.values())

    def iput(self, inode: Inode) -> None:
        if not self.on_disk(inode):          # its blocks wait for the commit
            super().iput(inode)

    def truncate(self, inode: Inode, length: int) -> None:
        if length < inode.size:              # the smaller size is on the disk first
            self.disk_size[inode.ino] = min(self.disk_size.get(inode.ino, 0), length)
        super().truncate(inode, length)

    def fsync(self, fd: int) -> None:
        super().fsync(fd)                    # the data, then the metadata
        self.commit(self.file(fd).inode)

    def power_cut(self) -> None:
        """Only the disk is left (see the module docstring)."""
        self.cache.clear()
        self.fds.clear()
        self.dcache.clear()
        self.names = dict(self.disk_names)
        bs = self.blocksize
        for inode in self.names.values():
            inode.opencount = 0
            if inode.is_dir:
                continue
            inode.nlink = 1
            size = inode.size = self.disk_size.get(inode.ino, 0)
            for index in [i for i in inode.store if i * bs >= size]:
                del inode.store[index]
            tail = inode.store.get(size // bs)
            if tail is not None:
                tail[size % bs:] = bytes(bs - size % bs)


class WritebackModeFS(PowerCutFS):
    """A correct file system without ordered mode's promise, as ext2 or ext4 with
    ``data=writeback`` are: a commit writes every file's size and the directory, but only
    the fsync'd file's data, so a file extended since its own fsync may be found at its
    new size with zeros where its data had not reached the disk. fsync's rules allow it,
    ordered mode's do not."""

    def commit(self, inode: Inode) -> None:
        super().commit(inode)
        for other in self.names.values():        # the journal holds every inode
            if not other.is_dir:
                self.disk_size[other.ino] = other.size


class FsyncCommitsWithoutTheData(PowerCutFS):
    """fsync commits the size and the names but leaves the data in the cache (dirty: it
    reaches the disk at eviction or the last close): an fdatasync/fsync mix-up."""

    def fsync(self, fd: int) -> None:
        self.commit(self.file(fd).inode)     # bug: no super().fsync(fd) first


class SizeBeforeData(PowerCutFS):
    """A write that extends a file logs the new size at once, while the data waits in
    the cache: after a cut the file is as long as the write made it, with zeros in it.
    A bug of a file system that promises ordered mode; fsync's rules allow it."""

    def extend(self, inode: Inode, end: int) -> None:
        super().extend(inode, end)
        self.disk_size[inode.ino] = inode.size      # bug: the size before its data


class FsyncLeavesTheNameBehind(PowerCutFS):
    """fsync writes the data and the size but not the directory: a new file that was
    fsync'd is gone after a cut."""

    def commit(self, inode: Inode) -> None:
        self.disk_size[inode.ino] = inode.size      # bug: the directory is not committed


class ReclaimForgetsTheWriteback(PowerCutFS):
    """Reclaim frees a dirty folio without writing it back: what it evicted before the
    next fsync is neither in the cache nor on the disk."""

    def reclaim(self, folio: Folio) -> None:
        del self.cache[self.key(folio.inode, folio.index)]   # bug: no writeback first


class WritebackDropsTheFilesLastByte(PowerCutFS):
    """Writeback of the folio that holds a file's last byte stores one byte short (the
    end computed from ``i_size - 1``): the byte is right in the cache, and what the disk
    has there (zero, or an older byte) after eviction or a power cut."""

    def writeback(self, folio: Folio) -> None:
        inode, bs = folio.inode, self.blocksize
        last = inode.size - 1 - folio.index * bs
        old = inode.store.get(folio.index)
        super().writeback(folio)
        if 0 <= last < bs:                               # bug: the last byte not copied
            inode.store[folio.index][last] = old[last] if old is not None else 0


class FsyncStopsAt1MiB(PowerCutFS):
    """fsync writes back the file's dirty folios of its first MiB only (a writeback range
    of 1 MiB where the whole file was meant), then commits the size: the rest is lost
    at a power cut unless eviction saved it."""

    def fsync(self, fd: int) -> None:
        inode = self.file(fd).inode
        for folio in self.cached(inode):
            if folio.dirty and folio.index * self.blocksize < 1 << 20:   # bug
                self.writeback(folio)
        self.commit(inode)


class MappedStoresNeverDirty(PowerCutFS):
    """Stores through a shared mapping never mark the folio dirty (no page_mkwrite):
    they read back from the cache, and neither fsync nor eviction writes them out."""

    def page_mkwrite(self, folio: Folio) -> None:
        return None                                       # bug: folio not marked dirty


class FsyncOfAnEmptyFileCommitsNothing(PowerCutFS):
    """fsync returns at once for an empty file (``if not inode.size: return``): what
    else changed it since its last commit (a rename, a new name) is not committed, so a
    file emptied, renamed and fsync'd is found under its old name after a cut."""

    def fsync(self, fd: int) -> None:
        if self.file(fd).inode.size == 0:
            return                                  # bug: nothing to write, nothing commits
        super().fsync(fd)


POWER_CUT_BUGS = [FsyncCommitsWithoutTheData, FsyncLeavesTheNameBehind]
"""Bugs that break fsync's promise: caught under either rules."""
ORDERED_BUGS = [SizeBeforeData]
"""Bugs that break only ordered mode's promise: caught under ``ordered`` rules."""
DURABILITY_BUGS = [ReclaimForgetsTheWriteback, WritebackDropsTheFilesLastByte,
                   FsyncStopsAt1MiB, MappedStoresNeverDirty, FsyncOfAnEmptyFileCommitsNothing]
"""Data lost on its way to the disk: the power-cut suites catch each (other suites may
too)."""
