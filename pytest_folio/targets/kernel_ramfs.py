"""A real kernel ramfs, mounted in a temporary directory for one test (root only).

``-o blocksize=N`` is only passed for block sizes above PAGE_SIZE, and only trusted when
the files of the mount really report ``st_blksize == N``: mainline ramfs silently ignores
mount options it does not know, so a kernel without the blocksize patch would otherwise
pass for one with it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.sizes import format_size
from pytest_folio.targets.directory import DirectoryFS

MNT_DETACH = 2

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_char_p]
_libc.mount.restype = ctypes.c_int
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.umount2.restype = ctypes.c_int


class KernelRamfsUnavailable(RuntimeError):
    """Why no kernel ramfs could be had here; the fixture skips with this reason."""


def _umount(path: str) -> None:
    """Unmount, falling back to a lazy detach when something still holds the mount."""
    if _libc.umount2(path.encode(), 0) != 0 and _libc.umount2(path.encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {path}: {os.strerror(err)}")


@contextmanager
def temporary_mount(fstype: str, options: str = "") -> Iterator[str]:
    """Mount a ``fstype`` (ramfs, tmpfs...) on a fresh temporary directory, yield its path,
    unmount and remove it afterwards. Raises KernelRamfsUnavailable with the reason."""
    if os.geteuid() != 0:
        raise KernelRamfsUnavailable(f"mounting a kernel {fstype} needs root")
    mountpoint = tempfile.mkdtemp(prefix=f"pytest-folio-{fstype}-")
    try:
        if _libc.mount(b"pytest-folio", mountpoint.encode(), fstype.encode(), 0,
                       options.encode() or None) != 0:
            err = ctypes.get_errno()
            raise KernelRamfsUnavailable(
                f"mount -t {fstype}{' -o ' + options if options else ''} failed: "
                f"{os.strerror(err)}")
        try:
            yield mountpoint
        finally:
            _umount(mountpoint)
    finally:
        os.rmdir(mountpoint)


@contextmanager
def mount_kernel_ramfs(blocksize: int | None = None) -> Iterator[DirectoryFS]:
    """Mount ramfs (with ``blocksize`` when given) in a fresh temporary directory and yield
    it as a DirectoryFS rooted at the mount; unmount and remove the directory afterwards,
    also when the test failed. Raises KernelRamfsUnavailable with the reason otherwise."""
    options = f"blocksize={blocksize}" if blocksize and blocksize != PAGE_SIZE else ""
    with temporary_mount("ramfs", options) as mountpoint:
        fs = DirectoryFS(mountpoint)
        try:
            if blocksize and fs.blocksize != blocksize:
                raise KernelRamfsUnavailable(
                    f"this kernel's ramfs has no blocksize mount option (asked for "
                    f"{format_size(blocksize)}, files report st_blksize "
                    f"{format_size(fs.blocksize)})")
            yield fs
        finally:
            fs.umount()
