"""What a suite runs against: the MTD device and file-system protocols of SPEC section 4.

Targets wrap the reference model or the kernel; suites only use these protocols.
Errors are ``OSError`` with an errno: EINVAL out of range, EROFS not writeable,
EOPNOTSUPP unsupported.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

# include/uapi/mtd/mtd-abi.h
MTD_ABSENT = 0
MTD_RAM = 1
MTD_ROM = 2
MTD_NORFLASH = 3
MTD_NANDFLASH = 4
MTD_DATAFLASH = 6
MTD_UBIVOLUME = 7
MTD_MLCNANDFLASH = 8

MTD_WRITEABLE = 0x400
MTD_BIT_WRITEABLE = 0x800
MTD_NO_ERASE = 0x1000
MTD_POWERUP_LOCK = 0x2000
MTD_SLC_ON_MLC_EMULATION = 0x4000

MTD_CAP_ROM = 0
MTD_CAP_RAM = MTD_WRITEABLE | MTD_BIT_WRITEABLE | MTD_NO_ERASE
MTD_CAP_NORFLASH = MTD_WRITEABLE | MTD_BIT_WRITEABLE
MTD_CAP_NANDFLASH = MTD_WRITEABLE

# FileSystem.features vocabulary
FS_FEATURES = frozenset(
    {"mmap", "fallocate", "punch_hole", "zero_range", "collapse_range", "insert_range",
     "copy_range"})

# include/uapi/linux/falloc.h
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_ZERO_RANGE = 0x10
FALLOC_FL_INSERT_RANGE = 0x20


@runtime_checkable
class MTDDevice(Protocol):
    """An MTD device as the mtd_test-style suites see it."""

    name: str
    type: int
    flags: int
    size: int
    erasesize: int
    writesize: int
    oobsize: int

    def read(self, offset: int, length: int) -> bytes: ...
    def write(self, offset: int, data: bytes) -> None: ...
    def erase(self, offset: int, length: int) -> None: ...
    def sync(self) -> None: ...
    def close(self) -> None: ...


@runtime_checkable
class FileSystem(Protocol):
    """An os-like file system; where Python's os has the call, the signature is the same."""

    blocksize: int
    features: frozenset[str]

    def open(self, path: str, flags: int, mode: int = 0o644) -> int: ...
    def close(self, fd: int) -> None: ...
    def pread(self, fd: int, n: int, offset: int) -> bytes: ...
    def pwrite(self, fd: int, data: bytes, offset: int) -> int: ...
    def ftruncate(self, fd: int, length: int) -> None: ...
    def fstat(self, fd: int) -> os.stat_result: ...
    def fsync(self, fd: int) -> None: ...
    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None: ...
    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int: ...
    def mmap_read(self, fd: int, offset: int, length: int) -> bytes: ...
    def mmap_write(self, fd: int, offset: int, data: bytes) -> None: ...
    def unlink(self, path: str) -> None: ...
    def mkdir(self, path: str, mode: int = 0o755) -> None: ...
    def rmdir(self, path: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def listdir(self, path: str) -> list[str]: ...
    def stat(self, path: str) -> os.stat_result: ...
