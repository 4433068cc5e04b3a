"""A tree of directory nodes holding inode objects; file data lives in a sparse dict of
fixed 4 KiB pages (a missing page is a hole). Mapped I/O, fallocate (allocate, keep
size, punch hole; the other modes answer EOPNOTSUPP) and copy_file_range. Errors are
raised the usual Python way, by class where Python has one (FileNotFoundError(path)).
"""

from __future__ import annotations

import errno
import os
import stat

PAGE = 4096
NAME_MAX = 255
MAX_SIZE = (1 << 63) - 1
KEEP_SIZE, PUNCH_HOLE, COLLAPSE, ZERO, INSERT, UNSHARE = 1, 2, 8, 0x10, 0x20, 0x40
KNOWN_BITS = KEEP_SIZE | PUNCH_HOLE | COLLAPSE | ZERO | INSERT | UNSHARE


def _e(code: int, what: object = "") -> OSError:
    return OSError(code, os.strerror(code), str(what))


class Inode:
    def __init__(self) -> None:
        self.size = 0
        self.pages: dict[int, bytearray] = {}

    def read(self, off: int, n: int) -> bytearray:
        end = min(self.size, off + n)
        out = bytearray()
        pos = off
        while pos < end:
            idx, inpage = divmod(pos, PAGE)
            take = min(PAGE - inpage, end - pos)
            page = self.pages.get(idx)
            out += page[inpage:inpage + take] if page is not None else bytes(take)
            pos += take
        return out

    def store(self, off: int, data: bytes | bytearray | memoryview) -> None:
        pos, view = off, memoryview(data)
        while view:
            idx, inpage = divmod(pos, PAGE)
            take = min(PAGE - inpage, len(view))
            page = self.pages.get(idx)
            if page is None:
                page = self.pages[idx] = bytearray(PAGE)
            page[inpage:inpage + take] = view[:take]
            view = view[take:]
            pos += take

    def truncate(self, size: int) -> None:
        if size < self.size:
            last = -(-size // PAGE)
            for idx in [i for i in self.pages if i >= last]:
                del self.pages[idx]
            if size % PAGE and size // PAGE in self.pages:
                page = self.pages[size // PAGE]
                page[size % PAGE:] = bytes(PAGE - size % PAGE)
        self.size = size

    def punch(self, off: int, length: int) -> None:
        end = min(off + length, max(self.size, off))
        pos = off
        while pos < end:
            idx, inpage = divmod(pos, PAGE)
            take = min(PAGE - inpage, end - pos)
            if take == PAGE:
                self.pages.pop(idx, None)
            elif idx in self.pages:
                self.pages[idx][inpage:inpage + take] = bytes(take)
            pos += take

    def allocate(self, off: int, length: int) -> None:
        if length > (1 << 30):
            raise _e(errno.ENOSPC)
        for idx in range(off // PAGE, -(-(off + length) // PAGE)):
            if idx not in self.pages:
                # a page past EOF must read zeroes when the size grows over it
                self.pages[idx] = bytearray(PAGE)


class Dir:
    def __init__(self, parent: Dir | None = None) -> None:
        self.entries: dict[str, Inode | Dir] = {}
        self.parent = parent if parent is not None else self


class Handle:
    def __init__(self, node: Inode | Dir, flags: int) -> None:
        self.node, self.flags = node, flags
        acc = flags & os.O_ACCMODE
        self.readable = acc in (os.O_RDONLY, os.O_RDWR)
        self.writable = acc in (os.O_WRONLY, os.O_RDWR)


class TreeFS:
    features = frozenset({"mmap", "fallocate", "punch_hole", "copy_range", "directories"})
    max_copy: int | None = None     # copy_file_range copies at most this much a call

    def __init__(self, blocksize: int = 4096) -> None:
        self.blocksize = blocksize
        self.root = Dir()
        self.handles: dict[int, Handle] = {}
        self._next = 3

    # -- names -------------------------------------------------------------------------
    @staticmethod
    def _check_name(name: str) -> None:
        if len(os.fsencode(name)) > NAME_MAX:
            raise _e(errno.ENAMETOOLONG, name[:20])

    def _walk(self, path: str) -> tuple[Dir, str, bool]:
        """The directory holding the last name, the last name ('' for the root, or '.'
        or '..'), and whether a slash followed it."""
        parts = path.split("/")
        slash = len(parts) > 1 and parts[-1] == "" and path.strip("/") != ""
        parts = [p for p in parts if p]
        here = self.root
        if not parts:
            return here, "", False
        for part in parts[:-1]:
            if part == ".":
                continue
            if part == "..":
                here = here.parent
                continue
            self._check_name(part)
            node = here.entries.get(part)
            if node is None:
                raise FileNotFoundError(path)
            if not isinstance(node, Dir):
                raise NotADirectoryError(path)
            here = node
        return here, parts[-1], slash

    @staticmethod
    def _child(parent: Dir, name: str) -> Inode | Dir | None:
        if name in ("", "."):
            return parent if name == "." else None
        if name == "..":
            return parent.parent
        return parent.entries.get(name)

    def _lookup(self, path: str) -> Inode | Dir:
        parent, name, slash = self._walk(path)
        if name == "":
            return self.root
        if name not in (".", ".."):
            self._check_name(name)
        node = self._child(parent, name)
        if node is None:
            raise FileNotFoundError(path)
        if slash and not isinstance(node, Dir):
            raise NotADirectoryError(path)
        return node

    # -- descriptors -------------------------------------------------------------------
    def _h(self, fd: int) -> Handle:
        try:
            return self.handles[fd]
        except (KeyError, TypeError):
            raise _e(errno.EBADF, fd) from None

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if flags & os.O_CREAT and flags & os.O_DIRECTORY:
            raise _e(errno.EINVAL, path)
        parent, name, slash = self._walk(path)
        if flags & os.O_CREAT and (slash or name in ("", ".", "..")):
            raise IsADirectoryError(path)
        if name in ("", ".", ".."):
            node = self.root if name == "" else self._child(parent, name)
        else:
            self._check_name(name)
            node = parent.entries.get(name)
        if node is None:
            if not flags & os.O_CREAT:
                raise FileNotFoundError(path)
            node = parent.entries[name] = Inode()
        elif flags & os.O_CREAT and flags & os.O_EXCL:
            raise FileExistsError(path)
        elif isinstance(node, Dir):
            if flags & os.O_CREAT:
                raise IsADirectoryError(path)
        elif flags & os.O_DIRECTORY or slash:
            raise NotADirectoryError(path)
        if isinstance(node, Dir):
            if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
                raise IsADirectoryError(path)
        elif flags & os.O_TRUNC:
            node.truncate(0)
        fd = self._next
        self._next += 1
        self.handles[fd] = Handle(node, flags)
        return fd

    def close(self, fd: int) -> None:
        self._h(fd)
        del self.handles[fd]

    def pread(self, fd: int, n: int, offset: int) -> bytearray:
        if offset < 0:
            raise _e(errno.EINVAL, "pread")
        h = self._h(fd)
        if not h.readable:
            raise _e(errno.EBADF, fd)
        if offset + n > MAX_SIZE:
            raise _e(errno.EINVAL, "pread")
        if isinstance(h.node, Dir):
            raise IsADirectoryError(fd)
        return h.node.read(offset, n)

    def pwrite(self, fd: int, data: bytes, offset: int) -> None:
        if offset < 0:
            raise _e(errno.EINVAL, "pwrite")
        h = self._h(fd)
        if not h.writable:
            raise _e(errno.EBADF, fd)
        if offset + len(data) > MAX_SIZE:
            raise _e(errno.EINVAL, "pwrite")
        if not data:
            return None
        node = h.node
        assert isinstance(node, Inode)
        if h.flags & os.O_APPEND:
            offset = node.size
        if offset >= MAX_SIZE:
            raise _e(errno.EFBIG, "pwrite")
        data = data[:MAX_SIZE - offset]
        node.store(offset, data)
        node.size = max(node.size, offset + len(data))
        return None

    def ftruncate(self, fd: int, length: int) -> None:
        if length < 0:
            raise _e(errno.EINVAL, "ftruncate")
        h = self._h(fd)
        if not h.writable or not isinstance(h.node, Inode):
            raise _e(errno.EINVAL, "ftruncate")
        h.node.truncate(length)

    def _stat(self, node: Inode | Dir) -> os.stat_result:
        if isinstance(node, Dir):
            return os.stat_result((stat.S_IFDIR | 0o755, 0, 0, 2, 0, 0, 0, 0, 0, 0),
                                  {"st_blocks": 0, "st_blksize": self.blocksize})
        return os.stat_result((stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, node.size, 0, 0, 0),
                              {"st_blocks": len(node.pages) * (PAGE // 512),
                               "st_blksize": self.blocksize})

    def fstat(self, fd: int) -> os.stat_result:
        return self._stat(self._h(fd).node)

    def stat(self, path: str) -> os.stat_result:
        return self._stat(self._lookup(path))

    def fsync(self, fd: int) -> None:
        self._h(fd)

    # -- mapped I/O --------------------------------------------------------------------
    def _map(self, fd: int, offset: int, length: int, write: bool) -> Inode:
        h = self._h(fd)
        first = offset & ~(PAGE - 1)
        maplen = -(-(offset + length - first) // PAGE) * PAGE
        pgoff = (offset % (1 << 64)) >> 12
        if maplen > MAX_SIZE or pgoff > (MAX_SIZE - maplen) >> 12:
            raise _e(errno.EOVERFLOW, "mmap")
        if not h.readable or (write and not h.writable):
            raise PermissionError(fd)
        if isinstance(h.node, Dir):
            raise _e(errno.ENODEV, "mmap")
        if offset + length > -(-h.node.size // PAGE) * PAGE:
            raise _e(errno.EFAULT, "SIGBUS")
        return h.node

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        if not length:
            self._h(fd)
            return b""
        node = self._map(fd, offset, length, False)
        got = node.read(offset, length)
        return bytes(got) + bytes(length - len(got))

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        if not data:
            self._h(fd)
            return
        node = self._map(fd, offset, len(data), True)
        inside = max(0, min(len(data), node.size - offset))
        node.store(offset, data[:inside])

    # -- fallocate, copy_file_range ----------------------------------------------------
    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        h = self._h(fd)
        if offset < 0 or length <= 0:
            raise _e(errno.EINVAL, "fallocate")
        if mode & ~KNOWN_BITS:
            raise _e(errno.EOPNOTSUPP, "fallocate")
        what = mode & ~KEEP_SIZE
        if what not in (0, PUNCH_HOLE, COLLAPSE, ZERO, INSERT, UNSHARE):
            raise _e(errno.EOPNOTSUPP, "fallocate")
        if what == PUNCH_HOLE and not mode & KEEP_SIZE:
            raise _e(errno.EOPNOTSUPP, "fallocate")
        if what in (COLLAPSE, INSERT) and mode & KEEP_SIZE:
            raise _e(errno.EOPNOTSUPP, "fallocate")
        if not h.writable:
            raise _e(errno.EBADF, fd)
        if isinstance(h.node, Dir):
            raise IsADirectoryError(fd)
        if offset + length > MAX_SIZE:
            raise _e(errno.EFBIG, "fallocate")
        node = h.node
        if what == PUNCH_HOLE:
            node.punch(offset, length)
        elif what == 0:
            node.allocate(offset, length)
            if not mode & KEEP_SIZE:
                node.size = max(node.size, offset + length)
        else:
            raise _e(errno.EOPNOTSUPP, "fallocate")

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        hin, hout = self._h(src), self._h(dst)
        if isinstance(hin.node, Dir) or isinstance(hout.node, Dir):
            raise IsADirectoryError(src)
        if not hin.readable or not hout.writable or hout.flags & os.O_APPEND:
            raise _e(errno.EBADF, "copy_file_range")
        u64 = 1 << 64
        if offset_src % u64 + count >= u64 or offset_dst % u64 + count >= u64:
            raise _e(errno.EOVERFLOW, "copy_file_range")
        size_in = hin.node.size
        count = 0 if offset_src >= size_in else min(count, size_in - offset_src)
        if offset_dst >= MAX_SIZE:
            raise _e(errno.EFBIG, "copy_file_range")
        count = min(count, MAX_SIZE - offset_dst)
        if (hin.node is hout.node and offset_dst + count > offset_src
                and offset_dst < offset_src + count):
            raise _e(errno.EINVAL, "copy_file_range")
        for at in (offset_src, offset_dst):
            if at < 0 or at + count > MAX_SIZE:
                raise _e(errno.EINVAL, "copy_file_range")
        if not count:
            return 0
        if self.max_copy is not None:       # the checks saw the whole count
            count = min(count, self.max_copy)
        data = hin.node.read(offset_src, count)
        hout.node.store(offset_dst, data)
        hout.node.size = max(hout.node.size, offset_dst + len(data))
        return len(data)

    # -- the namespace -----------------------------------------------------------------
    def unlink(self, path: str) -> None:
        parent, name, slash = self._walk(path)
        if name in ("", ".", ".."):
            raise IsADirectoryError(path)
        self._check_name(name)
        node = parent.entries.get(name)
        if node is None:
            raise FileNotFoundError(path)
        if isinstance(node, Dir):
            raise IsADirectoryError(path)
        if slash:
            raise NotADirectoryError(path)
        del parent.entries[name]

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        parent, name, _ = self._walk(path)
        if name in ("", ".", ".."):
            raise FileExistsError(path)
        self._check_name(name)
        if name in parent.entries:
            raise FileExistsError(path)
        parent.entries[name] = Dir(parent)

    def rmdir(self, path: str) -> None:
        parent, name, _ = self._walk(path)
        if name == "..":
            raise _e(errno.ENOTEMPTY, path)
        if name == ".":
            raise _e(errno.EINVAL, path)
        if name == "":
            raise _e(errno.EBUSY, path)
        self._check_name(name)
        node = parent.entries.get(name)
        if node is None:
            raise FileNotFoundError(path)
        if not isinstance(node, Dir):
            raise NotADirectoryError(path)
        if node.entries:
            raise _e(errno.ENOTEMPTY, path)
        del parent.entries[name]

    def rename(self, src: str, dst: str) -> None:
        sp, sn, sslash = self._walk(src)
        dp, dn, dslash = self._walk(dst)
        if sn in ("", ".", "..") or dn in ("", ".", ".."):
            raise _e(errno.EBUSY, src)
        self._check_name(sn)
        node = sp.entries.get(sn)
        if node is None:
            raise FileNotFoundError(src)
        self._check_name(dn)
        if not isinstance(node, Dir) and (sslash or dslash):
            raise NotADirectoryError(src)
        if isinstance(node, Dir):
            up: Dir = dp
            while True:                  # is the source an ancestor of the target?
                if up is node:
                    raise _e(errno.EINVAL, dst)
                if up is self.root:
                    break
                up = up.parent
        target = dp.entries.get(dn)
        if isinstance(target, Dir):
            up = sp
            while True:
                if up is target:
                    raise _e(errno.ENOTEMPTY, dst)
                if up is self.root:
                    break
                up = up.parent
        if target is node:
            return
        if target is not None:
            if isinstance(node, Dir) and not isinstance(target, Dir):
                raise NotADirectoryError(dst)
            if not isinstance(node, Dir) and isinstance(target, Dir):
                raise IsADirectoryError(dst)
            if isinstance(target, Dir) and target.entries:
                raise _e(errno.ENOTEMPTY, dst)
        del sp.entries[sn]
        dp.entries[dn] = node
        if isinstance(node, Dir):
            node.parent = dp

    def listdir(self, path: str) -> list[str]:
        node = self._lookup(path)
        if not isinstance(node, Dir):
            raise NotADirectoryError(path)
        return list(node.entries)


def factory(blocksize: int, root: str = "") -> TreeFS:
    return TreeFS(blocksize)
