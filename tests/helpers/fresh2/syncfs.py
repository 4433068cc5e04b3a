"""A flat file system (every name in the root, no directories) whose files are
bytearrays, with a power cut that keeps only what fsync saved: fsync stores the file's
bytes and size and commits the whole namespace as it is then (a journal commit), and
nothing else ever reaches the "disk". No ordered-mode promise: a file never fsync'd
comes back empty after a cut, whatever its size was committed as. Mapped I/O and
fallocate (allocate and keep-size only; listed in ``features``, as a target with
power_cut() must). Errors carry only their errno (``OSError(errno.EBADF)``) or are
built the long way for names; reads answer a memoryview of a copy.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat

NAME_MAX = 255
S_MAXBYTES = 1 << 30            # files are one bytearray in memory
MAX_LFS = (1 << 63) - 1
PAGE = 4096
FALLOC_FL_KEEP_SIZE = 1


class File:
    def __init__(self, ino: int, data: bytes = b"") -> None:
        self.ino = ino
        self.data = bytearray(data)


class SyncFS:
    features = frozenset({"mmap", "fallocate"})

    def __init__(self, blocksize: int) -> None:
        self.blocksize = blocksize
        self.inos = itertools.count(1)
        self.files: dict[str, File] = {}
        self.fds: dict[int, tuple[File, int]] = {}
        # the disk: what fsync saved
        self.saved: dict[int, bytes] = {}
        self.saved_names: dict[str, int] = {}

    def _name(self, path: str, create: bool = False) -> tuple[str, bool]:
        slash = path.endswith("/")
        name = path.strip("/")
        if "/" in name:
            # no directories: anything on the way is a file or nothing
            first = name.split("/")[0]
            if len(os.fsencode(first)) > NAME_MAX:
                raise OSError(errno.ENAMETOOLONG)
            if first in self.files:
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if name in ("", ".", ".."):
            raise OSError(errno.EISDIR if create else errno.EBUSY)
        if len(os.fsencode(name)) > NAME_MAX:
            raise OSError(errno.ENAMETOOLONG)
        return name, slash

    def _get(self, fd: int, write: bool = False, read: bool = False) -> File:
        if fd not in self.fds:
            raise OSError(errno.EBADF)
        f, flags = self.fds[fd]
        acc = flags & os.O_ACCMODE
        if (write and acc == os.O_RDONLY) or (read and acc == os.O_WRONLY):
            raise OSError(errno.EBADF)
        return f

    def _root_open(self, path: str, flags: int) -> int:
        if flags & os.O_CREAT:
            raise OSError(errno.EISDIR)
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            raise OSError(errno.EISDIR)
        fd = max(self.fds, default=9) + 1
        self.fds[fd] = (File(0), -1)            # the root directory: flags -1
        return fd

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if flags & os.O_CREAT and flags & os.O_DIRECTORY:
            raise OSError(errno.EINVAL)
        if path.strip("/") in ("", "."):
            return self._root_open(path, flags)
        name, slash = self._name(path, create=bool(flags & os.O_CREAT))
        if flags & os.O_CREAT and slash:
            raise OSError(errno.EISDIR)
        f = self.files.get(name)
        if f is None:
            if not flags & os.O_CREAT:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
            f = self.files[name] = File(next(self.inos))
        elif flags & os.O_CREAT and flags & os.O_EXCL:
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), path)
        elif flags & os.O_DIRECTORY or slash:
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        if flags & os.O_TRUNC:
            del f.data[:]
        fd = max(self.fds, default=9) + 1
        self.fds[fd] = (f, flags)
        return fd

    def _is_root(self, fd: int) -> bool:
        return self.fds[fd][1] == -1

    def close(self, fd: int) -> None:
        if self.fds.pop(fd, None) is None:
            raise OSError(errno.EBADF)

    def pread(self, fd: int, n: int, offset: int) -> memoryview:
        if offset < 0:
            raise OSError(errno.EINVAL)
        if fd in self.fds and self._is_root(fd):
            if offset + n > MAX_LFS:
                raise OSError(errno.EINVAL)
            raise OSError(errno.EISDIR)
        f = self._get(fd, read=True)
        if offset + n > MAX_LFS:
            raise OSError(errno.EINVAL)
        return memoryview(bytes(f.data[offset:offset + n]))

    def pwrite(self, fd: int, data: bytes, offset: int) -> None:
        if offset < 0:
            raise OSError(errno.EINVAL)
        if fd in self.fds and self._is_root(fd):
            raise OSError(errno.EBADF)
        f = self._get(fd, write=True)
        if offset + len(data) > MAX_LFS:
            raise OSError(errno.EINVAL)
        if not data:
            return
        if self.fds[fd][1] & os.O_APPEND:
            offset = len(f.data)
        if offset >= S_MAXBYTES:
            raise OSError(errno.EFBIG)
        data = data[:S_MAXBYTES - offset]
        if offset > len(f.data):
            f.data.extend(bytes(offset - len(f.data)))
        f.data[offset:offset + len(data)] = data

    def ftruncate(self, fd: int, length: int) -> None:
        if length < 0:
            raise OSError(errno.EINVAL)
        if fd in self.fds and self._is_root(fd):
            raise OSError(errno.EINVAL)
        if fd not in self.fds:
            raise OSError(errno.EBADF)
        f, flags = self.fds[fd]
        if flags & os.O_ACCMODE == os.O_RDONLY:
            raise OSError(errno.EINVAL)
        if length > S_MAXBYTES:
            raise OSError(errno.EFBIG)
        if length < len(f.data):
            del f.data[length:]
        else:
            f.data.extend(bytes(length - len(f.data)))

    def _stat(self, f: File | None) -> os.stat_result:
        if f is None:
            return os.stat_result((stat.S_IFDIR | 0o755, 0, 0, 2, 0, 0, 0, 0, 0, 0))
        size = len(f.data)
        return os.stat_result((stat.S_IFREG | 0o600, f.ino, 0, 1, 0, 0, size, 0, 0, 0),
                              {"st_blocks": (size + 511) // 512, "st_blksize": PAGE})

    def fstat(self, fd: int) -> os.stat_result:
        if fd not in self.fds:
            raise OSError(errno.EBADF)
        return self._stat(None if self._is_root(fd) else self.fds[fd][0])

    def stat(self, path: str) -> os.stat_result:
        if path.strip("/") in ("", "."):
            return self._stat(None)
        name, slash = self._name(path)
        if name not in self.files:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if slash:
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        return self._stat(self.files[name])

    def fsync(self, fd: int) -> None:
        if fd not in self.fds:
            raise OSError(errno.EBADF)
        if self._is_root(fd):
            self.saved_names = {n: f.ino for n, f in self.files.items()}
            return
        f = self.fds[fd][0]
        self.saved[f.ino] = bytes(f.data)
        # the journal commit: every name as it is now
        self.saved_names = {n: g.ino for n, g in self.files.items()}
        live = set(self.saved_names.values())
        self.saved = {ino: d for ino, d in self.saved.items() if ino in live}

    def power_cut(self) -> None:
        self.fds.clear()
        self.files = {name: File(ino, self.saved.get(ino, b""))
                      for name, ino in self.saved_names.items()}

    # -- mapped I/O --------------------------------------------------------------------
    def _mapping(self, fd: int, offset: int, length: int, write: bool) -> File:
        if fd not in self.fds:
            raise OSError(errno.EBADF)
        first = offset - offset % PAGE
        span = -(-(offset + length - first) // PAGE) * PAGE
        if span > MAX_LFS or (offset % (1 << 64)) // PAGE > (MAX_LFS - span) // PAGE:
            raise OSError(errno.EOVERFLOW)
        if self._is_root(fd):
            raise OSError(errno.EACCES if write else errno.ENODEV)
        f, flags = self.fds[fd]
        acc = flags & os.O_ACCMODE
        if acc == os.O_WRONLY or (write and acc != os.O_RDWR):
            raise OSError(errno.EACCES)
        if offset + length > -(-len(f.data) // PAGE) * PAGE:
            raise OSError(errno.EFAULT)
        return f

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        if length == 0:
            if fd not in self.fds:
                raise OSError(errno.EBADF)
            return b""
        f = self._mapping(fd, offset, length, write=False)
        got = f.data[offset:offset + length]
        return bytes(got) + bytes(length - len(got))

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        if not data:
            if fd not in self.fds:
                raise OSError(errno.EBADF)
            return
        f = self._mapping(fd, offset, len(data), write=True)
        keep = max(0, min(len(data), len(f.data) - offset))
        f.data[offset:offset + keep] = data[:keep]

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        if fd not in self.fds:
            raise OSError(errno.EBADF)
        if offset < 0 or length <= 0:
            raise OSError(errno.EINVAL)
        if mode & ~0x7f:
            raise OSError(errno.EOPNOTSUPP)
        kind = mode & ~FALLOC_FL_KEEP_SIZE
        if kind not in (0, 2, 8, 0x10, 0x20, 0x40) or (kind == 2 and not mode & 1) or (
                kind in (8, 0x20) and mode & 1):
            raise OSError(errno.EOPNOTSUPP)
        f, flags = self.fds[fd]
        if self._is_root(fd):
            raise OSError(errno.EBADF)
        if flags & os.O_ACCMODE == os.O_RDONLY:
            raise OSError(errno.EBADF)
        if offset + length > S_MAXBYTES:
            raise OSError(errno.EFBIG)
        if kind:
            raise OSError(errno.EOPNOTSUPP)
        if not mode & FALLOC_FL_KEEP_SIZE and offset + length > len(f.data):
            f.data.extend(bytes(offset + length - len(f.data)))

    # -- names -------------------------------------------------------------------------
    def unlink(self, path: str) -> None:
        if path.strip("/") in ("", ".", ".."):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        name, slash = self._name(path)
        if name not in self.files:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if slash:
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        del self.files[name]

    def rename(self, src: str, dst: str) -> None:
        for p in (src, dst):
            if "/" in p.strip("/"):
                self._name(p)
        if src.strip("/") in ("", ".", "..") or dst.strip("/") in ("", ".", ".."):
            raise OSError(errno.EBUSY)
        old, oslash = self._name(src)
        if old not in self.files:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), src)
        new, nslash = self._name(dst)
        if oslash or nslash:
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), src)
        if old != new:
            self.files[new] = self.files.pop(old)

    def listdir(self, path: str) -> tuple[str, ...]:
        if path.strip("/") not in ("", "."):
            self.stat(path)
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
        return tuple(sorted(self.files))


def factory(blocksize: int) -> SyncFS:
    return SyncFS(blocksize)
