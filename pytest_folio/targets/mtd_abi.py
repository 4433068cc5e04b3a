"""The bits of include/uapi/mtd/mtd-abi.h the real-device target needs, in Python.

ioctl numbers are computed with the kernel's ``_IOC`` encoding for the running
architecture, and the structs are ``struct`` formats with native alignment, so they match
what a C compiler on this machine produces (tests/targets/test_mtd_abi.py checks both against
the installed header).
"""

from __future__ import annotations

import platform
import struct

from pytest_folio.linux.uapi import (
    MTD_ABSENT,
    MTD_DATAFLASH,
    MTD_MLCNANDFLASH,
    MTD_NANDFLASH,
    MTD_NORFLASH,
    MTD_RAM,
    MTD_ROM,
    MTD_UBIVOLUME,
)

# include/uapi/asm-generic/ioctl.h; powerpc, mips, sparc and alpha use 13 size bits and
# their own direction values (arch/*/include/uapi/asm/ioctl.h).
_IOC_NRBITS = 8
_IOC_TYPEBITS = 8
if platform.machine().startswith(("ppc", "powerpc", "mips", "sparc", "alpha")):
    _IOC_SIZEBITS = 13
    _IOC_NONE, _IOC_READ, _IOC_WRITE = 1, 2, 4
else:
    _IOC_SIZEBITS = 14
    _IOC_NONE, _IOC_READ, _IOC_WRITE = 0, 2, 1
_IOC_NRSHIFT = 0
_IOC_TYPESHIFT = _IOC_NRSHIFT + _IOC_NRBITS
_IOC_SIZESHIFT = _IOC_TYPESHIFT + _IOC_TYPEBITS
_IOC_DIRSHIFT = _IOC_SIZESHIFT + _IOC_SIZEBITS


def _IOC(direction: int, type_: str, nr: int, size: int) -> int:
    if size >= 1 << _IOC_SIZEBITS:
        raise ValueError(f"ioctl argument size {size} does not fit in {_IOC_SIZEBITS} bits")
    return ((direction << _IOC_DIRSHIFT) | (ord(type_) << _IOC_TYPESHIFT)
            | (nr << _IOC_NRSHIFT) | (size << _IOC_SIZESHIFT))


def _IOR(type_: str, nr: int, size: int) -> int:
    return _IOC(_IOC_READ, type_, nr, size)


def _IOW(type_: str, nr: int, size: int) -> int:
    return _IOC(_IOC_WRITE, type_, nr, size)


# struct mtd_info_user { __u8 type; __u32 flags, size, erasesize, writesize, oobsize;
#                        __u64 padding; }  -- native alignment puts 3 pad bytes after type.
MTD_INFO_USER = struct.Struct("@BIIIIIQ")
# struct erase_info_user { __u32 start, length; }
ERASE_INFO_USER = struct.Struct("@II")
# struct erase_info_user64 { __u64 start, length; }
ERASE_INFO_USER64 = struct.Struct("@QQ")

MEMGETINFO = _IOR("M", 1, MTD_INFO_USER.size)
MEMERASE = _IOW("M", 2, ERASE_INFO_USER.size)
MEMERASE64 = _IOW("M", 20, ERASE_INFO_USER64.size)

# include/uapi/linux/major.h: the MTD character devices; minor 2N is /dev/mtdN,
# 2N+1 is the read-only /dev/mtdNro.
MTD_CHAR_MAJOR = 90
MTD_BLOCK_MAJOR = 31

# drivers/mtd/mtdcore.c, mtd_type_show(): the names sysfs gives the types.
SYSFS_TYPE_NAMES = {
    "absent": MTD_ABSENT, "ram": MTD_RAM, "rom": MTD_ROM, "nor": MTD_NORFLASH,
    "nand": MTD_NANDFLASH, "dataflash": MTD_DATAFLASH, "ubi": MTD_UBIVOLUME,
    "mlc-nand": MTD_MLCNANDFLASH,
}
