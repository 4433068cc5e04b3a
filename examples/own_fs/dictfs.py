"""A user's own file system: files are bytearrays in a dict, directories are sets of names.

It implements pytest-folio's FileSystem protocol (pytest_folio.targets.protocols), so
every file-system fixture and suite can run against it with
``--folio-fs dictfs:factory``, the differential test against the reference included. It
implements the protocol's core, mapped I/O and directories, and leaves fallocate and
copy_file_range out: the suites skip what needs them. Names follow Linux's rules: a
name of more than NAME_MAX bytes is ENAMETOOLONG, a file on the way ENOTDIR, a trailing
slash names a directory, and rename moves files and directories as rename(2) does. A
descriptor holds the file's bytearray (its inode), not its name, so a file renamed over
or unlinked while open keeps its data for that descriptor, as on Linux. Files live in
memory, so they stop at MAX_FILE_SIZE (EFBIG past it, as past a file system's
s_maxbytes).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field

PAGE_SIZE = 4096
NAME_MAX = 255              # bytes in one name
PATH_MAX = 4096             # bytes in a path, its terminating NUL included
MAX_FILE_SIZE = 1 << 30     # s_maxbytes: a file is one bytearray in memory


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
    def _walk(self, path: str) -> tuple[str, bool]:
        """The name normalised to 'a/b' and whether the path ends in a slash (it then
        names a directory). Walks the directories on the way as Linux does, one name at
        a time: ENAMETOOLONG for a name too long, ENOENT for a missing directory,
        ENOTDIR for a file."""
        if len(os.fsencode(path)) >= PATH_MAX:
            raise _err(errno.ENAMETOOLONG, path[:40])
        parts = [p for p in path.split("/") if p not in ("", ".")]
        for i, part in enumerate(parts):
            if len(os.fsencode(part)) > NAME_MAX:
                raise _err(errno.ENAMETOOLONG, part[:40])
            if i < len(parts) - 1:
                prefix = "/".join(parts[:i + 1])
                if prefix in self.files:
                    raise _err(errno.ENOTDIR, path)
                if prefix not in self.dirs:
                    raise _err(errno.ENOENT, path)
        return "/".join(parts), path.endswith("/")

    def _existing(self, path: str) -> str:
        """The name of something that exists (a trailing slash: a directory)."""
        name, slash = self._walk(path)
        if name not in self.files and name not in self.dirs:
            raise _err(errno.ENOENT, path)
        if slash and name in self.files:
            raise _err(errno.ENOTDIR, path)
        return name

    def _children(self, path: str) -> list[str]:
        """Every name below directory ``path``, at any depth."""
        prefix = f"{path}/" if path else ""
        return [p for p in (*self.files, *self.dirs) if p.startswith(prefix) and p != path]

    def _fd(self, fd: int) -> _Open:
        f = self.fds.get(fd)
        if f is None:
            raise _err(errno.EBADF, f"fd {fd}")
        return f

    def _data(self, fd: int, *, write: bool = False) -> bytearray:
        f = self._fd(fd)
        acc = f.flags & os.O_ACCMODE
        if (write and acc == os.O_RDONLY) or (not write and acc == os.O_WRONLY):
            raise _err(errno.EBADF, f"fd {fd}")
        if f.data is None:
            raise _err(errno.EISDIR, f.path)
        return f.data

    # -- the protocol -----------------------------------------------------------------------
    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        name, slash = self._walk(path)
        exists = name in self.files or name in self.dirs
        if flags & os.O_CREAT:
            if slash:                              # O_CREAT names a file
                raise _err(errno.EISDIR, path)
            if exists and flags & os.O_EXCL:
                raise _err(errno.EEXIST, path)
        elif not exists:
            raise _err(errno.ENOENT, path)
        if name in self.dirs:
            # a directory opens for reading only (O_TRUNC asks to write)
            if (flags & os.O_ACCMODE != os.O_RDONLY or flags & (os.O_CREAT | os.O_TRUNC)):
                raise _err(errno.EISDIR, path)
        elif name in self.files:
            if slash or flags & os.O_DIRECTORY:
                raise _err(errno.ENOTDIR, path)
            if flags & os.O_TRUNC:
                self.files[name].clear()
        else:
            self.files[name] = bytearray()
        fd = max(self.fds, default=2) + 1
        self.fds[fd] = _Open(name, flags, self.files.get(name))
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
        if data and offset >= MAX_FILE_SIZE:
            raise _err(errno.EFBIG, "pwrite")
        data = data[:MAX_FILE_SIZE - offset]         # a short write up to the limit
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
        if length > MAX_FILE_SIZE:
            raise _err(errno.EFBIG, "ftruncate")
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
        """The file behind a shared mapping of ``fd``, checked as mmap(2) and the page
        fault check it: a mapping needs a descriptor open for reading (and writing, to
        store through it), a regular file, and an offset that is not negative; an
        access past the page holding EOF faults."""
        f = self.fds.get(fd)
        if f is None:
            raise _err(errno.EBADF, f"fd {fd}")
        acc = f.flags & os.O_ACCMODE
        if acc == os.O_WRONLY or (write and acc != os.O_RDWR):
            raise _err(errno.EACCES, f"fd {fd}")
        if f.data is None:
            raise _err(errno.ENODEV, f.path)          # a directory has no mmap
        if offset < 0:
            raise _err(errno.EINVAL, "mmap")
        buf = f.data
        limit = -(-len(buf) // PAGE_SIZE) * PAGE_SIZE   # the page holding EOF ends here
        if offset + length > limit:
            raise _err(errno.EFAULT, "mapped access past the page holding EOF")
        return buf

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        if not length:                               # no mapping is made
            self._fd(fd)
            return b""
        buf = self._mapped(fd, offset, length, write=False)
        data = bytes(buf[offset:offset + length])
        return data + bytes(length - len(data))           # zeroes past EOF

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        if not data:
            self._fd(fd)
            return
        buf = self._mapped(fd, offset, len(data), write=True)
        inside = max(0, min(len(data), len(buf) - offset))  # never extends the file
        buf[offset:offset + inside] = data[:inside]

    def unlink(self, path: str) -> None:
        name, slash = self._walk(path)
        if name in self.dirs:
            raise _err(errno.EISDIR, path)
        if name not in self.files:
            raise _err(errno.ENOENT, path)
        if slash:
            raise _err(errno.ENOTDIR, path)
        del self.files[name]

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        name, _ = self._walk(path)
        if name in self.dirs or name in self.files:
            raise _err(errno.EEXIST, path)
        self.dirs.add(name)

    def rmdir(self, path: str) -> None:
        name = self._existing(path)
        if name in self.files:
            raise _err(errno.ENOTDIR, path)
        if not name:
            raise _err(errno.EBUSY, path)              # the root
        if self._children(name):
            raise _err(errno.ENOTEMPTY, path)
        self.dirs.remove(name)

    def rename(self, src: str, dst: str) -> None:
        """rename(2): both directories on the way walked, then the source looked up,
        then the rules for what it may replace."""
        old, old_slash = self._walk(src)
        new, new_slash = self._walk(dst)
        if old not in self.files and old not in self.dirs:
            raise _err(errno.ENOENT, src)
        is_dir = old in self.dirs
        if not is_dir and (old_slash or new_slash):     # a slash names a directory
            raise _err(errno.ENOTDIR, src if old_slash else dst)
        if is_dir and (new + "/").startswith(old + "/") and new != old:
            raise _err(errno.EINVAL, dst)                # into itself
        if (old + "/").startswith(new + "/") and new != old:
            raise _err(errno.ENOTEMPTY, dst)             # over its own ancestor
        if old == new:
            return
        if is_dir:
            if new in self.files:
                raise _err(errno.ENOTDIR, dst)
            if new in self.dirs and self._children(new):
                raise _err(errno.ENOTEMPTY, dst)
            self.dirs.discard(new)
            moved = [old, *self._children(old)]
            for name in moved:
                to = new + name[len(old):]
                if name in self.dirs:
                    self.dirs.remove(name)
                    self.dirs.add(to)
                else:
                    self.files[to] = self.files.pop(name)
            return
        if new in self.dirs:
            raise _err(errno.EISDIR, dst)
        self.files[new] = self.files.pop(old)

    def listdir(self, path: str) -> list[str]:
        name = self._existing(path)
        if name in self.files:
            raise _err(errno.ENOTDIR, path)
        prefix = f"{name}/" if name else ""
        return sorted(p[len(prefix):] for p in self._children(name)
                      if "/" not in p[len(prefix):])

    def stat(self, path: str) -> os.stat_result:
        return self._stat(self.files.get(self._existing(path)))


def factory(blocksize: int, root: str, **_: object) -> DictFS:
    """What ``--folio-fs dictfs:factory`` calls: ``root`` is a scratch directory a file
    system could keep its backing files in; this one lives in memory and ignores it."""
    return DictFS(blocksize=blocksize)
