"""The system calls of the FileSystem protocol, raw: what the kernel says, nothing else.

Python's ``os`` and ``mmap`` modules check some arguments themselves before the kernel
sees them: ``os.fsync`` refuses a negative descriptor, ``os.copy_file_range`` a count
past 2**63 - 1, ``mmap`` checks offsets and lengths against the file size,
``os.posix_fallocate`` emulates what the file system lacks. A differential against a
real file system must see what the kernel says, in the kernel's order of checks, so the
directory target makes these calls here: through ctypes (``fsync``, ``fallocate``,
``copy_file_range``, ``mmap``/``msync``), or through ``os`` where Python's call is the
system call with no check of its own inside the C types' ranges (``os.pread``,
``os.pwrite``, ``os.ftruncate``: negative offsets and descriptors reach the kernel; they
are several times cheaper than a ctypes call). Every failure is ``OSError`` with the
kernel's errno.

The one check made here: a number the C type cannot hold (an offset of 2**63 or more, a
negative count) is not a value the kernel can be given; it is ``EINVAL`` before any call
rather than a silently wrapped value (an offset of 2**64 + 5 would otherwise write at 5)
or Python's ValueError or OverflowError.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from typing import Any

PROT_READ = 0x1
PROT_WRITE = 0x2
MAP_SHARED = 0x01
MS_SYNC = 0x4

LOFF_MAX = (1 << 63) - 1        # loff_t, off64_t
SIZE_MAX = (1 << 64) - 1        # size_t

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _bind(name: str, restype: type, *argtypes: type) -> Any:
    func = getattr(_libc, name)
    func.argtypes = list(argtypes)
    func.restype = restype
    return func


_loff = ctypes.c_int64
_fsync = _bind("fsync", ctypes.c_int, ctypes.c_int)
_fallocate64 = _bind("fallocate64", ctypes.c_int, ctypes.c_int, ctypes.c_int, _loff, _loff)
_copy_file_range = _bind("copy_file_range", ctypes.c_ssize_t, ctypes.c_int,
                         ctypes.POINTER(_loff), ctypes.c_int, ctypes.POINTER(_loff),
                         ctypes.c_size_t, ctypes.c_uint)
_mmap = _bind("mmap", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
              ctypes.c_int, ctypes.c_int, _loff)
munmap = _bind("munmap", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)
_msync = _bind("msync", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_MAP_FAILED = ctypes.c_void_p(-1).value


def raise_errno(what: str) -> None:
    """Raise the C library's errno as OSError, naming the call."""
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def _fits(value: int, low: int, high: int, call: str, ctype: str) -> int:
    if not low <= value <= high:
        raise OSError(errno.EINVAL, f"{call}: {value} does not fit {ctype} ({low}..{high}): "
                                    f"{os.strerror(errno.EINVAL)}")
    return value


def loff(value: int, call: str) -> int:
    """``value`` as a loff_t, or EINVAL naming ``call`` when it is none."""
    return _fits(value, -LOFF_MAX - 1, LOFF_MAX, call, "loff_t")


def size(value: int, call: str) -> int:
    """``value`` as a size_t, or EINVAL naming ``call`` when it is none."""
    return _fits(value, 0, SIZE_MAX, call, "size_t")


def pread(fd: int, n: int, offset: int) -> bytes:
    """pread64(2)."""
    return os.pread(fd, size(n, "pread"), loff(offset, "pread"))


def pwrite(fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
    """pwrite64(2)."""
    return os.pwrite(fd, data, loff(offset, "pwrite"))


def ftruncate(fd: int, length: int) -> None:
    """ftruncate64(2)."""
    os.ftruncate(fd, loff(length, "ftruncate"))


def fsync(fd: int) -> None:
    """fsync(2) (``os.fsync`` refuses a negative descriptor itself)."""
    if _fsync(fd) != 0:
        raise_errno(f"fsync(fd {fd})")


def fallocate(fd: int, mode: int, offset: int, length: int) -> None:
    """fallocate(2) itself, so an unsupported mode is EOPNOTSUPP rather than emulated."""
    what = f"fallocate(fd {fd}, mode={mode:#x}, offset={offset}, length={length})"
    if _fallocate64(fd, mode, loff(offset, what), loff(length, what)) != 0:
        raise_errno(what)


def copy_file_range(src: int, dst: int, count: int, offset_src: int, offset_dst: int) -> int:
    """copy_file_range(2) with both offsets given (the files' positions stay)."""
    what = f"copy_file_range(fd {src}, fd {dst}, {count}, {offset_src}, {offset_dst})"
    pos_in, pos_out = _loff(loff(offset_src, what)), _loff(loff(offset_dst, what))
    done = _copy_file_range(src, ctypes.byref(pos_in), dst, ctypes.byref(pos_out),
                            size(count, what), 0)
    if done < 0:
        raise_errno(what)
    return int(done)


def mmap(fd: int, offset: int, length: int, prot: int) -> int:
    """mmap(2), shared: the address; the caller unmaps it with ``munmap(address, length)``.
    ``offset`` must be page aligned (the kernel's EINVAL otherwise)."""
    what = f"mmap(fd {fd}, offset={offset}, length={length})"
    addr = _mmap(None, size(length, what), prot, MAP_SHARED, fd, loff(offset, what))
    if addr is None or addr == _MAP_FAILED:
        raise_errno(what)
    return int(addr)


def msync(addr: int, length: int, what: str) -> None:
    """msync(2), MS_SYNC: write a shared mapping's dirty pages back."""
    if _msync(addr, length, MS_SYNC) != 0:
        raise_errno(f"msync of {what}")
