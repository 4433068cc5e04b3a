"""What a suite runs against: the MTD device and file-system protocols of SPEC section 4.

Targets wrap the reference model or the kernel; suites only use these protocols.
Errors are ``OSError`` with an errno: EINVAL out of range, EROFS not writeable,
EOPNOTSUPP unsupported.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

from pytest_folio.uapi import (  # noqa: F401  (re-exported: the protocol's vocabulary)
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
    FS_FEATURES,
    MTD_ABSENT,
    MTD_BIT_WRITEABLE,
    MTD_CAP_NANDFLASH,
    MTD_CAP_NORFLASH,
    MTD_CAP_RAM,
    MTD_CAP_ROM,
    MTD_DATAFLASH,
    MTD_MLCNANDFLASH,
    MTD_NANDFLASH,
    MTD_NO_ERASE,
    MTD_NORFLASH,
    MTD_POWERUP_LOCK,
    MTD_RAM,
    MTD_ROM,
    MTD_SLC_ON_MLC_EMULATION,
    MTD_UBIVOLUME,
    MTD_WRITEABLE,
)


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
