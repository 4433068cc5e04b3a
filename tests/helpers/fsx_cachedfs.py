"""A folio-cached in-memory file system, written the way real ones are: the healthy base
of the catalogue's one-line bugs (``fsx_broken.py``) and a correct user factory for the
default suites (``--folio-fs=tests.helpers.fsx_cachedfs:CachedFS``).

Each file's data lives in a *store* (block index -> one block of bytes: its "disk") and
is reached through a page cache shared by every file: one folio per block, so a folio is
several pages once the block size is above 4K, with dirty state, writeback on fsync and on
eviction, and an LRU that holds only ``cache_bytes`` (1 MiB by default, 4 folios at
least), so a file of a few MiB is pushed through the cache more than once. A name
cache in front of the directory speeds up lookups, as a dcache does. Every step a real
implementation gets wrong lives in a small method of its own, which a bug overrides.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

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

MAX_FILE_SIZE = (1 << 63) - 1       # s_maxbytes of a 64-bit kernel's ramfs and tmpfs
NAME_MAX = 255
MODE_MASK = (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_COLLAPSE_RANGE
             | FALLOC_FL_INSERT_RANGE)
_FEATURE = {0: "fallocate", FALLOC_FL_PUNCH_HOLE: "punch_hole",
            FALLOC_FL_ZERO_RANGE: "zero_range", FALLOC_FL_COLLAPSE_RANGE: "collapse_range",
            FALLOC_FL_INSERT_RANGE: "insert_range"}


def fail(code: int, what: str) -> OSError:
    return OSError(code, f"{what}: {os.strerror(code)}")


@dataclass(eq=False)
class Inode:
    ino: int
    is_dir: bool = False
    size: int = 0
    nlink: int = 1
    opencount: int = 0
    store: dict[int, bytearray] = field(default_factory=dict)


@dataclass(eq=False)
class Folio:
    inode: Inode
    index: int              # in blocks
    data: bytearray
    dirty: bool = False


@dataclass
class OpenFile:
    inode: Inode
    flags: int

    @property
    def readable(self) -> bool:
        return self.flags & os.O_ACCMODE in (os.O_RDONLY, os.O_RDWR)

    @property
    def writable(self) -> bool:
        return self.flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR)


class CachedFS:
    """The FileSystem protocol over a write-back folio cache (see the module docstring)."""

    def __init__(self, blocksize: int = PAGE_SIZE, root: str | None = None, *,
                 features: frozenset[str] = FS_FEATURES, cache_bytes: int = 1 << 20) -> None:
        self.blocksize = blocksize
        self.features = frozenset(features)
        self.cache_folios = max(4, cache_bytes // blocksize)
        self.cache: OrderedDict[tuple[int, int], Folio] = OrderedDict()
        self._ino = itertools.count(1)
        self.names: dict[str, Inode] = {"": Inode(next(self._ino), is_dir=True, nlink=2)}
        self.dcache: dict[str, Inode] = {}
        self.fds: dict[int, OpenFile] = {}
        self._fd = itertools.count(3)

    # -- names ---------------------------------------------------------------------------
    def resolve(self, path: str) -> str:
        """The normalised name; ENOENT or ENOTDIR when a directory on the way is missing
        or is a file."""
        parts = [p for p in path.split("/") if p not in ("", ".")]
        for i, part in enumerate(parts):
            if i:
                self.walk_into(self.names.get("/".join(parts[:i])), path)
            self.check_name(part, path)
        return "/".join(parts)

    @staticmethod
    def check_name(part: str, path: str) -> None:
        """ENAMETOOLONG for a name longer than NAME_MAX bytes (as the kernel gets them:
        UTF-8), checked as the walk reaches it."""
        if len(os.fsencode(part)) > NAME_MAX:
            raise fail(errno.ENAMETOOLONG, path)

    @staticmethod
    def walk_into(parent: Inode | None, path: str) -> None:
        """One step of the path walk: ENOENT when the directory is missing, ENOTDIR when
        it is a file."""
        if parent is None:
            raise fail(errno.ENOENT, path)
        if not parent.is_dir:
            raise fail(errno.ENOTDIR, path)

    def find(self, path: str) -> tuple[str, Inode | None]:
        """resolve() and lookup(); a trailing slash on a file is ENOTDIR."""
        name = self.resolve(path)
        inode = self.lookup(name)
        if path.endswith("/") and inode is not None and not inode.is_dir:
            raise fail(errno.ENOTDIR, path)
        return name, inode

    def lookup(self, path: str) -> Inode | None:
        """The dcache first, then the directory (and remember the answer)."""
        key = self.dcache_key(path)
        inode = self.dcache.get(key)
        if inode is None:
            inode = self.names.get(path)
            if inode is not None:
                self.dcache[key] = inode
        return inode

    def dcache_key(self, path: str) -> str:
        """What the name cache files a lookup under: the whole path."""
        return path

    def forget(self, path: str) -> None:
        """Drop a name from the dcache (every name under it too)."""
        for name in [n for n in self.dcache if n == path or n.startswith(path + "/")]:
            del self.dcache[name]

    def drop_link(self, path: str) -> None:
        inode = self.names.pop(path)
        self.forget(path)
        inode.nlink = 0
        self.iput(inode)

    def iput(self, inode: Inode) -> None:
        """Free a file with no name and no open file."""
        if inode.nlink == 0 and inode.opencount == 0:
            self.drop_folios(inode, 0)
            inode.store.clear()

    # -- the cache -----------------------------------------------------------------------
    def get_folio(self, inode: Inode, index: int, *, read: bool = True) -> Folio:
        """The cached folio of block ``index`` (read from the store unless ``read`` is
        False: the caller overwrites all of it)."""
        key = self.key(inode, index)
        folio = self.cache.get(key)
        if folio is not None:
            self.cache.move_to_end(key)
            return folio
        folio = Folio(inode, index, self.read_folio(inode, index) if read
                      else bytearray(self.blocksize))
        self.cache[key] = folio
        while len(self.cache) > self.cache_folios:
            self.reclaim(next(iter(self.cache.values())))
        return folio

    def reclaim(self, folio: Folio) -> None:
        """Memory pressure: the least recently used folio goes, written back if dirty."""
        self.evict(folio)

    def key(self, inode: Inode, index: int) -> tuple[int, int]:
        return inode.ino, index

    def read_folio(self, inode: Inode, index: int) -> bytearray:
        """A new folio's data: a copy of the block, zeroes for a hole."""
        block = inode.store.get(index)
        return bytearray(self.blocksize) if block is None else bytearray(block)

    def evict(self, folio: Folio) -> None:
        if folio.dirty:
            self.writeback(folio)
        del self.cache[self.key(folio.inode, folio.index)]

    def writeback(self, folio: Folio) -> None:
        folio.inode.store[folio.index] = bytearray(folio.data)
        folio.dirty = False

    def mark_dirty(self, folio: Folio) -> None:
        folio.dirty = True

    def cached(self, inode: Inode) -> list[Folio]:
        return [f for f in self.cache.values() if f.inode is inode]

    def drop_folios(self, inode: Inode, first: int, last: int | None = None) -> None:
        """Remove blocks ``first``..``last`` (inclusive; None: to the end) from the cache
        and the store."""
        def inside(index: int) -> bool:
            return index >= first and (last is None or index <= last)
        for folio in [f for f in self.cached(inode) if inside(f.index)]:
            del self.cache[self.key(inode, folio.index)]
        for index in [i for i in inode.store if inside(i)]:
            del inode.store[index]

    # -- data ----------------------------------------------------------------------------
    def read_range(self, inode: Inode, offset: int, n: int) -> bytes:
        """``n`` bytes from ``offset`` through the cache, not clipped at EOF."""
        parts = []        # views of the folios' data, copied once by the join
        bs = self.blocksize
        while n > 0:
            start = offset % bs
            chunk = min(n, bs - start)
            folio = self.get_folio(inode, offset // bs)
            parts.append(memoryview(folio.data)[start:start + chunk])
            offset += chunk
            n -= chunk
        return b"".join(parts)

    def read_len(self, inode: Inode, n: int, offset: int) -> int:
        """How much of a read of ``n`` at ``offset`` the file holds."""
        return max(0, min(n, inode.size - offset))

    def write_range(self, inode: Inode, data: bytes, offset: int,
                    mark: Callable[[Folio], None] | None = None) -> int:
        mark = mark or self.mark_dirty
        bs = self.blocksize
        done = 0
        source = memoryview(data)       # slices of it are not copies
        while done < len(data):
            pos = offset + done
            start = pos % bs
            chunk = min(len(data) - done, bs - start)
            folio = self.get_folio(inode, pos // bs, read=not self.covers(start, chunk))
            folio.data[start:start + chunk] = source[done:done + chunk]
            mark(folio)
            done += chunk
        return done

    def covers(self, start: int, chunk: int) -> bool:
        """A write of ``chunk`` bytes at ``start`` in a folio overwrites all of it."""
        return start == 0 and chunk == self.blocksize

    def extend(self, inode: Inode, end: int) -> None:
        """i_size after a write or copy that ended at ``end``."""
        inode.size = max(inode.size, end)

    def zero_range(self, inode: Inode, start: int, end: int) -> None:
        """Zero [start, end): whole blocks are freed, the partial ends zeroed."""
        bs = self.blocksize
        first, last = -(-start // bs), end // bs - 1
        if first <= last:
            self.drop_folios(inode, first, last)
        for lo, hi in ((start, min(end, first * bs)), (max(start, (last + 1) * bs), end)):
            if lo < hi and (lo // bs in inode.store or self.key(inode, lo // bs) in self.cache):
                self.write_range(inode, bytes(hi - lo), lo)

    def truncate(self, inode: Inode, length: int) -> None:
        if length < inode.size:
            bs = self.blocksize
            self.zero_tail(inode, length)
            self.drop_folios(inode, -(-length // bs))
        inode.size = length

    def zero_tail(self, inode: Inode, length: int) -> None:
        """Zero the rest of the block that holds the new EOF."""
        end = min(inode.size, -(-length // self.blocksize) * self.blocksize)
        self.zero_range(inode, length, end)

    def allocate(self, inode: Inode, start: int, end: int) -> None:
        bs = self.blocksize
        for index in range(start // bs, -(-end // bs)):
            if index not in inode.store and self.key(inode, index) not in self.cache:
                inode.store[index] = bytearray(bs)

    # -- descriptors ---------------------------------------------------------------------
    def file(self, fd: int, *, read: bool = False, write: bool = False) -> OpenFile:
        f = self.fds.get(fd)
        if f is None or (read and not f.readable) or (write and not f.writable):
            raise fail(errno.EBADF, f"fd {fd}")
        if f.inode.is_dir and (read or write):
            raise fail(errno.EISDIR, f"fd {fd}")
        return f

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if flags & os.O_CREAT and path.endswith("/"):
            self.resolve(path.rstrip("/"))
            raise fail(errno.EISDIR, path)
        name, inode = self.find(path)
        if inode is None:
            if not flags & os.O_CREAT:
                raise fail(errno.ENOENT, path)
            inode = self.names[name] = Inode(next(self._ino))
        elif self.exclusive(flags):
            raise fail(errno.EEXIST, path)
        elif inode.is_dir:
            if flags & (os.O_CREAT | os.O_TRUNC) or flags & os.O_ACCMODE != os.O_RDONLY:
                raise fail(errno.EISDIR, path)
        elif path.endswith("/") or flags & os.O_DIRECTORY:
            raise fail(errno.ENOTDIR, path)
        elif self.truncates(flags):     # Linux truncates even when opened O_RDONLY
            self.o_trunc(inode)
        fd = next(self._fd)
        self.fds[fd] = OpenFile(inode, flags)
        inode.opencount += 1
        return fd

    @staticmethod
    def truncates(flags: int) -> bool:
        return bool(flags & os.O_TRUNC)

    def o_trunc(self, inode: Inode) -> None:
        self.truncate(inode, 0)

    def exclusive(self, flags: int) -> bool:
        return bool(flags & os.O_CREAT and flags & os.O_EXCL)

    def close(self, fd: int) -> None:
        f = self.file(fd)
        del self.fds[fd]
        f.inode.opencount -= 1
        self.release(f.inode)

    def release(self, inode: Inode) -> None:
        """Last close: write the file's folios back and drop them (the cache keeps
        other files' data instead)."""
        if inode.opencount == 0:
            for folio in self.cached(inode):
                self.evict(folio)
        self.iput(inode)

    def umount(self) -> None:
        for fd in list(self.fds):
            self.close(fd)

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        inode = self.file(fd, read=True).inode
        if n < 0 or offset < 0 or offset + n > MAX_FILE_SIZE:
            raise fail(errno.EINVAL, "pread")
        n = self.read_len(inode, n, offset)
        return self.read_range(inode, offset, n) if n else b""

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        f = self.file(fd, write=True)
        if offset < 0 or offset + len(data) > MAX_FILE_SIZE:
            raise fail(errno.EINVAL, "pwrite")
        offset = self.write_offset(f, offset)
        if not data:
            return 0
        data = data[:self.write_limit(offset, len(data))]
        n = self.write_range(f.inode, bytes(data), offset)
        self.extend(f.inode, offset + n)
        return n

    @staticmethod
    def write_limit(offset: int, count: int) -> int:
        """How much of a write at ``offset`` fits below the largest file size (EFBIG
        when none does)."""
        if offset >= MAX_FILE_SIZE:
            raise fail(errno.EFBIG, f"write at {offset}")
        return min(count, MAX_FILE_SIZE - offset)

    def write_offset(self, f: OpenFile, offset: int) -> int:
        return f.inode.size if f.flags & os.O_APPEND else offset

    def ftruncate(self, fd: int, length: int) -> None:
        f = self.fds.get(fd)
        if f is None:
            raise fail(errno.EBADF, f"fd {fd}")
        if not f.writable or f.inode.is_dir or length < 0:
            raise fail(errno.EINVAL, "ftruncate")
        self.truncate(f.inode, length)

    def blocks(self, inode: Inode) -> int:
        """st_blocks: 512-byte units of the blocks stored or dirty in the cache."""
        store = inode.store     # counted without a set of it: fstat follows every fsx op
        held = len(store) + sum(1 for f in self.cached(inode) if f.dirty and f.index not in store)
        return held * self.blocksize // 512

    @staticmethod
    def st_mode(inode: Inode) -> int:
        return (stat.S_IFDIR | 0o755) if inode.is_dir else (stat.S_IFREG | 0o644)

    def _stat(self, inode: Inode) -> os.stat_result:
        return os.stat_result((self.st_mode(inode), inode.ino, 0, inode.nlink, 0, 0,
                               inode.size, 0, 0, 0),
                              {"st_blksize": self.blocksize, "st_blocks": self.blocks(inode)})

    def fstat(self, fd: int) -> os.stat_result:
        return self._stat(self.file(fd).inode)

    def drop_caches(self, path: str) -> None:
        """Write the file's dirty folios back and drop them all from the cache."""
        inode = self.find(path)[1]
        if inode is None:
            raise fail(errno.ENOENT, path)
        for folio in self.cached(inode):
            self.evict(folio)

    def fsync(self, fd: int) -> None:
        for folio in self.cached(self.file(fd).inode):
            if folio.dirty:
                self.writeback(folio)

    # -- fallocate and copy --------------------------------------------------------------
    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        what = f"fallocate(mode={mode:#x}, {offset}, {length})"
        self.file(fd)
        if self.bad_range(offset, length):
            raise fail(errno.EINVAL, what)
        op, keep = mode & MODE_MASK, bool(mode & FALLOC_FL_KEEP_SIZE)
        if self.bad_mode(mode):
            raise fail(errno.EOPNOTSUPP, what)
        inode = self.file(fd, write=True).inode
        if offset + length > MAX_FILE_SIZE:
            raise fail(errno.EFBIG, what)
        if _FEATURE[op] not in self.features:
            raise fail(errno.EOPNOTSUPP, what)
        end = offset + length
        if op in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE):
            self.shift(inode, op, offset, length)
            return
        if op:      # punch hole, zero range
            self.zero_range(inode, offset, min(end, inode.size) if keep else end)
        if op != FALLOC_FL_PUNCH_HOLE:
            self.allocate(inode, offset, end)
            if not keep:
                self.extend(inode, end)

    @staticmethod
    def bad_range(offset: int, length: int) -> bool:
        return offset < 0 or length <= 0

    @staticmethod
    def bad_mode(mode: int) -> bool:
        """vfs_fallocate's mode rules."""
        op, keep = mode & MODE_MASK, mode & FALLOC_FL_KEEP_SIZE
        return bool(mode & ~(MODE_MASK | FALLOC_FL_KEEP_SIZE) or op not in _FEATURE
                    or (op == FALLOC_FL_PUNCH_HOLE and not keep)
                    or (op in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE) and keep))

    def shift(self, inode: Inode, op: int, offset: int, length: int) -> None:
        """Collapse or insert range: block aligned, inside the file."""
        if not self.aligned(offset, length):
            raise fail(errno.EINVAL, "collapse/insert range: not block aligned")
        size = inode.size
        if op == FALLOC_FL_COLLAPSE_RANGE:
            if offset + length >= size:
                raise fail(errno.EINVAL, "collapse range reaches EOF")
            src, dst, new = offset + length, offset, size - length
        else:
            if offset >= size:
                raise fail(errno.EINVAL, "insert range at or past EOF")
            if size + length > MAX_FILE_SIZE:
                raise fail(errno.EFBIG, "insert range past the largest file size")
            src, dst, new = offset, offset + length, size + length
        if (src | dst) % self.blocksize:        # only a bug's alignment check lets it in
            tail = self.read_range(inode, src, size - src)
            self.truncate(inode, offset)
            self.write_range(inode, tail, dst)
        else:
            self.move_blocks(inode, src // self.blocksize, dst // self.blocksize)
        inode.size = new

    def move_blocks(self, inode: Inode, src: int, dst: int) -> None:
        """Blocks ``src`` on move to ``dst`` on (written back first; those from
        min(src, dst) on that are not moved are freed): sparse files stay sparse."""
        for folio in self.cached(inode):
            self.evict(folio)
        low = min(src, dst)
        moved = {i - src + dst: b for i, b in inode.store.items() if i >= src}
        for i in [i for i in inode.store if i >= low]:
            del inode.store[i]
        inode.store.update(moved)

    def aligned(self, offset: int, length: int) -> bool:
        return not (offset | length) % self.blocksize

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        if "copy_range" not in self.features:
            raise fail(errno.EOPNOTSUPP, "copy_file_range")
        fin, fout = self.file(src), self.file(dst)
        if fin.inode.is_dir or fout.inode.is_dir:
            raise fail(errno.EISDIR, "copy_file_range")
        if not fin.readable or not fout.writable or fout.flags & os.O_APPEND:
            raise fail(errno.EBADF, "copy_file_range")
        if count < 0 or offset_src < 0 or offset_dst < 0:
            raise fail(errno.EINVAL, "copy_file_range")
        count = self.write_limit(offset_dst, self.copy_len(fin.inode, count, offset_src))
        if fin.inode is fout.inode and self.overlap(offset_src, offset_dst, count):
            raise fail(errno.EINVAL, "copy_file_range: overlapping ranges of one file")
        return self.copy_data(fin.inode, fout.inode, count, offset_src, offset_dst)

    def copy_len(self, inode: Inode, count: int, offset: int) -> int:
        return self.read_len(inode, count, offset)

    def copy_data(self, src: Inode, dst: Inode, count: int, offset_src: int,
                  offset_dst: int) -> int:
        if count == 0:
            return 0
        n = self.write_range(dst, self.read_range(src, offset_src, count), offset_dst)
        self.extend(dst, offset_dst + n)
        return n

    @staticmethod
    def overlap(a: int, b: int, count: int) -> bool:
        return a < b + count and b < a + count

    # -- shared mappings -----------------------------------------------------------------
    def _mapped(self, fd: int, offset: int, length: int, write: bool) -> Inode:
        if "mmap" not in self.features:
            raise fail(errno.EOPNOTSUPP, "mmap")
        f = self.fds.get(fd)
        if f is None:
            raise fail(errno.EBADF, f"fd {fd}")
        if length == 0:                  # nothing is mapped, nothing can fault
            return f.inode
        pages = -(-(offset % PAGE_SIZE + length) // PAGE_SIZE) * PAGE_SIZE
        if not f.inode.is_dir and offset // PAGE_SIZE > (MAX_FILE_SIZE - pages) // PAGE_SIZE:
            raise fail(errno.EOVERFLOW, "mmap: past the largest file size")
        if not f.readable or (write and not f.writable):
            raise fail(errno.EACCES, "mmap")
        if f.inode.is_dir:
            raise fail(errno.ENODEV, "mmap")
        check_mapped_range(offset, length, f.inode.size)
        return f.inode

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        inode = self._mapped(fd, offset, length, write=False)
        return self.read_range(inode, offset, length)

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        inode = self._mapped(fd, offset, len(data), write=True)
        keep = max(0, min(len(data), inode.size - offset))   # stores past EOF are lost
        if keep:
            self.mapped_store(inode, bytes(data[:keep]), offset)

    def mapped_store(self, inode: Inode, data: bytes, offset: int) -> None:
        """Stores through the mapping, then msync."""
        self.write_range(inode, data, offset, self.page_mkwrite)

    def page_mkwrite(self, folio: Folio) -> None:
        """The first store to a mapped folio dirties it."""
        self.mark_dirty(folio)

    # -- directories ---------------------------------------------------------------------
    def unlink(self, path: str) -> None:
        name, inode = self.find(path)
        if inode is None:
            raise fail(errno.ENOENT, path)
        if inode.is_dir:
            raise fail(errno.EISDIR, path)
        self.drop_link(name)

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        name = self.resolve(path)
        if self.taken(name):
            raise fail(errno.EEXIST, path)
        self.names[name] = Inode(next(self._ino), is_dir=True, nlink=2)

    def taken(self, name: str) -> bool:
        """mkdir's check: something, file or directory, already has the name."""
        return name in self.names

    def directory(self, path: str) -> str:
        """The name of the directory at ``path``: ENOENT when nothing is there, ENOTDIR
        when a file is."""
        name = self.resolve(path)
        inode = self.names.get(name)
        if inode is None:
            raise fail(errno.ENOENT, path)
        if not inode.is_dir:
            raise fail(errno.ENOTDIR, path)
        return name

    def rmdir(self, path: str) -> None:
        name = self.directory(path)
        if not name:
            raise fail(errno.EBUSY, path)
        if self.listdir(name):
            raise fail(errno.ENOTEMPTY, path)
        self.drop_link(name)

    def rename(self, src: str, dst: str) -> None:
        old, new = self.resolve(src), self.resolve(dst)
        inode = self.names.get(old)
        if inode is None:
            raise fail(errno.ENOENT, src)
        if not inode.is_dir and (src.endswith("/") or dst.endswith("/")):
            raise fail(errno.ENOTDIR, f"rename {src} {dst}")
        if not old or not new or self.inside(new, old):
            raise fail(errno.EINVAL, f"rename {src} {dst}")
        if old.startswith(new + "/"):      # the target is an ancestor of the source
            raise fail(errno.ENOTEMPTY, f"rename {src} {dst}")
        target = self.names.get(new)
        if target is inode:
            return
        if target is not None:
            self.may_replace(inode, target, new)
            self.replace_target(new)
        for name in self.subtree(old):
            self.names[new + name[len(old):]] = self.names.pop(name)
        self.forget(old)

    @staticmethod
    def inside(new: str, old: str) -> bool:
        """``new`` is below the directory ``old`` (a rename there is EINVAL)."""
        return new.startswith(old + "/")

    def may_replace(self, inode: Inode, target: Inode, new: str) -> None:
        """rename's checks on an existing target: the same type, an empty directory."""
        if target.is_dir != inode.is_dir:
            raise fail(errno.EISDIR if target.is_dir else errno.ENOTDIR, new)
        if target.is_dir and self.listdir(new):
            raise fail(errno.ENOTEMPTY, new)

    def subtree(self, path: str) -> list[str]:
        """``path`` and every name under it: what a rename of ``path`` moves."""
        return [n for n in self.names if n == path or n.startswith(path + "/")]

    def replace_target(self, name: str) -> None:
        """rename's target loses its name (and its data once no file holds it)."""
        self.drop_link(name)

    def listdir(self, path: str) -> list[str]:
        name = self.directory(path)
        prefix = f"{name}/" if name else ""
        return sorted(n[len(prefix):] for n in self.names
                      if n and n.startswith(prefix) and "/" not in n[len(prefix):])

    def stat(self, path: str) -> os.stat_result:
        inode = self.find(path)[1]
        if inode is None:
            raise fail(errno.ENOENT, path)
        return self._stat(inode)
