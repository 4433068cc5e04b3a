"""A user's own file system: files are bytearrays in a dict, directories are sets of names.

It implements pytest-folio's FileSystem protocol (pytest_folio.targets.protocols), so
every file-system fixture and suite can run against it with
``--folio-fs dictfs:factory``. It implements the protocol's core, mapped I/O and
directories, and leaves fallocate and copy_file_range out: the suites skip what needs
them. A rename of a directory answers EOPNOTSUPP, as Linux does for what a file system
cannot do in one case. A descriptor holds the file's bytearray (its inode),
not its name, so a file renamed over or unlinked while open keeps its data for that
descriptor, as on Linux.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field

PAGE_SIZE = 4096


def _err(code: int, what: str) -> OSError:
    return OSError(code, f"{what}: {os.strerror(code)}")


@dataclass
class _Open:
    path: str
    flags: int
    data: bytearray | None      # the file itself (its inode): None for a directory


@dataclass
class DictFS:
    """Paths are normalised to 'a/b' (no leading slash); '' is the root directory."""

    blocksize: int = PAGE_SIZE
    files: dict[str, bytearray] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=lambda: {""})
    fds: dict[int, _Open] = field(default_factory=dict)

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def _norm(path: str) -> str:
        return "/".join(p for p in path.split("/") if p not in ("", "."))

    def _parent_ok(self, path: str) -> None:
        parent = path.rpartition("/")[0]
        if parent in self.files:
            raise _err(errno.ENOTDIR, path)
        if parent not in self.dirs:
            raise _err(errno.ENOENT, path)

    def _data(self, fd: int, *, write: bool = False) -> bytearray:
        f = self.fds.get(fd)
        if f is None:
            raise _err(errno.EBADF, f"fd {fd}")
        acc = f.flags & os.O_ACCMODE
        if (write and acc == os.O_RDONLY) or (not write and acc == os.O_WRONLY):
            raise _err(errno.EBADF, f"fd {fd}")
        if f.data is None:
            raise _err(errno.EISDIR, f.path)
        return f.data

    # -- the protocol -----------------------------------------------------------------------
    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        path = self._norm(path)
        self._parent_ok(path)
        if path in self.dirs:
            if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_CREAT:
                raise _err(errno.EISDIR, path)
        elif path in self.files:
            if flags & os.O_CREAT and flags & os.O_EXCL:
                raise _err(errno.EEXIST, path)
            if flags & os.O_TRUNC:
                self.files[path].clear()
        elif flags & os.O_CREAT:
            self.files[path] = bytearray()
        else:
            raise _err(errno.ENOENT, path)
        fd = max(self.fds, default=2) + 1
        self.fds[fd] = _Open(path, flags, self.files.get(path))
        return fd

    def close(self, fd: int) -> None:
        if self.fds.pop(fd, None) is None:
            raise _err(errno.EBADF, f"fd {fd}")

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        if offset < 0 or n < 0:
            raise _err(errno.EINVAL, "pread")
        return bytes(self._data(fd)[offset:offset + n])

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        buf = self._data(fd, write=True)
        if offset < 0:
            raise _err(errno.EINVAL, "pwrite")
        if self.fds[fd].flags & os.O_APPEND:
            offset = len(buf)
        if data and offset > len(buf):
            buf.extend(bytes(offset - len(buf)))
        buf[offset:offset + len(data)] = data
        return len(data)

    def ftruncate(self, fd: int, length: int) -> None:
        f = self.fds.get(fd)
        if f is None:
            raise _err(errno.EBADF, f"fd {fd}")
        # Linux: EINVAL for a negative length, a descriptor not open for writing, or
        # anything but a regular file
        if length < 0 or f.flags & os.O_ACCMODE == os.O_RDONLY or f.data is None:
            raise _err(errno.EINVAL, "ftruncate")
        buf = f.data
        if length < len(buf):
            del buf[length:]
        else:
            buf.extend(bytes(length - len(buf)))

    def _stat(self, data: bytearray | None) -> os.stat_result:
        if data is None:
            return os.stat_result((stat.S_IFDIR | 0o755, 0, 0, 2, 0, 0, 0, 0, 0, 0))
        size = len(data)
        blocks = -(-size // self.blocksize) * self.blocksize // 512
        return os.stat_result((stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, size, 0, 0, 0),
                              {"st_blksize": self.blocksize, "st_blocks": blocks})

    def fstat(self, fd: int) -> os.stat_result:
        if fd not in self.fds:
            raise _err(errno.EBADF, f"fd {fd}")
        return self._stat(self.fds[fd].data)

    def fsync(self, fd: int) -> None:
        if fd not in self.fds:
            raise _err(errno.EBADF, f"fd {fd}")

    def _mapped(self, fd: int, offset: int, length: int, write: bool) -> bytearray:
        buf = self._data(fd, write=write)
        limit = -(-len(buf) // PAGE_SIZE) * PAGE_SIZE   # the page holding EOF ends here
        if offset < 0 or offset + length > limit:
            raise _err(errno.EFAULT, "mapped access past the page holding EOF")
        return buf

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        buf = self._mapped(fd, offset, length, write=False)
        data = bytes(buf[offset:offset + length])
        return data + bytes(length - len(data))           # zeroes past EOF

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        buf = self._mapped(fd, offset, len(data), write=True)
        inside = max(0, min(len(data), len(buf) - offset))  # never extends the file
        buf[offset:offset + inside] = data[:inside]

    def unlink(self, path: str) -> None:
        path = self._norm(path)
        if path in self.dirs:
            raise _err(errno.EISDIR, path)
        if self.files.pop(path, None) is None:
            raise _err(errno.ENOENT, path)

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        path = self._norm(path)
        self._parent_ok(path)
        if path in self.dirs or path in self.files:
            raise _err(errno.EEXIST, path)
        self.dirs.add(path)

    def rmdir(self, path: str) -> None:
        path = self._norm(path)
        if path not in self.dirs:
            raise _err(errno.ENOTDIR if path in self.files else errno.ENOENT, path)
        if self.listdir(path):
            raise _err(errno.ENOTEMPTY, path)
        self.dirs.remove(path)

    def rename(self, src: str, dst: str) -> None:
        src, dst = self._norm(src), self._norm(dst)
        if src not in self.files:
            raise _err(errno.EOPNOTSUPP if src in self.dirs else errno.ENOENT, src)
        self._parent_ok(dst)
        if dst in self.dirs:
            raise _err(errno.EISDIR, dst)
        self.files[dst] = self.files.pop(src)

    def listdir(self, path: str) -> list[str]:
        path = self._norm(path)
        if path not in self.dirs:
            raise _err(errno.ENOTDIR if path in self.files else errno.ENOENT, path)
        prefix = f"{path}/" if path else ""
        names = {p[len(prefix):] for p in (*self.files, *self.dirs)
                 if p.startswith(prefix) and p != path}
        return sorted(n for n in names if n and "/" not in n)

    def stat(self, path: str) -> os.stat_result:
        path = self._norm(path)
        if path not in self.files and path not in self.dirs:
            raise _err(errno.ENOENT, path)
        return self._stat(self.files.get(path))


def factory(blocksize: int, root: str, **_: object) -> DictFS:
    """What ``--folio-fs dictfs:factory`` calls: ``root`` is a scratch directory a file
    system could keep its backing files in; this one lives in memory and ignores it."""
    return DictFS(blocksize=blocksize)
