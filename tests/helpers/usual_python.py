"""Correct targets written the way Python code usually is: the healthy ones of
``fsx_powercut`` and ``mtd_devices`` with only their answers' shapes changed.

Calls that have nothing to say return 0, True or the object itself; writes return the
count, as ``io`` writes do; reads return a bytearray or a memoryview of a fresh copy (a
snapshot, not a view into the cache). None of this is a storage bug, so the default run
must pass on them (``--folio-fs=tests.helpers.usual_python:UsualFS``,
``--folio-mtd=tests.helpers.usual_python:UsualMTD``).
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable
from typing import Any

from pytest_folio.linux.uapi import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
)
from pytest_folio.model.vfs import MAX_LFS_FILESIZE
from tests.helpers.fsx_cachedfs import Inode
from tests.helpers.fsx_powercut import PowerCutFS
from tests.helpers.mtd_devices import PowerCutMTD


class UsualFS(PowerCutFS):
    """A correct file system whose calls answer as Python code usually does."""

    def close(self, fd: int) -> int:  # type: ignore[override]
        super().close(fd)
        return 0

    def pread(self, fd: int, n: int, offset: int) -> bytearray:  # type: ignore[override]
        return bytearray(super().pread(fd, n, offset))

    def ftruncate(self, fd: int, length: int) -> UsualFS:  # type: ignore[override]
        super().ftruncate(fd, length)
        return self

    def fsync(self, fd: int) -> int:  # type: ignore[override]
        super().fsync(fd)
        return 0

    def fallocate(self, fd: int, mode: int, offset: int,  # type: ignore[override]
                  length: int) -> int:
        super().fallocate(fd, mode, offset, length)
        return 0

    def mmap_read(self, fd: int, offset: int,  # type: ignore[override]
                  length: int) -> memoryview:
        return memoryview(bytes(super().mmap_read(fd, offset, length)))

    def mmap_write(self, fd: int, offset: int, data: bytes) -> int:  # type: ignore[override]
        super().mmap_write(fd, offset, data)
        return len(data)

    def unlink(self, path: str) -> bool:  # type: ignore[override]
        super().unlink(path)
        return True

    def mkdir(self, path: str, mode: int = 0o755) -> int:  # type: ignore[override]
        super().mkdir(path, mode)
        return 0

    def rmdir(self, path: str) -> int:  # type: ignore[override]
        super().rmdir(path)
        return 0

    def rename(self, src: str, dst: str) -> str:  # type: ignore[override]
        super().rename(src, dst)
        return dst

    def drop_caches(self, path: str) -> int:  # type: ignore[override]
        super().drop_caches(path)
        return 0

    def power_cut(self) -> UsualFS:  # type: ignore[override]
        super().power_cut()
        return self

    def umount(self) -> int:  # type: ignore[override]
        super().umount()
        return 0


class UsualMTD(PowerCutMTD):
    """A correct flash device whose calls answer as Python code usually does."""

    def read(self, offset: int, length: int) -> bytearray:  # type: ignore[override]
        return bytearray(super().read(offset, length))

    def write(self, offset: int, data: bytes) -> int:  # type: ignore[override]
        super().write(offset, data)
        return len(data)

    def erase(self, offset: int, length: int) -> int:  # type: ignore[override]
        super().erase(offset, length)
        return 0

    def sync(self) -> int:  # type: ignore[override]
        super().sync()
        return 0

    def reopen(self) -> UsualMTD:  # type: ignore[override]
        super().reopen()
        return self

    def drop_caches(self) -> int:  # type: ignore[override]
        super().drop_caches()
        return 0

    def power_cut(self) -> UsualMTD:  # type: ignore[override]
        super().power_cut()
        return self

    def close(self) -> int:  # type: ignore[override]
        super().close()
        return 0


class MemoryviewMTD(UsualMTD):
    """Reads answer a memoryview of a fresh copy: a snapshot, as good as bytes."""

    def read(self, offset: int, length: int) -> memoryview:  # type: ignore[override]
        return memoryview(bytes(super().read(offset, length)))


# the fallocate modes tmpfs answers EOPNOTSUPP for (shmem_fallocate), after the VFS's checks
_TMPFS_LACKS = (FALLOC_FL_ZERO_RANGE, FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE)


def _fallocate_arguments(fs: UsualFS, fd: int, offset: int, length: int) -> None:
    """vfs_fallocate's first checks: a descriptor (EBADF), a range (EINVAL)."""
    fs.fstat(fd)
    if offset < 0 or length <= 0:
        raise OSError(errno.EINVAL, "fallocate: bad offset or length")


def _fallocate_target(fs: UsualFS, fd: int, offset: int, length: int) -> None:
    """vfs_fallocate's checks after the mode's: open for writing (EBADF), the range
    within the largest file size (EFBIG)."""
    fs.pwrite(fd, b"", 0)
    if offset + length > MAX_LFS_FILESIZE:
        raise OSError(errno.EFBIG, "fallocate: past the maximum file size")


class PosixChoicesFS:
    """A correct file system that takes the choices Linux's man pages and POSIX leave
    open, and lists no ``features``: its fallocate knows the modes tmpfs knows and
    answers EOPNOTSUPP for the others (as tmpfs does, after vfs_fallocate's checks), a
    non-empty directory is EEXIST for rmdir and rename (rmdir(2), rename(2)), and
    ftruncate of a descriptor not open for writing is EBADF (truncate(2)). UsualFS
    underneath, behind ``__getattr__``, so that its ``features`` do not show."""

    def __init__(self, blocksize: int = 4096, root: str | None = None, *,
                 cache_bytes: int = 1 << 20) -> None:
        self._fs = UsualFS(blocksize, root, cache_bytes=cache_bytes)

    def __getattr__(self, name: str) -> Any:
        if name == "features":
            raise AttributeError(name)
        return getattr(self._fs, name)

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        op = mode & ~FALLOC_FL_KEEP_SIZE
        if op in _TMPFS_LACKS:
            _fallocate_arguments(self._fs, fd, offset, length)
            if op != FALLOC_FL_ZERO_RANGE and mode & FALLOC_FL_KEEP_SIZE:
                raise OSError(errno.EOPNOTSUPP, "fallocate: mode with KEEP_SIZE")
            _fallocate_target(self._fs, fd, offset, length)
            raise OSError(errno.EOPNOTSUPP, "fallocate: mode not supported")
        self._fs.fallocate(fd, mode, offset, length)

    def rmdir(self, path: str) -> None:
        try:
            self._fs.rmdir(path)
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
            raise OSError(errno.EEXIST, f"rmdir {path!r}: not empty") from None

    def rename(self, src: str, dst: str) -> None:
        try:
            self._fs.rename(src, dst)
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
            raise OSError(errno.EEXIST, f"rename to {dst!r}: not empty") from None

    def ftruncate(self, fd: int, length: int) -> None:
        try:
            self._fs.ftruncate(fd, length)
        except OSError as exc:
            if exc.errno != errno.EINVAL or length < 0:
                raise
            raise OSError(errno.EBADF, "ftruncate: not open for writing") from None


# the errnos Python names by a class of their own (PEP 3151)
_ERROR_CLASSES: dict[int, type[OSError]] = {
    errno.ENOENT: FileNotFoundError, errno.EEXIST: FileExistsError,
    errno.EISDIR: IsADirectoryError, errno.ENOTDIR: NotADirectoryError,
    errno.EACCES: PermissionError}


class UsualErrorsFS:
    """A correct file system whose errors are raised the usual Python way, without an
    errno: by their class (``raise FileNotFoundError(path)``), or ``OSError(errno.X)``
    for an errno without a class of its own; unlink of a directory is a
    ``PermissionError``, POSIX's EPERM. UsualFS underneath, behind ``__getattr__``."""

    def __init__(self, blocksize: int = 4096, root: str | None = None, *,
                 cache_bytes: int = 1 << 20) -> None:
        self._fs = UsualFS(blocksize, root, cache_bytes=cache_bytes)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._fs, name)
        return self._raising_usually(name, attr) if callable(attr) else attr

    @staticmethod
    def _raising_usually(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(call)
        def raising(*args: Any, **kwargs: Any) -> Any:
            try:
                return call(*args, **kwargs)
            except OSError as exc:
                what = f"{name}{args!r}"[:80]
                if name == "unlink" and exc.errno == errno.EISDIR:
                    raise PermissionError(what) from None
                cls = _ERROR_CLASSES.get(exc.errno or 0)
                raise (cls(what) if cls else OSError(exc.errno)) from None
        return raising


class NoPreallocationFS(UsualFS):
    """A correct file system that cannot reserve blocks: fallocate with KEEP_SIZE
    checks its arguments as vfs_fallocate does and then allocates nothing, as OpenZFS's
    zpl_fallocate does (copy-on-write and snapshots make a reservation impossible), so
    st_blocks stays as it was."""

    def fallocate(self, fd: int, mode: int, offset: int,  # type: ignore[override]
                  length: int) -> int:
        if mode != FALLOC_FL_KEEP_SIZE:
            return super().fallocate(fd, mode, offset, length)
        _fallocate_arguments(self, fd, offset, length)
        _fallocate_target(self, fd, offset, length)
        return 0


class ShortStatFS(UsualFS):
    """A correct file system whose stat answers are built from ten fields, the short
    way (``os.stat_result((mode, ..., size, ...))``): st_blocks and st_blksize read as
    None, as on a system whose stat has no such fields."""

    def fstat(self, fd: int) -> os.stat_result:
        return os.stat_result(tuple(super().fstat(fd))[:10])

    def stat(self, path: str) -> os.stat_result:
        return os.stat_result(tuple(super().stat(path))[:10])


class DirectoryFsyncFS(UsualFS):
    """A correct file system whose fsync keeps to what fsync(2) promises, as ext2's
    does: a file's fsync makes its data and size durable, and its name becomes durable
    with an fsync of its directory ("an explicit fsync() on a file descriptor for the
    directory is also needed")."""

    def commit(self, inode: Inode) -> None:
        if inode.is_dir:
            super().commit(inode)
        else:
            self.disk_size[inode.ino] = inode.size


# the modes vfs_fallocate lets through to the file system (the rest it refuses first)
_VFS_MODES = (0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
              FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
              FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE)


class PassthroughFallocateFS(PosixChoicesFS):
    """A correct file system whose fallocate is libfuse's passthrough's: it allocates
    with mode 0 and answers EOPNOTSUPP for every other mode (KEEP_SIZE included), after
    the VFS's checks; it lists no ``features``."""

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        if mode == 0:
            self._fs.fallocate(fd, mode, offset, length)
            return
        _fallocate_arguments(self._fs, fd, offset, length)
        if mode in _VFS_MODES:
            _fallocate_target(self._fs, fd, offset, length)
        raise OSError(errno.EOPNOTSUPP, "fallocate: only mode 0")


class NoDirectoryFsyncFS(UsualFS):
    """A correct file system whose file fsync commits the name too (a journal), and
    whose directories have no fsync: fsync of one answers EINVAL, as vfs_fsync_range
    does for a file system without ->fsync."""

    def fsync(self, fd: int) -> int:  # type: ignore[override]
        if self.file(fd).inode.is_dir:
            raise OSError(errno.EINVAL, "fsync: directories cannot be synced")
        return super().fsync(fd)
