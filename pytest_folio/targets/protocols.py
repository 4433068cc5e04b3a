"""What a suite runs against: the MTD device and file-system protocols,
and the optional capabilities a target may add to them.

Targets wrap the reference model or the kernel; suites only use these protocols, and ask
for a capability with ``isinstance`` (every protocol here is runtime-checkable), never by
probing attribute names. Errors are ``OSError`` with an errno: EINVAL out of range, EROFS
not writeable, EOPNOTSUPP unsupported.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.linux.uapi import (  # noqa: F401  (re-exported: the protocol's vocabulary)
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
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
    """An os-like file system: the core every target has. Where Python's os has the
    call, the signature is the same. The rest is optional: :class:`MappedIO`,
    :class:`Fallocate`, :class:`CopyFileRange`, :class:`Directories`."""

    blocksize: int

    def open(self, path: str, flags: int, mode: int = 0o644) -> int: ...
    def close(self, fd: int) -> None: ...
    def pread(self, fd: int, n: int, offset: int) -> bytes: ...
    def pwrite(self, fd: int, data: bytes, offset: int) -> int: ...
    def ftruncate(self, fd: int, length: int) -> None: ...
    def fstat(self, fd: int) -> os.stat_result: ...
    def fsync(self, fd: int) -> None: ...
    def unlink(self, path: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def listdir(self, path: str) -> list[str]: ...
    def stat(self, path: str) -> os.stat_result: ...


# What a file system may add to the core. A target says it has one by having its calls,
# and it lacks one by leaving them out (or by inheriting FileSystemBase's defaults,
# which count as left out): ask capabilities.supports(fs, MappedIO), not isinstance. A
# call it has but cannot do in some case answers EOPNOTSUPP, as Linux does (a fallocate
# mode it does not know, a rename of a directory). What each unlocks, and the feature
# names it gives: pytest_folio.targets.capabilities.


@runtime_checkable
class MappedIO(Protocol):
    """Reads and writes through a shared mapping (feature ``mmap``); a mapped write
    never extends the file, and is msync'd before it returns."""

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes: ...
    def mmap_write(self, fd: int, offset: int, data: bytes) -> None: ...


@runtime_checkable
class Fallocate(Protocol):
    """``fallocate(fd, mode, offset, length)`` with FALLOC_FL_* bits (features
    ``fallocate``, ``punch_hole``, ``zero_range``, ``collapse_range``, ``insert_range``);
    a mode it does not support answers EOPNOTSUPP."""

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None: ...


@runtime_checkable
class CopyFileRange(Protocol):
    """``copy_file_range`` between two descriptors (feature ``copy_range``)."""

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int: ...


@runtime_checkable
class Directories(Protocol):
    """Directories below the root: without them every path is a name in the root."""

    def mkdir(self, path: str, mode: int = 0o755) -> None: ...
    def rmdir(self, path: str) -> None: ...


class AnyFileSystem(FileSystem, MappedIO, Fallocate, CopyFileRange, Directories, Protocol):
    """The static type of code that may make any call (the suites, fsx, the oracle): it
    makes an optional one only where :func:`~.capabilities.supports` or
    :func:`~.capabilities.features_of` said yes, or
    takes EOPNOTSUPP as "not supported". Not for isinstance: a target need not be one."""


@runtime_checkable
class HasFeatures(Protocol):
    """``features``: a target that has a call may still narrow what the suites use of
    it (a fallocate that only punches holes lists ``{"fallocate", "punch_hole"}``)."""

    features: frozenset[str]


def _unsupported(call: Callable[..., Any]) -> Callable[..., Any]:
    """Marks FileSystemBase's default: the call counts as left out."""
    call.__folio_unsupported__ = True  # type: ignore[attr-defined]
    return call


class FileSystemBase:
    """A base class for a file system of your own: implement the core
    (:class:`FileSystem`) and whichever optional calls you support; the others answer
    EOPNOTSUPP and :func:`~.capabilities.supports` counts them as absent."""

    blocksize: int = 4096

    @_unsupported
    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        raise OSError(errno.EOPNOTSUPP, "mmap_read: not supported")

    @_unsupported
    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        raise OSError(errno.EOPNOTSUPP, "mmap_write: not supported")

    @_unsupported
    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        raise OSError(errno.EOPNOTSUPP, "fallocate: not supported")

    @_unsupported
    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        raise OSError(errno.EOPNOTSUPP, "copy_file_range: not supported")

    @_unsupported
    def mkdir(self, path: str, mode: int = 0o755) -> None:
        raise OSError(errno.EOPNOTSUPP, "mkdir: not supported")

    @_unsupported
    def rmdir(self, path: str) -> None:
        raise OSError(errno.EOPNOTSUPP, "rmdir: not supported")


# Optional capabilities: a device or file system has them or not; suites ask with
# isinstance(obj, Capability) and use them only when it is one. Each is declared, with
# what it unlocks, in pytest_folio.targets.capabilities.CAPABILITIES.


@runtime_checkable
class Snapshot(Protocol):
    """Counters that can be read at once (the model's ``Stats``)."""

    def snapshot(self) -> Mapping[str, int]: ...


@runtime_checkable
class HasStats(Protocol):
    """``stats``: counters the suites record beside times (their deltas per section)."""

    stats: Snapshot


@runtime_checkable
class RealDevice(Protocol):
    """``is_real_device``: True on real hardware (``/dev/mtdN``), where writing destroys
    data, so suites that write need ``--folio-allow-destructive``."""

    is_real_device: bool


@runtime_checkable
class HasBadBlocks(Protocol):
    """``block_isbad(offset)``: NAND's bad-block table (mtd_block_isbad)."""

    def block_isbad(self, offset: int) -> bool: ...


@runtime_checkable
class HasOOB(Protocol):
    """``read_oob(offset, length)``: the out-of-band bytes of the pages at ``offset``."""

    def read_oob(self, offset: int, length: int) -> bytes: ...


@runtime_checkable
class HasFolioOrder(Protocol):
    """``folio_order``: the device's own folio order, when the test has none."""

    folio_order: int


@runtime_checkable
class ChunkedMTD(Protocol):
    """A device that moves many driver-sized pieces in one call, into and from buffers the
    caller keeps (the /dev/mtdN target: preadv/pwritev, one mtdchar_read/_write per
    ``chunk``; 0: the whole buffer at once). The runners use it when a device has it, so a
    pass costs one Python call per eraseblock instead of one per page, and no allocation;
    :func:`pytest_folio.mtdtests.common.chunked_io` gives every other device the same
    calls, one read or write per chunk."""

    def read_into(self, offset: int, buf: bytearray | memoryview, chunk: int = 0) -> None: ...
    def write_from(self, offset: int, data: bytes | bytearray | memoryview,
                   chunk: int = 0) -> None: ...


@runtime_checkable
class Reopenable(Protocol):
    """``reopen()``: close and open the device again, as a module reload or a new open of
    the node would (what was synced must still be there)."""

    def reopen(self) -> None: ...


@runtime_checkable
class PowerCut(Protocol):
    """``power_cut()``: the power fails and the device or file system is attached again.
    Everything not yet on its backing store is gone (what was synced, fsync'd or written
    back stays), open files are closed, and the object is usable afterwards, as after a
    reboot (the power-cut suites, ``-k power``, need it)."""

    def power_cut(self) -> None: ...


@runtime_checkable
class PowerCutUnit(Protocol):
    """``power_cut_unit``: the aligned bytes (a power of two) that a power cut leaves
    all old or all new, never mixed (a folio, when the target writes each folio back as
    one unit; a NOR write-buffer line, below a page). Without it, the power-cut suites
    promise a page."""

    power_cut_unit: int


@runtime_checkable
class DropCaches(Protocol):
    """``drop_caches(path)``: a file system writes the file's dirty pages back and
    forgets its cached ones, as ``echo 3 > /proc/sys/vm/drop_caches`` does for one file,
    so the next access reads the backing store; it never changes what a read returns."""

    def drop_caches(self, path: str) -> None: ...


@runtime_checkable
class DropDeviceCaches(Protocol):
    """``drop_caches()``: an MTD device forgets its clean cached folios, as ``echo 1 >
    /proc/sys/vm/drop_caches`` does (dirty ones stay), so the next read of them comes
    from the backing store; it never changes what a read returns. ``isinstance`` cannot tell
    it from :class:`DropCaches` (the same name): ask it of an MTD device only."""

    def drop_caches(self) -> None: ...


@runtime_checkable
class Unmountable(Protocol):
    """``umount()``: called after each test on a factory's file system."""

    def umount(self) -> None: ...


def is_real_device(dev: object) -> bool:
    """Whether ``dev`` says it is real hardware (the reference and factories do not)."""
    return isinstance(dev, RealDevice) and bool(dev.is_real_device)


def power_cut_unit(obj: object) -> int:
    """What a power cut of ``obj`` leaves all old or all new: its own promise
    (:class:`PowerCutUnit`), else a page."""
    return int(obj.power_cut_unit) if isinstance(obj, PowerCutUnit) else PAGE_SIZE


def protocol_members(protocol: type) -> tuple[str, ...]:
    """The attributes and calls ``protocol`` declares (its own and its bases')."""
    names: dict[str, None] = {}
    for base in reversed(protocol.__mro__):
        if base in (object, Protocol) or not getattr(base, "_is_protocol", False):
            continue
        names.update(dict.fromkeys(getattr(base, "__annotations__", {})))
        names.update(dict.fromkeys(name for name, value in vars(base).items()
                                   if callable(value) and not name.startswith("_")))
    return tuple(names)


def missing_members(obj: object, protocol: type) -> list[str]:
    """What ``obj`` lacks of ``protocol`` (empty when it has everything)."""
    return [name for name in protocol_members(protocol) if not hasattr(obj, name)]
