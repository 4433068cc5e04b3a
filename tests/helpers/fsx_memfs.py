"""A small, obviously correct in-memory FileSystem: the healthy base the broken file
systems in ``fsx_broken.py`` wrap, and a fast target for the engine's own tests."""

from __future__ import annotations

import errno
import itertools
import os
import stat

from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.targets.capabilities import FS_FEATURES
from pytest_folio.targets.directory import check_mapped_range
from pytest_folio.targets.protocols import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
)

_FALLOC_FEATURE = {0: "fallocate", FALLOC_FL_PUNCH_HOLE: "punch_hole",
                   FALLOC_FL_ZERO_RANGE: "zero_range", FALLOC_FL_COLLAPSE_RANGE: "collapse_range",
                   FALLOC_FL_INSERT_RANGE: "insert_range"}


def _error(code: int, what: str) -> OSError:
    return OSError(code, f"{what}: {os.strerror(code)}")


class MemFS:
    """Files are bytearrays; a descriptor points at the file's bytearray (its inode)."""

    def __init__(self, blocksize: int = PAGE_SIZE,
                 features: frozenset[str] = FS_FEATURES) -> None:
        self.blocksize = blocksize
        self.features = frozenset(features)
        self.files: dict[str, bytearray] = {}
        self.dirs: set[str] = {""}
        self.fds: dict[int, bytearray] = {}
        self._next_fd = itertools.count(3)

    def _need(self, feature: str, what: str) -> None:
        if feature not in self.features:
            raise _error(errno.EOPNOTSUPP, what)

    def _file(self, fd: int) -> bytearray:
        try:
            return self.fds[fd]
        except KeyError:
            raise _error(errno.EBADF, f"fd {fd}") from None

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        data = self.files.get(path)
        if data is None:
            if not flags & os.O_CREAT:
                raise _error(errno.ENOENT, path)
            data = self.files[path] = bytearray()
        elif flags & os.O_TRUNC:
            data.clear()
        fd = next(self._next_fd)
        self.fds[fd] = data
        return fd

    def close(self, fd: int) -> None:
        self._file(fd)
        del self.fds[fd]

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        return bytes(self._file(fd)[offset:offset + n])

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        f = self._file(fd)
        if offset > len(f):
            f.extend(bytes(offset - len(f)))
        f[offset:offset + len(data)] = data
        return len(data)

    def ftruncate(self, fd: int, length: int) -> None:
        f = self._file(fd)
        if length < len(f):
            del f[length:]
        else:
            f.extend(bytes(length - len(f)))

    def _stat(self, size: int, mode: int) -> os.stat_result:
        return os.stat_result((mode, 0, 0, 1, 0, 0, size, 0, 0, 0),
                              {"st_blksize": self.blocksize,
                               "st_blocks": -(-size // 512)})

    def fstat(self, fd: int) -> os.stat_result:
        return self._stat(len(self._file(fd)), stat.S_IFREG | 0o644)

    def fsync(self, fd: int) -> None:
        self._file(fd)

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        f = self._file(fd)
        size, end = len(f), offset + length
        keep = bool(mode & FALLOC_FL_KEEP_SIZE)
        kind = mode & ~FALLOC_FL_KEEP_SIZE
        self._need(_FALLOC_FEATURE.get(kind, "?"), f"fallocate mode {mode:#x}")
        if kind == 0:
            if not keep and end > size:
                self.ftruncate(fd, end)
        elif kind == FALLOC_FL_PUNCH_HOLE and keep:
            f[offset:min(end, size)] = bytes(max(0, min(end, size) - offset))
        elif kind == FALLOC_FL_ZERO_RANGE:
            f[offset:min(end, size)] = bytes(max(0, min(end, size) - offset))
            if not keep and end > size:
                self.ftruncate(fd, end)
        elif kind in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE) and not keep:
            bs = self.blocksize
            if offset % bs or length % bs or length == 0:
                raise _error(errno.EINVAL, "fallocate: unaligned range")
            if kind == FALLOC_FL_COLLAPSE_RANGE:
                if end >= size:
                    raise _error(errno.EINVAL, "collapse range reaches EOF")
                del f[offset:end]
            else:
                if offset >= size:
                    raise _error(errno.EINVAL, "insert range at or past EOF")
                f[offset:offset] = bytes(length)
        else:
            raise _error(errno.EOPNOTSUPP, f"fallocate mode {mode:#x}")

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        self._need("copy_range", "copy_file_range")
        data = self.pread(src, count, offset_src)
        if data:
            self.pwrite(dst, data, offset_dst)
        return len(data)

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        self._need("mmap", "mmap")
        f = self._file(fd)
        check_mapped_range(offset, length, len(f))
        return bytes(f[offset:offset + length]).ljust(length, b"\0")

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        self._need("mmap", "mmap")
        f = self._file(fd)
        check_mapped_range(offset, len(data), len(f))
        keep = max(0, min(len(data), len(f) - offset))  # stores past EOF are not kept
        f[offset:offset + keep] = data[:keep]

    def unlink(self, path: str) -> None:
        if self.files.pop(path, None) is None:
            raise _error(errno.ENOENT, path)

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        if path in self.dirs or path in self.files:
            raise _error(errno.EEXIST, path)
        self.dirs.add(path)

    def rmdir(self, path: str) -> None:
        if path not in self.dirs:
            raise _error(errno.ENOENT, path)
        self.dirs.remove(path)

    def rename(self, src: str, dst: str) -> None:
        if src not in self.files:
            raise _error(errno.ENOENT, src)
        self.files[dst] = self.files.pop(src)

    def listdir(self, path: str) -> list[str]:
        prefix = f"{path.rstrip('/')}/" if path.strip("/") else ""
        names = {name[len(prefix):].split("/")[0] for name in [*self.files, *self.dirs]
                 if name and name.startswith(prefix)}
        return sorted(names)

    def stat(self, path: str) -> os.stat_result:
        if path in self.files:
            return self._stat(len(self.files[path]), stat.S_IFREG | 0o644)
        if path in self.dirs:
            return self._stat(0, stat.S_IFDIR | 0o755)
        raise _error(errno.ENOENT, path)
