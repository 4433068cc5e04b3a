"""The VFS half of a mounted file system: inodes, the fd table, the path walk, and the
system calls' generic checks (fs/namei.c, fs/open.c, fs/read_write.c, vfs_fallocate,
generic_copy_file_checks, filemap_fault), in Linux's order, with Linux's errnos.

A file system (:class:`~pytest_folio.model.ramfs.Ramfs`) subclasses :class:`Vfs` and
gives what the kernel asks of it: a page cache for each new regular file
(:meth:`Vfs._new_mapping`, its part of ``*_get_inode``) and ``->fallocate``
(:meth:`Vfs._fallocate`). File data always goes through the file's page cache.
"""

from __future__ import annotations

import errno
import os
import stat as statmod
import time
from abc import ABC, abstractmethod
from typing import NoReturn

from pytest_folio.linux.uapi import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
)
from pytest_folio.model.constants import PAGE_SHIFT, PAGE_SIZE
from pytest_folio.model.filemap import AddressSpace
from pytest_folio.model.folio import folio_put

NAME_MAX = 255
MAX_LFS_FILESIZE = (1 << 63) - 1        # a 64-bit kernel's, and ramfs's and tmpfs's s_maxbytes
ULONG_MAX = SIZE_MAX = (1 << 64) - 1    # a 64-bit kernel's unsigned long and size_t
LOFF_MIN, LOFF_MAX = -(1 << 63), (1 << 63) - 1      # loff_t


def name_too_long(name: str) -> bool:
    """Whether a path component is over NAME_MAX, which counts the bytes the kernel
    gets (os.fsencode's: UTF-8, two bytes for an 'é'), not Python's characters."""
    return len(name) > NAME_MAX // 4 and len(os.fsencode(name)) > NAME_MAX

# include/uapi/linux/falloc.h, the modes vfs_fallocate knows but the FileSystem protocol
# does not use
FALLOC_FL_UNSHARE_RANGE = 0x40
FALLOC_FL_WRITE_ZEROES = 0x80
FALLOC_FL_MODE_MASK = (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_ZERO_RANGE
                       | FALLOC_FL_INSERT_RANGE | FALLOC_FL_UNSHARE_RANGE
                       | FALLOC_FL_WRITE_ZEROES)



def raise_errno(err: int, what: str) -> NoReturn:
    raise OSError(err, f"{what}: {os.strerror(err)}")


def not_c_values(*loffs: int, count: int = 0) -> bool:
    """Whether a number is one no system call can be given (an offset no loff_t holds,
    a count no size_t holds). Those are EINVAL before anything else, as the directory
    target's C layer refuses them, so the two agree."""
    return not (all(LOFF_MIN <= value <= LOFF_MAX for value in loffs)
                and 0 <= count <= SIZE_MAX)


def write_check_limits(pos: int, count: int, what: str) -> int:
    """generic_write_check_limits: EFBIG at or past the largest file size, else the
    count cut to end there (a short write, not an error)."""
    if pos >= MAX_LFS_FILESIZE:
        raise_errno(errno.EFBIG, what)
    return min(count, MAX_LFS_FILESIZE - pos)


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


class Vfs(ABC):
    """The system calls of the FileSystem protocol over inodes with page caches.

    A subclass sets ``s_magic`` and ``blkbits`` and calls ``super().__init__()`` once it
    can make mappings (the root directory is created here).
    """

    s_magic: int
    blkbits: int

    def __init__(self) -> None:
        self._next_ino = 1
        self.root = self._new_inode(statmod.S_IFDIR | 0o755, None)
        self._files: dict[int, OpenFile] = {}

    # -- what the file system provides ---------------------------------------------------
    @abstractmethod
    def _new_mapping(self) -> AddressSpace:
        """The page cache of a new regular file (the file system's ``*_get_inode``)."""

    # -- inodes ---------------------------------------------------------------------------
    def _new_inode(self, mode: int, parent: Inode | None) -> Inode:
        mapping = self._new_mapping() if statmod.S_ISREG(mode) else None
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
            raise_errno(errno.ENOTDIR, path)
        if name_too_long(name):
            raise_errno(errno.ENAMETOOLONG, path)
        if name == ".":
            return directory
        if name == "..":
            return directory.parent
        child = directory.children.get(name)
        if child is None:
            raise_errno(errno.ENOENT, path)
        return child

    def _walk(self, path: str, *, lookup: bool = True) -> tuple[Inode, str, Inode | None,
                                                                  bool]:
        """(parent directory, last name, its inode or None, trailing slash); the root is
        its own parent with the name ''. ``lookup=False``: the last name is not looked
        up yet (its ENAMETOOLONG is the caller's, where the kernel's lookup is)."""
        parts = [p for p in path.split("/") if p]
        trailing = path.endswith("/")
        if not parts:
            return self.root, "", self.root, trailing
        directory = self.root
        for name in parts[:-1]:
            directory = self._step(directory, name, path)
        name = parts[-1]
        if directory.children is None:
            raise_errno(errno.ENOTDIR, path)
        if lookup and name_too_long(name):
            raise_errno(errno.ENAMETOOLONG, path)
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
            raise_errno(errno.ENOENT, path)
        if trailing and not inode.is_dir:
            raise_errno(errno.ENOTDIR, path)
        return inode

    def file_inode(self, fd: int) -> Inode:
        return self._file(fd).inode

    def _file(self, fd: int) -> OpenFile:
        f = self._files.get(fd)
        if f is None:
            raise_errno(errno.EBADF, f"fd {fd}")
        return f

    # -- open files ---------------------------------------------------------------------------
    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if flags & os.O_CREAT and flags & os.O_DIRECTORY:     # build_open_flags, Linux 6.4+
            raise_errno(errno.EINVAL, f"{path}: O_CREAT|O_DIRECTORY")
        parent, name, inode, trailing = self._walk(path)
        created = False
        if flags & os.O_CREAT and trailing:       # open_last_lookups: O_CREAT wants a file
            raise_errno(errno.EISDIR, path)
        if inode is None:
            if not flags & os.O_CREAT:
                raise_errno(errno.ENOENT, path)
            assert parent.children is not None
            inode = self._new_inode(statmod.S_IFREG | (mode & 0o7777), parent)
            parent.children[name] = inode
            parent.touch()
            created = True
        elif flags & os.O_CREAT and flags & os.O_EXCL:
            raise_errno(errno.EEXIST, path)
        elif inode.is_dir:
            if flags & (os.O_CREAT | os.O_TRUNC) or flags & os.O_ACCMODE != os.O_RDONLY:
                raise_errno(errno.EISDIR, path)
        elif trailing or flags & os.O_DIRECTORY:
            raise_errno(errno.ENOTDIR, path)
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

    def _rw_checks(self, fd: int, count: int, offset: int, *, write: bool) -> OpenFile:
        """ksys_pread64/ksys_pwrite64, vfs_read/vfs_write and rw_verify_area, in their
        order: a negative offset before the descriptor, then its access, then the end
        past MAX_LFS_FILESIZE. Numbers no C type holds are refused first, as
        :func:`not_c_values` says."""
        err = errno.EINVAL if not (0 <= offset <= LOFF_MAX and 0 <= count <= SIZE_MAX) else 0
        if not err:
            f = self._files.get(fd)
            if f is None or not (f.writable if write else f.readable):
                err = errno.EBADF
            elif offset + count > MAX_LFS_FILESIZE:
                err = errno.EINVAL
            else:
                return f
        raise_errno(err, f"{'pwrite' if write else 'pread'}(fd {fd}, {count}, {offset})")

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        inode = self._rw_checks(fd, n, offset, write=False).inode
        mapping = inode.i_mapping
        if mapping is None:                     # generic_read_dir
            raise_errno(errno.EISDIR, f"pread(fd {fd})")
        n = min(n, inode.i_size - offset)
        return mapping.filemap_read(offset, n) if n > 0 else b""

    def pwrite(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
        f = self._rw_checks(fd, len(data), offset, write=True)
        inode, mapping = f.inode, f.inode.i_mapping
        assert mapping is not None      # a directory is never open for writing
        if f.flags & os.O_APPEND:       # Linux's pwrite appends on O_APPEND (see pwrite(2))
            offset = inode.i_size
        if not data:
            return 0
        if offset + len(data) > MAX_LFS_FILESIZE:    # an O_APPEND offset: EFBIG or short
            data = data[:write_check_limits(offset, len(data), f"pwrite(fd {fd}, {offset})")]
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
        # do_sys_ftruncate: a negative length before the descriptor (and one past
        # s_maxbytes, MAX_LFS_FILESIZE, is no loff_t: not_c_values)
        if not 0 <= length <= LOFF_MAX:
            raise_errno(errno.EINVAL, f"ftruncate(fd {fd}, {length})")
        f = self._file(fd)
        if not f.writable or f.inode.i_mapping is None:                 # do_ftruncate
            raise_errno(errno.EINVAL, f"ftruncate(fd {fd}, {length})")
        self._truncate_setsize(f.inode, length)

    def _stat(self, inode: Inode) -> os.stat_result:
        nrpages = inode.i_mapping.nrpages if inode.i_mapping is not None else 0
        atime, mtime, ctime = inode.i_atime, inode.i_mtime, inode.i_ctime
        # simple_getattr (st_blocks: the pages cached); all fields as one sequence, 3x cheaper
        return os.stat_result(
            (inode.i_mode, inode.i_ino, self.s_magic, inode.i_nlink, 0, 0, inode.i_size,
             atime // 10**9, mtime // 10**9, ctime // 10**9, atime / 1e9, mtime / 1e9,
             ctime / 1e9, atime, mtime, ctime, 1 << inode.i_blkbits,
             nrpages << (PAGE_SHIFT - 9), 0))

    def fstat(self, fd: int) -> os.stat_result:
        return self._stat(self._file(fd).inode)

    def fsync(self, fd: int) -> None:
        self._file(fd)                  # noop_fsync

    # -- fallocate ----------------------------------------------------------------------------
    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        what = f"fallocate(fd {fd}, mode {mode:#x}, {offset}, {length})"
        if not_c_values(offset, length):
            raise_errno(errno.EINVAL, what)
        f = self._file(fd)
        # vfs_fallocate's checks, in its order
        if offset < 0 or length <= 0:
            raise_errno(errno.EINVAL, what)
        if mode & ~(FALLOC_FL_MODE_MASK | FALLOC_FL_KEEP_SIZE):
            raise_errno(errno.EOPNOTSUPP, what)
        op = mode & FALLOC_FL_MODE_MASK
        if op == FALLOC_FL_PUNCH_HOLE:
            if not mode & FALLOC_FL_KEEP_SIZE:
                raise_errno(errno.EOPNOTSUPP, what)
        elif op in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE, FALLOC_FL_WRITE_ZEROES):
            if mode & FALLOC_FL_KEEP_SIZE:
                raise_errno(errno.EOPNOTSUPP, what)
        elif op not in (0, FALLOC_FL_UNSHARE_RANGE, FALLOC_FL_ZERO_RANGE):
            raise_errno(errno.EOPNOTSUPP, what)
        if not f.writable:
            raise_errno(errno.EBADF, what)
        inode = f.inode
        if inode.i_mapping is None:
            raise_errno(errno.EISDIR, what)
        if offset + length > MAX_LFS_FILESIZE:
            raise_errno(errno.EFBIG, what)
        self._fallocate(inode, mode & FALLOC_FL_MODE_MASK, bool(mode & FALLOC_FL_KEEP_SIZE),
                        offset, length, what)
        inode.touch()

    @abstractmethod
    def _fallocate(self, inode: Inode, op: int, keep: bool, offset: int, length: int,
                   what: str) -> None:
        """The file system's ->fallocate, after vfs_fallocate's checks: EOPNOTSUPP where
        it has none."""

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        what = f"copy_file_range(fd {src}, fd {dst}, {count}, {offset_src}, {offset_dst})"
        if not_c_values(offset_src, offset_dst, count=count):
            raise_errno(errno.EINVAL, what)
        fin, fout = self._file(src), self._file(dst)
        iin, iout = fin.inode, fout.inode
        # generic_copy_file_checks, in its order
        if iin.is_dir or iout.is_dir:
            raise_errno(errno.EISDIR, what)
        if not fin.readable or not fout.writable or fout.flags & os.O_APPEND:
            raise_errno(errno.EBADF, what)
        if max(offset_src & ULONG_MAX, offset_dst & ULONG_MAX) + count > ULONG_MAX:
            raise_errno(errno.EOVERFLOW, f"{what}: the range wraps")   # as u64 offsets
        count = 0 if offset_src >= iin.i_size else min(count, iin.i_size - offset_src)
        count = write_check_limits(offset_dst, count, what)
        if iin is iout and offset_dst + count > offset_src and offset_dst < offset_src + count:
            raise_errno(errno.EINVAL, f"{what}: overlapping ranges of one file")
        # then vfs_copy_file_range's rw_verify_area on each side, with the count cut
        for pos in (offset_src, offset_dst):
            if pos < 0 or pos + count > MAX_LFS_FILESIZE:
                raise_errno(errno.EINVAL, what)
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
        if not_c_values(offset - offset % PAGE_SIZE, count=length):
            raise_errno(errno.EINVAL, f"mmap(fd {fd}, offset {offset}, length {length})")
        f = self._file(fd)
        inode = f.inode
        # file_mmap_ok, on the page index as an unsigned long (a negative offset is a
        # huge one): a regular file's mapping must end below MAX_LFS_FILESIZE (so the
        # last page below it cannot be mapped), any other's below ULONG_MAX
        pgoff = ((offset & ULONG_MAX) >> PAGE_SHIFT)
        size = -(-(offset % PAGE_SIZE + length) // PAGE_SIZE) * PAGE_SIZE
        maxsize = MAX_LFS_FILESIZE if inode.i_mapping is not None else ULONG_MAX
        if size > maxsize or pgoff > (maxsize - size) >> PAGE_SHIFT:
            raise_errno(errno.EOVERFLOW, f"mmap(fd {fd}, offset {offset})")
        if not f.readable or (write and not f.writable):     # do_mmap's order
            raise_errno(errno.EACCES, f"mmap(fd {fd})")
        if inode.i_mapping is None:
            raise_errno(errno.ENODEV, f"mmap(fd {fd})")
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
            # a view, copied once by the join: the cache keeps its reference to the
            # folio, so its pages stay its own until then
            chunks.append(folio.data[start:start + n])
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
            raise_errno(errno.ENOENT, path)
        if inode.is_dir:
            raise_errno(errno.EISDIR, path)
        if trailing:
            raise_errno(errno.ENOTDIR, path)
        self._unlink_inode(parent, name, inode)

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        parent, name, inode, _ = self._walk(path)
        if inode is not None:
            raise_errno(errno.EEXIST, path)
        assert parent.children is not None
        parent.children[name] = self._new_inode(statmod.S_IFDIR | (mode & 0o7777), parent)
        parent.i_nlink += 1
        parent.touch()

    def rmdir(self, path: str) -> None:
        parent, name, inode, _ = self._walk(path)
        if name == "..":                # do_rmdir: the last name's kind before its lookup
            raise_errno(errno.ENOTEMPTY, path)
        if name == ".":
            raise_errno(errno.EINVAL, path)
        if not name:
            raise_errno(errno.EBUSY, path)
        if inode is None:
            raise_errno(errno.ENOENT, path)
        if not inode.is_dir:
            raise_errno(errno.ENOTDIR, path)
        if inode.children:
            raise_errno(errno.ENOTEMPTY, path)
        self._unlink_inode(parent, name, inode)

    def rename(self, src: str, dst: str) -> None:
        what = f"rename({src!r}, {dst!r})"
        # do_renameat2: both parents first, then the last names' kinds, then each lookup
        sparent, sname, sinode, strailing = self._walk(src, lookup=False)
        dparent, dname, dinode, dtrailing = self._walk(dst, lookup=False)
        if sname in ("", ".", "..") or dname in ("", ".", ".."):    # not LAST_NORM
            raise_errno(errno.EBUSY, what)
        if name_too_long(sname):
            raise_errno(errno.ENAMETOOLONG, what)
        if sinode is None:
            raise_errno(errno.ENOENT, what)
        if name_too_long(dname):
            raise_errno(errno.ENAMETOOLONG, what)
        if not sinode.is_dir and (strailing or dtrailing):
            raise_errno(errno.ENOTDIR, what)
        # do_renameat2's trap checks, before the types are compared
        if sparent is not dparent:
            if sinode in self._ancestors(dparent):
                raise_errno(errno.EINVAL, f"{what}: a directory cannot move into itself")
            if dinode is not None and dinode in self._ancestors(sparent):
                raise_errno(errno.ENOTEMPTY, f"{what}: the target is an ancestor of the source")
        if dinode is sinode:
            return
        if dinode is not None:
            if sinode.is_dir and not dinode.is_dir:
                raise_errno(errno.ENOTDIR, what)
            if not sinode.is_dir and dinode.is_dir:
                raise_errno(errno.EISDIR, what)
            if dinode.children:
                raise_errno(errno.ENOTEMPTY, what)
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
            raise_errno(errno.ENOTDIR, path)
        return sorted(inode.children)

    def stat(self, path: str) -> os.stat_result:
        return self._stat(self.lookup(path))
