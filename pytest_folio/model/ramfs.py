"""ramfs with the ``blocksize`` mount option, on the reference page cache (fs/ramfs/inode.c
plus the seed patch "ramfs: enable block size > page size").

File data lives only in the page cache: ``read_folio`` zero-fills (simple_read_folio),
writes leave folios dirty, there is no writepage and the mappings are unevictable, so
nothing is ever written back or reclaimed. A regular file's mapping gets the minimum folio
order log2(blocksize / PAGE_SIZE), as the patch does with mapping_set_folio_min_order.
The reference also caps the maximum order at the minimum: ramfs writes go through
simple_write_begin, which asks for the minimum order only, so every folio of a file has
exactly that order (the kernel may read holes ahead into larger folios; nothing else
differs). That is what makes the seed's dd table: the bigger the block size, the fewer
folios a write creates.

Unlike the seed patch, a block size out of range is EINVAL, not silently clamped.

The default mount supports what kernel ramfs does: read, write, truncate, shared mmap
read and write, fsync as a no-op, copy_file_range (the kernel's generic splice path), and
fallocate is EOPNOTSUPP. ``features="full"`` adds fallocate (with and without
KEEP_SIZE), punch hole, zero range, collapse range and insert range, with ext4/xfs's
block-size alignment rules, each built on the page cache's truncate and split rules.
Errors are the errnos Linux gives, in Linux's order of checks.
"""

from __future__ import annotations

import errno
import os
import stat as statmod
import time
from typing import NoReturn

from pytest_folio.model.constants import MAX_PAGECACHE_ORDER, PAGE_SHIFT, PAGE_SIZE
from pytest_folio.model.filemap import FGP_CREAT, FGP_LOCK, AddressSpace
from pytest_folio.model.folio import Folio, folio_put, folio_zero_range
from pytest_folio.model.memory import PhysicalMemory
from pytest_folio.model.stats import Stats
from pytest_folio.sizes import format_size, ilog2, is_power_of_two, parse_size
from pytest_folio.uapi import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
)

RAMFS_MAGIC = 0x858458F6
NAME_MAX = 255
MAX_LFS_FILESIZE = (1 << 63) - 1
DEFAULT_MEMORY = 256 << 20

# include/uapi/linux/falloc.h, the modes vfs_fallocate knows but the FileSystem protocol
# does not use
FALLOC_FL_UNSHARE_RANGE = 0x40
FALLOC_FL_WRITE_ZEROES = 0x80
FALLOC_FL_MODE_MASK = (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_ZERO_RANGE
                       | FALLOC_FL_INSERT_RANGE | FALLOC_FL_UNSHARE_RANGE
                       | FALLOC_FL_WRITE_ZEROES)

DEFAULT_FEATURES = frozenset({"mmap", "copy_range"})
FULL_FEATURES = DEFAULT_FEATURES | {"fallocate", "punch_hole", "zero_range", "collapse_range",
                                    "insert_range"}


def _fail(err: int, what: str) -> NoReturn:
    raise OSError(err, f"{what}: {os.strerror(err)}")


MIN_BLOCKSIZE = PAGE_SIZE
MAX_BLOCKSIZE = PAGE_SIZE << MAX_PAGECACHE_ORDER


def parse_block_size(value: int | str) -> int:
    """The ``blocksize`` mount option: a power of two from 4K to 2M, as bytes or a size
    such as ``"16k"``. The seed patch clamps anything else silently; we refuse it."""
    size = value if isinstance(value, int) else parse_size(value)
    if not is_power_of_two(size) or not MIN_BLOCKSIZE <= size <= MAX_BLOCKSIZE:
        raise ValueError(f"block size {size} must be a power of two from "
                         f"{format_size(MIN_BLOCKSIZE)} to {format_size(MAX_BLOCKSIZE)}")
    return size


class RamfsAops:
    """ramfs_aops: read_folio zero-fills; no writepage, so dirty folios stay dirty."""

    def read_folio(self, folio: Folio) -> None:
        folio_zero_range(folio, 0, folio.size)


class Inode:
    """A ramfs inode. Regular files own ``i_mapping``; directories own ``children``."""

    def __init__(self, ino: int, mode: int, parent: Inode | None, blkbits: int,
                 mapping: AddressSpace | None) -> None:
        now = time.time_ns()
        self.i_ino = ino
        self.i_mode = mode
        self.i_nlink = 2 if statmod.S_ISDIR(mode) else 1
        self.i_size = 0
        self.i_blkbits = blkbits
        self.i_mapping = mapping
        self.i_atime = self.i_mtime = self.i_ctime = now
        self.children: dict[str, Inode] | None = {} if statmod.S_ISDIR(mode) else None
        self.parent = parent if parent is not None else self
        self.i_opencount = 0

    @property
    def is_dir(self) -> bool:
        return self.children is not None

    def touch(self) -> None:
        self.i_mtime = self.i_ctime = time.time_ns()

    def __repr__(self) -> str:
        kind = "dir" if self.is_dir else "file"
        return f"<ramfs {kind} inode {self.i_ino} size={self.i_size} {self.i_mapping!r}>"


class OpenFile:
    """struct file: the inode and the access an fd was opened with."""

    __slots__ = ("flags", "inode", "readable", "writable")

    def __init__(self, inode: Inode, flags: int) -> None:
        acc = flags & os.O_ACCMODE
        self.inode = inode
        self.flags = flags
        self.readable = acc in (os.O_RDONLY, os.O_RDWR)
        self.writable = acc in (os.O_WRONLY, os.O_RDWR)


class Ramfs:
    """A mounted ramfs: the FileSystem protocol over the reference page cache.

    ``blocksize`` takes bytes or a size such as ``"16k"``; ``memory`` is the size of the
    model's physical memory (one buddy-allocated buffer shared by every file);
    ``ramfs.memory`` and ``ramfs.stats`` are the model objects, and
    ``lookup(path).i_mapping`` a file's page cache, for tests to inspect.
    """

    def __init__(self, blocksize: int | str = PAGE_SIZE, features: str = "default",
                 memory: int = DEFAULT_MEMORY, *, stats: Stats | None = None) -> None:
        try:
            blocksize = parse_block_size(blocksize)
        except (ValueError, TypeError) as exc:
            raise OSError(errno.EINVAL, f"ramfs: blocksize={blocksize!r}: {exc}") from None
        if features not in ("default", "full"):
            raise OSError(errno.EINVAL,
                          f"ramfs: features={features!r}: use 'default' or 'full'")
        self.blocksize = blocksize
        self.blkbits = ilog2(blocksize)
        self.min_order = self.blkbits - PAGE_SHIFT
        self.features = FULL_FEATURES if features == "full" else DEFAULT_FEATURES
        self.stats = stats if stats is not None else Stats()
        try:
            self.memory = PhysicalMemory(memory, self.stats)
        except ValueError as exc:
            raise OSError(errno.EINVAL, f"ramfs: memory={memory!r}: {exc}") from None
        self.a_ops = RamfsAops()
        self._next_ino = 1
        self.root = self._new_inode(statmod.S_IFDIR | 0o755, None)
        self._files: dict[int, OpenFile] = {}

    def __repr__(self) -> str:
        return (f"Ramfs(blocksize={self.blocksize}, features="
                f"{'full' if 'fallocate' in self.features else 'default'})")

    # -- inodes ---------------------------------------------------------------------------
    def _new_inode(self, mode: int, parent: Inode | None) -> Inode:
        """ramfs_get_inode: regular files get a mapping at the block size's folio order."""
        mapping = None
        if statmod.S_ISREG(mode):
            mapping = AddressSpace(self.memory, self.a_ops, self.stats)
            mapping.mapping_set_folio_order_range(self.min_order, self.min_order)
            mapping.unevictable = True
            mapping.i_size = 0
        inode = Inode(self._next_ino, mode, parent, self.blkbits, mapping)
        self._next_ino += 1
        return inode

    def _iput(self, inode: Inode) -> None:
        """Free a file's pages once it has no name and no open file."""
        if inode.i_nlink == 0 and inode.i_opencount == 0 and inode.i_mapping is not None:
            inode.i_mapping.truncate_inode_pages_range(0, -1)

    def _set_size(self, inode: Inode, size: int) -> None:
        inode.i_size = size
        assert inode.i_mapping is not None
        inode.i_mapping.i_size = size

    # -- path walk --------------------------------------------------------------------------
    def _step(self, directory: Inode, name: str, path: str) -> Inode:
        if directory.children is None:
            _fail(errno.ENOTDIR, path)
        if len(name) > NAME_MAX:
            _fail(errno.ENAMETOOLONG, path)
        if name == ".":
            return directory
        if name == "..":
            return directory.parent
        child = directory.children.get(name)
        if child is None:
            _fail(errno.ENOENT, path)
        return child

    def _walk(self, path: str) -> tuple[Inode, str, Inode | None, bool]:
        """(parent directory, last name, its inode or None, trailing slash); the root is
        its own parent with the name ''."""
        parts = [p for p in path.split("/") if p]
        trailing = path.endswith("/")
        if not parts:
            return self.root, "", self.root, trailing
        directory = self.root
        for name in parts[:-1]:
            directory = self._step(directory, name, path)
        name = parts[-1]
        if directory.children is None:
            _fail(errno.ENOTDIR, path)
        if len(name) > NAME_MAX:
            _fail(errno.ENAMETOOLONG, path)
        if name in (".", ".."):
            return directory, name, self._step(directory, name, path), trailing
        return directory, name, directory.children.get(name), trailing

    def _ancestors(self, directory: Inode) -> list[Inode]:
        """``directory`` and every directory above it, up to the root."""
        chain = [directory]
        while chain[-1] is not self.root:
            chain.append(chain[-1].parent)
        return chain

    def lookup(self, path: str) -> Inode:
        """The inode at ``path`` (ENOENT, ENOTDIR as the kernel's path walk)."""
        _, _, inode, trailing = self._walk(path)
        if inode is None:
            _fail(errno.ENOENT, path)
        if trailing and not inode.is_dir:
            _fail(errno.ENOTDIR, path)
        return inode

    def file_inode(self, fd: int) -> Inode:
        return self._file(fd).inode

    def _file(self, fd: int) -> OpenFile:
        f = self._files.get(fd)
        if f is None:
            _fail(errno.EBADF, f"fd {fd}")
        return f

    # -- open files ---------------------------------------------------------------------------
    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        parent, name, inode, trailing = self._walk(path)
        created = False
        if flags & os.O_CREAT and trailing:       # open_last_lookups: O_CREAT wants a file
            _fail(errno.EISDIR, path)
        if inode is None:
            if not flags & os.O_CREAT:
                _fail(errno.ENOENT, path)
            assert parent.children is not None
            inode = self._new_inode(statmod.S_IFREG | (mode & 0o7777), parent)
            parent.children[name] = inode
            parent.touch()
            created = True
        elif flags & os.O_CREAT and flags & os.O_EXCL:
            _fail(errno.EEXIST, path)
        elif inode.is_dir:
            if flags & (os.O_CREAT | os.O_TRUNC) or flags & os.O_ACCMODE != os.O_RDONLY:
                _fail(errno.EISDIR, path)
        elif trailing or flags & os.O_DIRECTORY:
            _fail(errno.ENOTDIR, path)
        if not created and flags & os.O_TRUNC and not inode.is_dir:
            self._truncate_setsize(inode, 0)
        fd = 3
        while fd in self._files:
            fd += 1
        self._files[fd] = OpenFile(inode, flags)
        inode.i_opencount += 1
        return fd

    def close(self, fd: int) -> None:
        f = self._file(fd)
        del self._files[fd]
        f.inode.i_opencount -= 1
        self._iput(f.inode)

    def umount(self) -> None:
        """Close every open file (what a test's teardown does)."""
        for fd in list(self._files):
            self.close(fd)

    def _regular(self, fd: int, *, read: bool = False, write: bool = False) -> tuple[
            OpenFile, Inode, AddressSpace]:
        """The fd's file for I/O: EBADF without the access, EISDIR on a directory."""
        f = self._file(fd)
        if (read and not f.readable) or (write and not f.writable):
            _fail(errno.EBADF, f"fd {fd}")
        if f.inode.i_mapping is None:
            _fail(errno.EISDIR, f"fd {fd}")
        return f, f.inode, f.inode.i_mapping

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        _, inode, mapping = self._regular(fd, read=True)
        if offset < 0 or n < 0:
            _fail(errno.EINVAL, f"pread(fd {fd}, {n}, {offset})")
        n = min(n, inode.i_size - offset)
        return mapping.filemap_read(offset, n) if n > 0 else b""

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
        f, inode, mapping = self._regular(fd, write=True)
        if offset < 0:
            _fail(errno.EINVAL, f"pwrite(fd {fd}, offset {offset})")
        if f.flags & os.O_APPEND:       # Linux's pwrite appends on O_APPEND (see pwrite(2))
            offset = inode.i_size
        if not data:
            return 0
        if offset + len(data) > MAX_LFS_FILESIZE:
            _fail(errno.EFBIG, f"pwrite(fd {fd}, offset {offset})")
        written = mapping.generic_perform_write(offset, data)
        if offset + written > inode.i_size:
            self._set_size(inode, offset + written)
        inode.touch()
        return written

    def _truncate_setsize(self, inode: Inode, size: int) -> None:
        """truncate_setsize + truncate_pagecache: the page cache from ``size`` on is
        truncated even when the file grows (zeroing the rest of the EOF folio)."""
        assert inode.i_mapping is not None
        self._set_size(inode, size)
        inode.i_mapping.truncate_inode_pages_range(size, -1)
        inode.touch()

    def ftruncate(self, fd: int, length: int) -> None:
        f = self._file(fd)
        if not f.writable or f.inode.i_mapping is None or length < 0:
            _fail(errno.EINVAL, f"ftruncate(fd {fd}, {length})")
        if length > MAX_LFS_FILESIZE:
            _fail(errno.EFBIG, f"ftruncate(fd {fd}, {length})")
        self._truncate_setsize(f.inode, length)

    def _stat(self, inode: Inode) -> os.stat_result:
        nrpages = inode.i_mapping.nrpages if inode.i_mapping is not None else 0
        # simple_getattr: st_blocks from the pages the mapping holds
        return os.stat_result(
            (inode.i_mode, inode.i_ino, RAMFS_MAGIC, inode.i_nlink, 0, 0, inode.i_size,
             inode.i_atime // 10**9, inode.i_mtime // 10**9, inode.i_ctime // 10**9),
            {"st_blksize": 1 << inode.i_blkbits, "st_blocks": nrpages << (PAGE_SHIFT - 9),
             "st_atime_ns": inode.i_atime, "st_mtime_ns": inode.i_mtime,
             "st_ctime_ns": inode.i_ctime})

    def fstat(self, fd: int) -> os.stat_result:
        return self._stat(self._file(fd).inode)

    def fsync(self, fd: int) -> None:
        self._file(fd)                  # noop_fsync

    # -- fallocate ----------------------------------------------------------------------------
    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        what = f"fallocate(fd {fd}, mode {mode:#x}, {offset}, {length})"
        f = self._file(fd)
        # vfs_fallocate's checks, in its order
        if offset < 0 or length <= 0:
            _fail(errno.EINVAL, what)
        if mode & ~(FALLOC_FL_MODE_MASK | FALLOC_FL_KEEP_SIZE):
            _fail(errno.EOPNOTSUPP, what)
        op = mode & FALLOC_FL_MODE_MASK
        if op == FALLOC_FL_PUNCH_HOLE:
            if not mode & FALLOC_FL_KEEP_SIZE:
                _fail(errno.EOPNOTSUPP, what)
        elif op in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE, FALLOC_FL_WRITE_ZEROES):
            if mode & FALLOC_FL_KEEP_SIZE:
                _fail(errno.EOPNOTSUPP, what)
        elif op not in (0, FALLOC_FL_UNSHARE_RANGE, FALLOC_FL_ZERO_RANGE):
            _fail(errno.EOPNOTSUPP, what)
        if not f.writable:
            _fail(errno.EBADF, what)
        inode = f.inode
        if inode.i_mapping is None:
            _fail(errno.EISDIR, what)
        if offset + length > MAX_LFS_FILESIZE:
            _fail(errno.EFBIG, what)
        if "fallocate" not in self.features:           # no ->fallocate in ramfs
            _fail(errno.EOPNOTSUPP, what)
        end = offset + length
        keep = bool(mode & FALLOC_FL_KEEP_SIZE)
        if op == 0:
            self._allocate(inode, offset, end)
            if not keep and end > inode.i_size:
                self._set_size(inode, end)
        elif op == FALLOC_FL_PUNCH_HOLE:
            inode.i_mapping.truncate_inode_pages_range(offset, end - 1)
        elif op == FALLOC_FL_ZERO_RANGE:
            inode.i_mapping.truncate_inode_pages_range(offset, end - 1)
            self._allocate(inode, offset, end)
            if not keep and end > inode.i_size:
                self._set_size(inode, end)
        elif op in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE):
            if (offset | length) & (self.blocksize - 1):
                _fail(errno.EINVAL, f"{what}: not aligned to the block size {self.blocksize}")
            if op == FALLOC_FL_COLLAPSE_RANGE:
                if end >= inode.i_size:
                    _fail(errno.EINVAL, f"{what}: reaches EOF ({inode.i_size})")
                self._shift(inode, end, offset)
            else:
                if offset >= inode.i_size:
                    _fail(errno.EINVAL, f"{what}: at or past EOF ({inode.i_size})")
                if inode.i_size + length > MAX_LFS_FILESIZE:
                    _fail(errno.EFBIG, what)
                self._shift(inode, offset, end)
        else:
            _fail(errno.EOPNOTSUPP, what)
        inode.touch()

    def _allocate(self, inode: Inode, start: int, end: int) -> None:
        """Give every page of [start, end) a zeroed, dirty folio (existing data stays)."""
        mapping = inode.i_mapping
        assert mapping is not None
        index, last = start >> PAGE_SHIFT, (end - 1) >> PAGE_SHIFT
        while index <= last:
            folio = mapping.filemap_get_folio_flags(index, FGP_CREAT | FGP_LOCK,
                                                    self.min_order)
            assert folio is not None
            if not folio.uptodate:
                folio_zero_range(folio, 0, folio.size)
                folio.uptodate = True
            mapping.folio_mark_dirty(folio)
            folio.locked = False
            index = folio.index + folio.nr_pages
            folio_put(folio)

    def _shift(self, inode: Inode, src: int, dst: int) -> None:
        """Move the bytes from ``src`` to EOF so they start at ``dst`` (collapse when
        dst < src, insert when dst > src): read them, truncate the page cache from the
        lower offset (the split rules apply), write them back."""
        mapping = inode.i_mapping
        assert mapping is not None
        tail = mapping.filemap_read(src, inode.i_size - src)
        mapping.truncate_inode_pages_range(min(src, dst), -1)
        new_size = dst + len(tail)
        self._set_size(inode, new_size)
        mapping.generic_perform_write(dst, tail)

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        what = f"copy_file_range(fd {src}, fd {dst}, {count}, {offset_src}, {offset_dst})"
        fin, fout = self._file(src), self._file(dst)
        iin, iout = fin.inode, fout.inode
        # generic_copy_file_checks, in its order
        if iin.is_dir or iout.is_dir:
            _fail(errno.EISDIR, what)
        if not fin.readable or not fout.writable or fout.flags & os.O_APPEND:
            _fail(errno.EBADF, what)
        if offset_src < 0 or offset_dst < 0 or count < 0:
            _fail(errno.EINVAL, what)
        count = 0 if offset_src >= iin.i_size else min(count, iin.i_size - offset_src)
        if iin is iout and offset_dst + count > offset_src and offset_dst < offset_src + count:
            _fail(errno.EINVAL, f"{what}: overlapping ranges of one file")
        if count == 0:
            return 0
        assert iin.i_mapping is not None and iout.i_mapping is not None
        data = iin.i_mapping.filemap_read(offset_src, count)
        written = iout.i_mapping.generic_perform_write(offset_dst, data)
        if offset_dst + written > iout.i_size:
            self._set_size(iout, offset_dst + written)
        iout.touch()
        return written

    # -- shared mappings ----------------------------------------------------------------------
    def _mapped(self, fd: int, offset: int, length: int, write: bool) -> Inode:
        """mmap's checks, then the page fault's: SIGBUS (EFAULT here) past the page
        holding EOF."""
        f = self._file(fd)
        if offset < 0:
            _fail(errno.EINVAL, f"mmap(fd {fd}, offset {offset})")
        inode = f.inode
        if not f.readable or (write and not f.writable):     # do_mmap's order
            _fail(errno.EACCES, f"mmap(fd {fd})")
        if inode.i_mapping is None:
            _fail(errno.ENODEV, f"mmap(fd {fd})")
        limit = -(-inode.i_size // PAGE_SIZE) * PAGE_SIZE
        if offset + length > limit:
            raise OSError(
                errno.EFAULT,
                f"mapped access to [{offset}, {offset + length}) goes past the page holding "
                f"EOF (file size {inode.i_size}, mapping ends at {limit}): SIGBUS")
        return inode

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        if length == 0:
            self._file(fd)
            return b""
        inode = self._mapped(fd, offset, length, write=False)
        mapping = inode.i_mapping
        assert mapping is not None
        chunks = []
        end = offset + length
        while offset < end:
            folio = mapping.read_mapping_folio(offset >> PAGE_SHIFT)      # filemap_fault
            start = offset - folio.pos
            n = min(folio.size - start, end - offset)
            chunks.append(bytes(folio.data[start:start + n]))
            folio_put(folio)
            offset += n
        return b"".join(chunks)

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        if not data:
            self._file(fd)
            return
        inode = self._mapped(fd, offset, len(data), write=True)
        mapping = inode.i_mapping
        assert mapping is not None
        src = memoryview(data).cast("B")
        done = 0
        while done < len(src):
            pos = offset + done
            folio = mapping.read_mapping_folio(pos >> PAGE_SHIFT)        # fault + mkwrite
            start = pos - folio.pos
            n = min(folio.size - start, len(src) - done)
            folio.data[start:start + n] = src[done:done + n]
            mapping.folio_mark_dirty(folio)
            folio_put(folio)
            done += n
        inode.touch()

    # -- names ----------------------------------------------------------------------------------
    def _unlink_inode(self, parent: Inode, name: str, inode: Inode) -> None:
        assert parent.children is not None
        del parent.children[name]
        inode.i_nlink = 0
        if inode.is_dir:
            parent.i_nlink -= 1
        parent.touch()
        self._iput(inode)

    def unlink(self, path: str) -> None:
        parent, name, inode, trailing = self._walk(path)
        if inode is None:
            _fail(errno.ENOENT, path)
        if inode.is_dir:
            _fail(errno.EISDIR, path)
        if trailing:
            _fail(errno.ENOTDIR, path)
        self._unlink_inode(parent, name, inode)

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        parent, name, inode, _ = self._walk(path)
        if inode is not None:
            _fail(errno.EEXIST, path)
        assert parent.children is not None
        parent.children[name] = self._new_inode(statmod.S_IFDIR | (mode & 0o7777), parent)
        parent.i_nlink += 1
        parent.touch()

    def rmdir(self, path: str) -> None:
        parent, name, inode, _ = self._walk(path)
        if inode is None:
            _fail(errno.ENOENT, path)
        if inode is self.root:
            _fail(errno.EBUSY, path)
        if name == ".":
            _fail(errno.EINVAL, path)
        if name == "..":
            _fail(errno.ENOTEMPTY, path)
        if not inode.is_dir:
            _fail(errno.ENOTDIR, path)
        if inode.children:
            _fail(errno.ENOTEMPTY, path)
        self._unlink_inode(parent, name, inode)

    def rename(self, src: str, dst: str) -> None:
        what = f"rename({src!r}, {dst!r})"
        sparent, sname, sinode, strailing = self._walk(src)
        dparent, dname, dinode, dtrailing = self._walk(dst)      # both parents first
        if sinode is None:
            _fail(errno.ENOENT, what)
        if sinode is self.root or sname in (".", "..") or dname in (".", "..") or not dname:
            _fail(errno.EBUSY if sinode is self.root or not dname else errno.EINVAL, what)
        if not sinode.is_dir and (strailing or dtrailing):
            _fail(errno.ENOTDIR, what)
        # do_renameat2's trap checks, before the types are compared
        if sparent is not dparent:
            if sinode in self._ancestors(dparent):
                _fail(errno.EINVAL, f"{what}: a directory cannot move into itself")
            if dinode is not None and dinode in self._ancestors(sparent):
                _fail(errno.ENOTEMPTY, f"{what}: the target is an ancestor of the source")
        if dinode is sinode:
            return
        if dinode is not None:
            if sinode.is_dir and not dinode.is_dir:
                _fail(errno.ENOTDIR, what)
            if not sinode.is_dir and dinode.is_dir:
                _fail(errno.EISDIR, what)
            if dinode.children:
                _fail(errno.ENOTEMPTY, what)
            self._unlink_inode(dparent, dname, dinode)
        assert sparent.children is not None and dparent.children is not None
        del sparent.children[sname]
        dparent.children[dname] = sinode
        if sinode.is_dir:
            sparent.i_nlink -= 1
            dparent.i_nlink += 1
            sinode.parent = dparent
        sparent.touch()
        dparent.touch()
        sinode.i_ctime = time.time_ns()

    def listdir(self, path: str) -> list[str]:
        inode = self.lookup(path)
        if inode.children is None:
            _fail(errno.ENOTDIR, path)
        return sorted(inode.children)

    def stat(self, path: str) -> os.stat_result:
        return self._stat(self.lookup(path))
