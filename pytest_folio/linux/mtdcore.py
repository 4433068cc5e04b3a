"""The MTD core's checks, which every MTD device gets before its driver runs.

drivers/mtd/mtdcore.c: mtd_read, mtd_write_oob and mtd_erase check the range (EINVAL)
and MTD_WRITEABLE (EROFS). The reference block2mtd applies them as the kernel does; the
real-device target applies them too, because mtdchar itself clamps reads at the end and
answers ENOSPC to writes past it, where the protocol promises EINVAL.
"""

from __future__ import annotations

import errno

from pytest_folio.linux.uapi import MTD_WRITEABLE


def _einval(message: str) -> OSError:
    return OSError(errno.EINVAL, message)


def _check_data_range(what: str, offset: int, length: int, size: int) -> None:
    if length < 0:
        raise _einval(f"{what}: negative length {length}")
    if offset < 0 or offset + length > size:
        raise _einval(f"{what} of {length} bytes at {offset} is outside the device "
                      f"(0..{size})")


def mtd_check_read(offset: int, length: int, size: int) -> None:
    """mtd_read(): EINVAL unless ``offset .. offset+length`` lies inside the device."""
    _check_data_range("read", offset, length, size)


def mtd_check_write(offset: int, length: int, size: int, flags: int, name: str) -> None:
    """mtd_write(): EROFS on a device without MTD_WRITEABLE, then the range check."""
    if not flags & MTD_WRITEABLE:
        raise OSError(errno.EROFS, f"{name} is read-only (MTD_WRITEABLE is not set)")
    _check_data_range("write", offset, length, size)


def mtd_check_erase(offset: int, length: int, size: int, flags: int, name: str) -> None:
    """mtd_erase(): the range check first (addr must be below the size), then EROFS."""
    if length < 0 or offset < 0 or offset >= size or length > size - offset:
        raise _einval(f"erase of {length} bytes at {offset} is outside the device "
                      f"(0..{size})")
    if not flags & MTD_WRITEABLE:
        raise OSError(errno.EROFS, f"{name} is read-only (MTD_WRITEABLE is not set)")

