"""A real mounted directory (tmpfs, ext4, xfs, a kernel ramfs...) as a FileSystem.

Every call is the real system call, with nothing checked before the kernel sees it:
reads, writes, truncates, fallocate, copy_file_range and mappings go through the C
library (:mod:`pytest_folio.targets.syscalls`): Python's ``os.pread`` refuses negative
values itself, ``os.posix_fallocate`` silently emulates what the file system lacks, and
Python's ``mmap`` checks offsets and lengths itself and refuses to map the page that
holds EOF beyond the file size, which is exactly the page fsx checks. So a differential
against a real file system sees the kernel's errnos in the kernel's order. Features are
found by probing a scratch file, not by trusting the file-system type.

Safety rule (``--folio-allow-destructive``): suites normally work in a
fresh subdirectory that this module creates and removes, so they may run in any existing
directory. Working in the directory itself (:func:`directory_filesystem` with
``fresh=False``) is destructive use and is refused on a non-empty directory unless
``allow_destructive`` is set. The subdirectory is removed after the test, also when the
test fails, is interrupted (Ctrl-C) or the process gets SIGTERM.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.targets import syscalls
from pytest_folio.targets.protocols import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
)
from pytest_folio.targets.syscalls import PROT_READ, PROT_WRITE

# looked up once: fsx makes these calls in its inner loop
_munmap, _memmove, _string_at = syscalls.munmap, ctypes.memmove, ctypes.string_at

PROBE_NAME = ".folio-probe"
CLOSED_FD = -1      # what the kernel is given for a descriptor this target did not open


def check_mapped_range(offset: int, length: int, size: int) -> None:
    """A shared mapping is readable up to the end of the page holding EOF; past it the
    kernel sends SIGBUS, which we turn into EFAULT instead of killing the test process.
    A negative offset is EOVERFLOW, as mmap(2) says (file_mmap_ok takes its page index
    as unsigned: past any file's maximum size)."""
    if length < 0:
        raise OSError(errno.EINVAL, f"mapped access of length {length}")
    if offset < 0:
        raise OSError(errno.EOVERFLOW, f"mapped access at offset {offset}")
    limit = -(-size // PAGE_SIZE) * PAGE_SIZE
    if offset + length > limit:
        raise OSError(
            errno.EFAULT,
            f"mapped access to [{offset}, {offset + length}) goes past the page holding EOF "
            f"(file size {size}, mapping ends at {limit}): SIGBUS")


def _hole_bytes(fd: int, start: int, end: int) -> int:
    """How much of [start, end) holds no data (SEEK_DATA/SEEK_HOLE; all of it where the
    file system cannot say)."""
    holes, pos = 0, start
    try:
        while pos < end:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: no data from here on
                    raise
                data = end
            holes += min(data, end) - pos
            if data >= end:
                break
            pos = os.lseek(fd, data, os.SEEK_HOLE)
    except OSError:
        return end - start
    return holes


def check_room_for_mapping(fd: int, offset: int, length: int, *, write: bool) -> None:
    """A fault the file system cannot back with a page is SIGBUS, which kills the
    process: refuse the access as ENOSPC while the file system has less room than it may
    need. A write may need every page it touches (copy-on-write file systems allocate
    even where data is); a read, the holes among them (tmpfs allocates a page for a read
    fault on a hole). A file system with no limit (ramfs reports no blocks) is not
    checked; one that runs out after this check (another writer, metadata) can still
    send SIGBUS."""
    vfs = os.fstatvfs(fd)
    if not vfs.f_blocks or length <= 0:
        return
    start = offset - offset % PAGE_SIZE
    end = -(-(offset + length) // PAGE_SIZE) * PAGE_SIZE
    room = vfs.f_bavail * vfs.f_frsize
    if room >= end - start:  # room for every page: the holes among them need not be found
        return
    need = end - start if write else _hole_bytes(fd, start, end)
    if need and room < need:
        raise OSError(errno.ENOSPC,
                      f"mapped {'write' if write else 'read'} of {length} bytes at {offset} "
                      f"may need {need} bytes of new pages and the file system has {room} "
                      f"(a fault it cannot back is SIGBUS): {os.strerror(errno.ENOSPC)}")


def _map(fd: int, offset: int, length: int, prot: int) -> tuple[int, int, int]:
    """Map the pages covering [offset, offset + length): (address, mapped length, offset
    of ``offset`` in the mapping); the caller unmaps it with ``_munmap(address, length)``.

    mmap(2) itself accepts a range past EOF (it fails with EOVERFLOW, EACCES, ENODEV...
    first), so the caller checks the range inside the mapping, before touching it."""
    skip = offset % PAGE_SIZE       # a negative offset rounds down, as the page index does
    size = syscalls.size(length, "mmap") + skip
    return syscalls.mmap(fd, offset - skip, size, prot), size, skip


def _file_size(fd: int) -> int:
    """The size of the file open at ``fd``, by lseek(SEEK_END) (a plain integer: no
    stat result built). It moves the file offset, which no call here uses: they all
    take their offsets."""
    return os.lseek(fd, 0, os.SEEK_END)


class DirectoryFS:
    """The FileSystem protocol over a real directory: paths are relative to ``root``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.realpath(root)
        if not os.path.isdir(self.root):
            raise NotADirectoryError(errno.ENOTDIR, f"{root} is not a directory")
        self._fds: set[int] = set()
        self.blocksize, self.features = self._probe()

    def __repr__(self) -> str:
        return f"DirectoryFS({self.root!r}, blocksize={self.blocksize})"

    # -- setup -------------------------------------------------------------------------
    def _probe(self) -> tuple[int, frozenset[str]]:
        """Find st_blksize and which optional calls this file system really supports."""
        path = os.path.join(self.root, PROBE_NAME)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        features: set[str] = set()
        try:
            blocksize = os.fstat(fd).st_blksize
            span = 4 * blocksize

            def works(name: str, call: Callable[[], object]) -> None:
                os.ftruncate(fd, 0)
                os.pwrite(fd, b"\xa5" * span, 0)
                try:
                    call()
                except OSError as exc:
                    if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL,
                                         errno.ENODEV, errno.EACCES, errno.EXDEV):
                        raise
                else:
                    features.add(name)

            def mmap_probe() -> None:
                self.mmap_write(fd, 0, b"\x5a")
                self.mmap_read(fd, 0, 1)

            def fallocate_probe() -> None:
                syscalls.fallocate(fd, 0, span, blocksize)
                syscalls.fallocate(fd, FALLOC_FL_KEEP_SIZE, span + blocksize, blocksize)

            self._fds.add(fd)
            works("mmap", mmap_probe)
            works("fallocate", fallocate_probe)
            works("punch_hole", lambda: syscalls.fallocate(
                fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, blocksize, blocksize))
            works("zero_range", lambda: syscalls.fallocate(fd, FALLOC_FL_ZERO_RANGE, 0, blocksize))
            works("collapse_range", lambda: syscalls.fallocate(
                fd, FALLOC_FL_COLLAPSE_RANGE, blocksize, blocksize))
            works("insert_range", lambda: syscalls.fallocate(
                fd, FALLOC_FL_INSERT_RANGE, blocksize, blocksize))
            works("copy_range", lambda: syscalls.copy_file_range(fd, fd, blocksize, 0,
                                                                 2 * blocksize))
        finally:
            self._fds.discard(fd)
            os.close(fd)
            os.unlink(path)
        return blocksize, frozenset(features)

    def umount(self) -> None:
        """Close every file this object opened (the directory itself is the caller's)."""
        for fd in sorted(self._fds):
            with suppress(OSError):
                os.close(fd)
        self._fds.clear()

    # -- helpers -----------------------------------------------------------------------
    def _path(self, path: str, *, parent: bool = False, removes: bool = False) -> str:
        """``path`` under the root, as given: the kernel sees its ``.``, ``..`` and
        trailing slashes and decides what they mean. A path whose ``..`` would climb out
        of the root is EACCES. ``parent``: the call walks only to the last name's
        directory (unlink, mkdir, rmdir, rename: the kernel refuses a last ``.`` or
        ``..`` without walking it). ``removes``: the call would remove or move the root
        itself when given it (rmdir, rename), which is EBUSY, as the kernel says for
        ``/``."""
        names = [name for name in path.split("/") if name]
        depth = 0
        for name in names[:-1] if parent else names:
            depth += -1 if name == ".." else name != "."
            if depth < 0:
                raise PermissionError(errno.EACCES, f"{path!r} leaves the file system's root")
        if removes and not names:
            raise OSError(errno.EBUSY, f"{path!r} is the file system's root")
        return self.root + "/" + "/".join(names) + ("/" if path.endswith("/") and names
                                                     else "")

    def _fd(self, fd: int) -> int:
        """The descriptor for the kernel: a closed one for any this target did not open,
        so a test never reaches pytest's descriptors, and the kernel still makes its
        checks in its order (pread64 refuses a negative offset before the descriptor)."""
        return fd if fd in self._fds else CLOSED_FD

    def _check_fd(self, fd: int) -> None:
        """EBADF for a descriptor not open here: the calls that make no system call."""
        if fd not in self._fds:
            raise OSError(errno.EBADF, f"file descriptor {fd} is not open on {self.root}")

    # -- files -------------------------------------------------------------------------
    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fd = os.open(self._path(path), flags, mode)
        self._fds.add(fd)
        return fd

    def close(self, fd: int) -> None:
        os.close(self._fd(fd))
        self._fds.discard(fd)

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        return syscalls.pread(self._fd(fd), n, offset)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return syscalls.pwrite(self._fd(fd), data, offset)

    def ftruncate(self, fd: int, length: int) -> None:
        syscalls.ftruncate(self._fd(fd), length)

    def fstat(self, fd: int) -> os.stat_result:
        return os.fstat(fd if fd in self._fds else CLOSED_FD)  # in line: fsx's every op

    def fsync(self, fd: int) -> None:
        syscalls.fsync(self._fd(fd))

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        syscalls.fallocate(self._fd(fd), mode, offset, length)

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        return syscalls.copy_file_range(self._fd(src), self._fd(dst), count, offset_src,
                                        offset_dst)

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        if length == 0:         # no system call: mmap(2) refuses a zero length
            self._check_fd(fd)
            return b""
        addr, size, skip = _map(self._fd(fd), offset, length, PROT_READ)
        try:
            check_mapped_range(offset, length, _file_size(fd))
            check_room_for_mapping(fd, offset, length, write=False)
            return _string_at(addr + skip, length)
        finally:
            _munmap(addr, size)

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        length = len(data)
        if not length:
            self._check_fd(fd)
            return
        addr, size, skip = _map(self._fd(fd), offset, length, PROT_READ | PROT_WRITE)
        try:
            check_mapped_range(offset, length, _file_size(fd))
            check_room_for_mapping(fd, offset, length, write=True)
            _memmove(addr + skip, bytes(data), length)
            syscalls.msync(addr, size, f"[{offset - skip}, {offset - skip + size})")
        finally:
            _munmap(addr, size)

    def drop_caches(self, path: str) -> None:
        """Drop the file's clean cached pages (POSIX_FADV_DONTNEED, which also starts
        writeback of dirty ones), so the next read comes from the file system: what fsx's
        close/open does with ``echo 3 > /proc/sys/vm/drop_caches``, for this file only
        and without root. tmpfs and ramfs keep their pages: they are the only copy."""
        fd = os.open(self._path(path), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)

    # -- names -------------------------------------------------------------------------
    def unlink(self, path: str) -> None:
        os.unlink(self._path(path, parent=True))

    def mkdir(self, path: str, mode: int = 0o755) -> None:
        os.mkdir(self._path(path, parent=True), mode)

    def rmdir(self, path: str) -> None:
        os.rmdir(self._path(path, parent=True, removes=True))

    def rename(self, src: str, dst: str) -> None:
        os.rename(self._path(src, parent=True, removes=True),
                  self._path(dst, parent=True, removes=True))

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(self._path(path)))

    def stat(self, path: str) -> os.stat_result:
        return os.stat(self._path(path))


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process was, so cleanup runs as it does on Ctrl-C."""


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While a scratch directory exists, SIGTERM unwinds like SIGINT (pytest then tears
    the fixtures down, removing it) instead of ending the process on the spot. Only in
    the main thread, and only over the default action: a handler someone installed is
    theirs."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise Terminated(f"signal {signum} (SIGTERM)")

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def directory_filesystem(path: str | os.PathLike[str], *, fresh: bool = True,
                         allow_destructive: bool = False) -> Iterator[DirectoryFS]:
    """A DirectoryFS in a fresh subdirectory of ``path`` (removed afterwards), or, with
    ``fresh=False``, in ``path`` itself, which must then be empty unless
    ``allow_destructive``. Open files are closed afterwards even when the test failed."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, f"{path} is not a directory")
    if fresh:
        root = tempfile.mkdtemp(prefix="pytest-folio-", dir=path)
    else:
        if os.listdir(path) and not allow_destructive:
            raise PermissionError(
                errno.EPERM, f"{path} is not empty; pass --folio-allow-destructive to let a "
                "suite write into it directly")
        root = path
    fs: DirectoryFS | None = None
    try:
        with _sigterm_as_interrupt():
            fs = DirectoryFS(root)
            yield fs
    finally:
        if fs is not None:
            fs.umount()
        if fresh:
            shutil.rmtree(root, ignore_errors=True)
