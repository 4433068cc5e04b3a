"""A flat dict keyed by the normalised path ('a/b'), a write-back page cache of
block-sized pages bounded by ``cache_bytes`` (LRU; a dirty page is written back when
evicted, by fsync and by drop_caches) over a backing store that keeps each file as a
sorted list of extents. No mmap, fallocate or copy_file_range. Errors are
OSError(errno.X, os.strerror(errno.X), path); pwrite returns the count.
"""

from __future__ import annotations

import bisect
import errno
import os
import stat
from collections import OrderedDict
from dataclasses import dataclass, field

NAME_MAX = 255
MAX_BYTES = (1 << 63) - 1


def fail(code: int, path: object = None) -> OSError:
    if path is None:
        return OSError(code, os.strerror(code))
    return OSError(code, os.strerror(code), str(path))


@dataclass(eq=False)
class Node:
    is_dir: bool
    size: int = 0
    linked: bool = True
    opens: int = 0
    # the backing store: extents sorted by start, never overlapping
    starts: list[int] = field(default_factory=list)
    datas: list[bytes] = field(default_factory=list)


@dataclass
class Page:
    buf: bytearray
    dirty: bool = False


@dataclass
class OpenFile:
    node: Node
    flags: int

    @property
    def can_read(self) -> bool:
        return self.flags & os.O_ACCMODE != os.O_WRONLY

    @property
    def can_write(self) -> bool:
        return self.flags & os.O_ACCMODE != os.O_RDONLY


class FlatFS:
    def __init__(self, blocksize: int = 4096, cache_bytes: int = 32 << 20) -> None:
        self.blocksize = blocksize
        self.cache_pages = max(1, cache_bytes // blocksize)
        self.names: dict[str, Node] = {"": Node(is_dir=True)}
        self.cache: OrderedDict[tuple[int, int], Page] = OrderedDict()
        self.owner: dict[int, Node] = {}
        self.fds: dict[int, OpenFile] = {}
        self.writebacks = 0

    # -- the backing store -----------------------------------------------------------
    @staticmethod
    def _disk_write(node: Node, off: int, data: bytes | bytearray) -> None:
        end = off + len(data)
        i = max(bisect.bisect_right(node.starts, off) - 1, 0)
        keep_s: list[int] = []
        keep_d: list[bytes] = []
        j = i
        while j < len(node.starts) and node.starts[j] < end:
            s, d = node.starts[j], node.datas[j]
            e = s + len(d)
            if e <= off:
                keep_s.append(s)
                keep_d.append(d)
            else:
                if s < off:
                    keep_s.append(s)
                    keep_d.append(d[:off - s])
                if e > end:
                    keep_s.append(end)
                    keep_d.append(d[end - s:])
            j += 1
        pieces = sorted(zip([*keep_s, off], [*keep_d, bytes(data)], strict=True))
        node.starts[i:j] = [s for s, _ in pieces]
        node.datas[i:j] = [d for _, d in pieces]

    @staticmethod
    def _disk_read(node: Node, off: int, n: int) -> bytearray:
        out = bytearray(n)
        end = off + n
        i = max(bisect.bisect_right(node.starts, off) - 1, 0)
        while i < len(node.starts) and node.starts[i] < end:
            s, d = node.starts[i], node.datas[i]
            lo, hi = max(s, off), min(s + len(d), end)
            if lo < hi:
                out[lo - off:hi - off] = d[lo - s:hi - s]
            i += 1
        return out

    @staticmethod
    def _disk_cut(node: Node, size: int) -> None:
        i = bisect.bisect_left(node.starts, size)
        del node.starts[i:], node.datas[i:]
        if i and node.starts[i - 1] + len(node.datas[i - 1]) > size:
            node.datas[i - 1] = node.datas[i - 1][:size - node.starts[i - 1]]

    # -- the page cache --------------------------------------------------------------
    def _writeback(self, node: Node, idx: int, page: Page) -> None:
        if page.dirty:
            start = idx * self.blocksize
            if start < node.size:
                self._disk_write(node, start, page.buf[:node.size - start])
            page.dirty = False
            self.writebacks += 1

    def _page(self, node: Node, idx: int) -> Page:
        key = (id(node), idx)
        page = self.cache.get(key)
        if page is not None:
            self.cache.move_to_end(key)
            return page
        page = Page(self._disk_read(node, idx * self.blocksize, self.blocksize))
        self.cache[key] = page
        self.owner[id(node)] = node
        while len(self.cache) > self.cache_pages:
            (ino, old), victim = self.cache.popitem(last=False)
            self._writeback(self.owner[ino], old, victim)
        return page

    def _pages_of(self, node: Node) -> list[tuple[int, Page]]:
        return sorted((idx, p) for (ino, idx), p in self.cache.items() if ino == id(node))

    def _flush(self, node: Node, drop: bool = False) -> None:
        for idx, page in self._pages_of(node):
            self._writeback(node, idx, page)
            if drop:
                del self.cache[(id(node), idx)]

    def _forget(self, node: Node, from_idx: int = 0) -> None:
        for idx, _ in self._pages_of(node):
            if idx >= from_idx:
                del self.cache[(id(node), idx)]

    def _read(self, node: Node, off: int, n: int) -> bytes:
        end = min(off + n, node.size)
        parts = []
        bs = self.blocksize
        while off < end:
            idx, at = divmod(off, bs)
            take = min(bs - at, end - off)
            parts.append(bytes(self._page(node, idx).buf[at:at + take]))
            off += take
        return b"".join(parts)

    def _write(self, node: Node, off: int, data: bytes) -> None:
        bs = self.blocksize
        done = 0
        # the size first: a page evicted while the write goes on is written back up
        # to the size
        node.size = max(node.size, off + len(data))
        while done < len(data):
            idx, at = divmod(off + done, bs)
            take = min(bs - at, len(data) - done)
            page = self._page(node, idx)
            page.buf[at:at + take] = data[done:done + take]
            page.dirty = True
            done += take

    def _truncate(self, node: Node, size: int) -> None:
        if size < node.size:
            bs = self.blocksize
            self._forget(node, -(-size // bs))
            if size % bs:
                page = self.cache.get((id(node), size // bs))
                if page is not None:
                    page.buf[size % bs:] = bytes(bs - size % bs)
            self._disk_cut(node, size)
        node.size = size

    def _free(self, node: Node) -> None:
        if not node.linked and not node.opens:
            self._forget(node)
            node.starts.clear()
            node.datas.clear()

    # -- names -------------------------------------------------------------------------
    def _split(self, path: str) -> tuple[list[str], bool]:
        """The path's names and whether it ends in a slash; the directories above the
        last name are walked as Linux walks them."""
        parts = [p for p in path.split("/") if p and p != "."]
        slash = path.endswith("/") and bool(parts)
        walked: list[str] = []
        for part in parts[:-1]:
            if part == "..":
                walked = walked[:-1]
                continue
            if len(os.fsencode(part)) > NAME_MAX:
                raise fail(errno.ENAMETOOLONG, path)
            walked.append(part)
            node = self.names.get("/".join(walked))
            if node is None:
                raise fail(errno.ENOENT, path)
            if not node.is_dir:
                raise fail(errno.ENOTDIR, path)
        return [*walked, *parts[-1:]], slash

    def _key(self, parts: list[str]) -> str:
        if parts and parts[-1] == "..":
            return "/".join(parts[:-2])
        return "/".join(parts)

    def _last(self, parts: list[str], path: str) -> str:
        """The key of the last name, after its length check."""
        if parts and parts[-1] != ".." and len(os.fsencode(parts[-1])) > NAME_MAX:
            raise fail(errno.ENAMETOOLONG, path)
        return self._key(parts)

    def _existing(self, path: str) -> Node:
        parts, slash = self._split(path)
        node = self.names.get(self._last(parts, path))
        if node is None:
            raise fail(errno.ENOENT, path)
        if slash and not node.is_dir:
            raise fail(errno.ENOTDIR, path)
        return node

    @staticmethod
    def _special(parts: list[str]) -> bool:
        """The last name is '.', '..' or the root."""
        return not parts or parts[-1] == ".."

    def _below(self, key: str) -> list[str]:
        prefix = key + "/" if key else ""
        return [k for k in self.names if k.startswith(prefix) and k != key]

    # -- the protocol ------------------------------------------------------------------
    def _fd(self, fd: int) -> OpenFile:
        of = self.fds.get(fd)
        if of is None:
            raise fail(errno.EBADF)
        return of

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if flags & os.O_CREAT and flags & os.O_DIRECTORY:
            raise fail(errno.EINVAL, path)
        parts, slash = self._split(path)
        if flags & os.O_CREAT and (slash or self._special(parts) or path.rstrip("/").endswith(
                ("/.", "/..")) or path.strip("/") in (".", "..")):
            raise fail(errno.EISDIR, path)
        key = self._last(parts, path)
        node = self.names.get(key)
        if node is None:
            if not flags & os.O_CREAT:
                raise fail(errno.ENOENT, path)
            node = self.names[key] = Node(is_dir=False)
        elif flags & os.O_CREAT and flags & os.O_EXCL:
            raise fail(errno.EEXIST, path)
        elif node.is_dir and flags & os.O_CREAT:
            raise fail(errno.EISDIR, path)
        elif not node.is_dir and (flags & os.O_DIRECTORY or slash):
            raise fail(errno.ENOTDIR, path)
        if node.is_dir and (flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC):
            raise fail(errno.EISDIR, path)
        if flags & os.O_TRUNC:
            self._truncate(node, 0)
        fd = 3
        while fd in self.fds:
            fd += 1
        self.fds[fd] = OpenFile(node, flags)
        node.opens += 1
        return fd

    def close(self, fd: int) -> None:
        of = self._fd(fd)
        del self.fds[fd]
        of.node.opens -= 1
        self._free(of.node)

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        if offset < 0:
            raise fail(errno.EINVAL)
        of = self._fd(fd)
        if not of.can_read:
            raise fail(errno.EBADF)
        if offset + n > MAX_BYTES:
            raise fail(errno.EINVAL)
        if of.node.is_dir:
            raise fail(errno.EISDIR)
        return self._read(of.node, offset, n)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        if offset < 0:
            raise fail(errno.EINVAL)
        of = self._fd(fd)
        if not of.can_write:
            raise fail(errno.EBADF)
        if offset + len(data) > MAX_BYTES:
            raise fail(errno.EINVAL)
        if not data:
            return 0
        if of.flags & os.O_APPEND:
            offset = of.node.size
        if offset >= MAX_BYTES:
            raise fail(errno.EFBIG)
        data = bytes(data[:MAX_BYTES - offset])
        self._write(of.node, offset, data)
        return len(data)

    def ftruncate(self, fd: int, length: int) -> None:
        if length < 0:
            raise fail(errno.EINVAL)
        of = self._fd(fd)
        if of.node.is_dir or not of.can_write:
            raise fail(errno.EINVAL)
        self._truncate(of.node, length)

    def _stat(self, node: Node) -> os.stat_result:
        if node.is_dir:
            return os.stat_result((stat.S_IFDIR | 0o755, 0, 0, 2, 0, 0, 4096, 0, 0, 0))
        blocks = -(-node.size // self.blocksize) * (self.blocksize // 512)
        return os.stat_result((stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, node.size, 0, 0, 0),
                              {"st_blocks": blocks, "st_blksize": self.blocksize})

    def fstat(self, fd: int) -> os.stat_result:
        return self._stat(self._fd(fd).node)

    def stat(self, path: str) -> os.stat_result:
        return self._stat(self._existing(path))

    def fsync(self, fd: int) -> None:
        self._flush(self._fd(fd).node)

    def drop_caches(self, path: str) -> None:
        node = self._existing(path)
        if not node.is_dir:
            self._flush(node, drop=True)

    def unlink(self, path: str) -> None:
        parts, slash = self._split(path)
        if self._special(parts):
            raise fail(errno.EISDIR, path)
        key = self._last(parts, path)
        node = self.names.get(key)
        if node is None:
            raise fail(errno.ENOENT, path)
        if node.is_dir:
            raise fail(errno.EISDIR, path)
        if slash:
            raise fail(errno.ENOTDIR, path)
        del self.names[key]
        node.linked = False
        self._free(node)

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        parts, _ = self._split(path)
        if self._special(parts):
            raise fail(errno.EEXIST, path)
        key = self._last(parts, path)
        if key in self.names:
            raise fail(errno.EEXIST, path)
        self.names[key] = Node(is_dir=True)

    def rmdir(self, path: str) -> None:
        parts, _ = self._split(path)
        trimmed = path.rstrip("/")
        if parts and parts[-1] == "..":
            raise fail(errno.ENOTEMPTY, path)
        if trimmed == "." or trimmed.endswith("/."):
            raise fail(errno.EINVAL, path)
        if not parts:
            raise fail(errno.EBUSY, path)
        key = self._last(parts, path)
        node = self.names.get(key)
        if node is None:
            raise fail(errno.ENOENT, path)
        if not node.is_dir:
            raise fail(errno.ENOTDIR, path)
        if self._below(key):
            raise fail(errno.ENOTEMPTY, path)
        del self.names[key]

    def rename(self, src: str, dst: str) -> None:
        sparts, sslash = self._split(src)
        dparts, dslash = self._split(dst)
        dots = (".", "..")
        if (self._special(sparts) or self._special(dparts)
                or src.rstrip("/").split("/")[-1] in dots
                or dst.rstrip("/").split("/")[-1] in dots):
            raise fail(errno.EBUSY, src)
        old = self._last(sparts, src)
        node = self.names.get(old)
        if node is None:
            raise fail(errno.ENOENT, src)
        new = self._last(dparts, dst)
        if not node.is_dir and (sslash or dslash):
            raise fail(errno.ENOTDIR, src)
        if node.is_dir and new.startswith(old + "/"):
            raise fail(errno.EINVAL, dst)
        if old.startswith(new + "/") or (new == "" and old):
            raise fail(errno.ENOTEMPTY, dst)
        target = self.names.get(new)
        if target is node:
            return
        if target is not None:
            if node.is_dir and not target.is_dir:
                raise fail(errno.ENOTDIR, dst)
            if not node.is_dir and target.is_dir:
                raise fail(errno.EISDIR, dst)
            if target.is_dir and self._below(new):
                raise fail(errno.ENOTEMPTY, dst)
            if not target.is_dir:
                target.linked = False
                self._free(target)
        moved = self._below(old) if node.is_dir else []
        del self.names[old]
        self.names[new] = node
        for key in moved:
            self.names[new + key[len(old):]] = self.names.pop(key)

    def listdir(self, path: str) -> object:
        parts, _ = self._split(path)
        node = self._existing(path)
        if not node.is_dir:
            raise fail(errno.ENOTDIR, path)
        key = self._key(parts)
        prefix = key + "/" if key else ""
        return {k[len(prefix):]: None for k in self._below(key)
                if "/" not in k[len(prefix):]}.keys()


def factory(blocksize: int, root: str, cache_bytes: int = 32 << 20) -> FlatFS:
    return FlatFS(blocksize, cache_bytes)
