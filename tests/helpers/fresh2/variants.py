"""Variants of the fresh file systems, each one choice a user might make differently."""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

from tests.helpers.fresh2.bufnor import BufferedNor
from tests.helpers.fresh2.ebram import EraseblockRam
from tests.helpers.fresh2.flatfs import FlatFS
from tests.helpers.fresh2.syncfs import SyncFS
from tests.helpers.fresh2.treefs import Dir, Inode, TreeFS


class ProbedTreeFS(TreeFS):
    """TreeFS without a ``features`` list: the kit probes its fallocate modes."""

    features = None  # type: ignore[assignment]

    def __getattribute__(self, name: str) -> Any:
        if name == "features":
            raise AttributeError(name)
        return super().__getattribute__(name)


class NoBlocksTreeFS(TreeFS):
    """stat results built the short way, os.stat_result of ten fields: no st_blocks or
    st_blksize (they read as None), as many simple FUSE file systems leave them."""

    def _stat(self, node: Inode | Dir) -> os.stat_result:
        if isinstance(node, Dir):
            return os.stat_result((stat.S_IFDIR | 0o755, 0, 0, 2, 0, 0, 0, 0, 0, 0))
        return os.stat_result((stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, node.size, 0, 0, 0))


def probed(blocksize: int) -> ProbedTreeFS:
    return ProbedTreeFS(blocksize)


def noblocks(blocksize: int) -> NoBlocksTreeFS:
    return NoBlocksTreeFS(blocksize)


def kwargs_flat(**kwargs: Any) -> FlatFS:
    """A factory that takes everything as keywords (so no cache_bytes is promised)."""
    return FlatFS(kwargs["blocksize"])


class PosixFsyncFS(SyncFS):
    """fsync as fsync(2) promises it and no more: a file's fsync makes its data and size
    durable; its name becomes durable with an fsync of the directory (the root, here),
    as the man page asks ("an explicit fsync() on a file descriptor for the directory
    is also needed"), as ext2 does."""

    def fsync(self, fd: int) -> None:
        if fd not in self.fds:
            raise OSError(errno.EBADF)
        if self._is_root(fd):
            self.saved_names = {n: f.ino for n, f in self.files.items()}
            live = set(self.saved_names.values())
            self.saved = {ino: d for ino, d in self.saved.items() if ino in live}
            return
        f = self.fds[fd][0]
        self.saved[f.ino] = bytes(f.data)


def posix_fsync(blocksize: int) -> PosixFsyncFS:
    return PosixFsyncFS(blocksize)


class ErrnoOnlyProbedFS(ProbedTreeFS):
    """No features list, and the modes it lacks answer ``OSError(errno.EOPNOTSUPP)``,
    the errno as the only argument (errno attribute None)."""

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        try:
            super().fallocate(fd, mode, offset, length)
        except OSError as exc:
            if exc.errno == errno.EOPNOTSUPP:
                raise OSError(errno.EOPNOTSUPP) from None
            raise


class NoKeepSizeFS(ProbedTreeFS):
    """No features list; fallocate allocates (mode 0) and punches holes but answers
    EOPNOTSUPP for KEEP_SIZE alone, after the VFS's checks (a file system that cannot
    preallocate past EOF)."""

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        if mode == 1:
            super().fallocate(fd, 1 | 8, offset, length)   # the VFS's checks, then
        super().fallocate(fd, mode, offset, length)


def errno_only(blocksize: int) -> ErrnoOnlyProbedFS:
    return ErrnoOnlyProbedFS(blocksize)


def no_keep_size(blocksize: int) -> NoKeepSizeFS:
    return NoKeepSizeFS(blocksize)


class RangeFirstRam(EraseblockRam):
    """Writes check the range before MTD_WRITEABLE, as mtd_write did before Linux 4.17
    (mtd_write_oob now checks EROFS first)."""

    def write(self, offset: int, data: bytes) -> None:
        self._check(offset, len(data))
        super().write(offset, data)


def range_first(size: int, erasesize: int, readonly: bool = False) -> RangeFirstRam:
    return RangeFirstRam(size, erasesize, readonly)


class ShortCopyTreeFS(TreeFS):
    """copy_file_range copies at most 64 KiB a call (copy_file_range(2): "may copy
    fewer bytes than requested"); open hands out descriptors from 0; listdir answers a
    generator."""

    def __init__(self, blocksize: int = 4096) -> None:
        super().__init__(blocksize)
        self._next = 0

    max_copy = 64 << 10

    def listdir(self, path: str) -> Any:
        return (name for name in super().listdir(path))


def short_copy(blocksize: int) -> ShortCopyTreeFS:
    return ShortCopyTreeFS(blocksize)


class SmallBufferNor(BufferedNor):
    """A NOR whose controller programs 512-byte write-buffer lines (CFI NOR flash buffers
    32 to 512 bytes a program operation): a power cut lands any prefix of the buffered
    lines, so a 4 KiB page can be part old and part new."""

    def __init__(self, size: int, erasesize: int, readonly: bool = False) -> None:
        super().__init__(size, erasesize, readonly)
        self.lines = 512
        self.power_cut_unit = 512       # what a cut leaves all old or all new

    def power_cut(self) -> None:
        self.cuts += 1
        lines = [(idx, at) for idx in self.buffer for at in range(0, 4096, self.lines)]
        done = self.cuts * 7 % (len(lines) + 1)
        for idx, at in lines[:done]:
            start = idx * 4096 + at
            if start < self.size:
                self.array[start:start + self.lines] = self.buffer[idx][at:at + self.lines]
        self.buffer.clear()


def small_buffer_nor(size: int, erasesize: int, readonly: bool = False) -> SmallBufferNor:
    return SmallBufferNor(size, erasesize, readonly)
