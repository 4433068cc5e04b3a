"""A real MTD character device (``/dev/mtdN``) as an :class:`~.protocols.MTDDevice`.

Geometry comes from the MEMGETINFO ioctl, completed by ``/sys/class/mtd/mtdN`` (the name,
and the size when it does not fit the ioctl's 32 bits); ``/proc/mtd`` lists the devices
for messages. Data moves with pread and preadv/pwritev (:meth:`MTDChar.read_into` and
:meth:`MTDChar.write_from` move many driver-sized pieces in one system call, into and
from buffers the caller keeps), erase with MEMERASE64 (MEMERASE on kernels that answer
ENOTTY). Nothing is written or erased unless the user allowed it
(``--folio-allow-destructive``), and a device that is in use (mounted through mtdblock,
attached to UBI) is refused outright: its owner may write to it while a suite runs.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_folio.linux import mtdcore
from pytest_folio.targets import mtd_abi
from pytest_folio.targets.protocols import MTD_WRITEABLE
from pytest_folio.targets.spec import TargetError

SYSFS_MTD = Path("/sys/class/mtd")
SYSFS_UBI = Path("/sys/class/ubi")
PROC_MTD = Path("/proc/mtd")
PROC_MOUNTS = Path("/proc/mounts")

IoctlFn = Callable[[int, int, Any, bool], Any]


class DestructiveRefused(OSError):
    """A write or erase on a real device that the user did not allow."""


@dataclasses.dataclass(frozen=True)
class MTDGeometry:
    """What the kernel says about one MTD device."""

    name: str
    type: int
    flags: int
    size: int
    erasesize: int
    writesize: int
    oobsize: int


@dataclasses.dataclass(frozen=True)
class ProcMtdEntry:
    """One line of /proc/mtd: ``mtd0: 00100000 00010000 "u-boot"``."""

    index: int
    size: int
    erasesize: int
    name: str


_PROC_MTD_RE = re.compile(r'^mtd(\d+):\s+([0-9a-fA-F]+)\s+([0-9a-fA-F]+)\s+"(.*)"\s*$')


def parse_proc_mtd(text: str) -> list[ProcMtdEntry]:
    """Parse /proc/mtd (sizes in hex, names quoted); the header line is skipped."""
    entries = []
    for line in text.splitlines():
        match = _PROC_MTD_RE.match(line)
        if match:
            index, size, erasesize, name = match.groups()
            entries.append(ProcMtdEntry(int(index), int(size, 16), int(erasesize, 16), name))
    return entries


def list_mtd_devices(proc_mtd: Path = PROC_MTD) -> list[ProcMtdEntry]:
    """The MTD devices the kernel has, or none when it has no MTD support."""
    try:
        return parse_proc_mtd(proc_mtd.read_text())
    except OSError:
        return []


def describe_devices(entries: list[ProcMtdEntry]) -> str:
    if not entries:
        return "no MTD devices on this machine (no /proc/mtd entries)"
    return "MTD devices here: " + ", ".join(
        f'/dev/mtd{e.index} "{e.name}"' for e in entries)


def _sysfs_value(directory: Path, attr: str) -> str:
    return (directory / attr).read_text().strip()


def read_sysfs_geometry(index: int, sysfs_mtd: Path = SYSFS_MTD) -> MTDGeometry | None:
    """``/sys/class/mtd/mtdN``'s view of the device, or None when sysfs does not have it."""
    directory = sysfs_mtd / f"mtd{index}"
    try:
        type_name = _sysfs_value(directory, "type")
        return MTDGeometry(
            name=_sysfs_value(directory, "name"),
            type=mtd_abi.SYSFS_TYPE_NAMES.get(type_name, -1),  # -1: a type this code predates
            flags=int(_sysfs_value(directory, "flags"), 16),
            size=int(_sysfs_value(directory, "size")),
            erasesize=int(_sysfs_value(directory, "erasesize")),
            writesize=int(_sysfs_value(directory, "writesize")),
            oobsize=int(_sysfs_value(directory, "oobsize")),
        )
    except (FileNotFoundError, NotADirectoryError):
        return None
    except ValueError as exc:
        raise TargetError(f"{directory}: unexpected sysfs contents ({exc})") from None


def parse_mtd_info_user(buf: bytes, name: str) -> MTDGeometry:
    """Unpack the MEMGETINFO answer (struct mtd_info_user)."""
    type_, flags, size, erasesize, writesize, oobsize, _ = mtd_abi.MTD_INFO_USER.unpack(buf)
    return MTDGeometry(name, type_, flags, size, erasesize, writesize, oobsize)


def merge_geometry(info: MTDGeometry, sysfs: MTDGeometry | None) -> MTDGeometry:
    """The ioctl's geometry, with sysfs's name and its 64-bit size where the ioctl's is cut.

    mtd_info_user.size is a __u32: a device of 4 GiB or more reports its size modulo 2**32.
    """
    if sysfs is None:
        return info
    size = info.size
    if sysfs.size != info.size and sysfs.size & 0xFFFFFFFF == info.size:
        size = sysfs.size
    return dataclasses.replace(info, name=sysfs.name, size=size)


def mtd_index(path: Path, proc_mtd: Path = PROC_MTD) -> int:
    """The N of a path naming ``/dev/mtdN`` (or ``/dev/mtdNro``); TargetError otherwise."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise TargetError(
            f"--folio-mtd: cannot use {path}: {exc.strerror}; "
            f"{describe_devices(list_mtd_devices(proc_mtd))}") from None
    if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == mtd_abi.MTD_CHAR_MAJOR:
        return os.minor(st.st_rdev) // 2
    if stat.S_ISBLK(st.st_mode) and os.major(st.st_rdev) == mtd_abi.MTD_BLOCK_MAJOR:
        what = "an mtdblock block device; use the character device /dev/mtdN"
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        kind = "character" if stat.S_ISCHR(st.st_mode) else "block"
        what = f"a {kind} device of major {os.major(st.st_rdev)}"
    elif stat.S_ISDIR(st.st_mode):
        what = "a directory"
    else:
        what = "a regular file" if stat.S_ISREG(st.st_mode) else "not a device"
    raise TargetError(
        f"--folio-mtd: {path} is not an MTD character device (major "
        f"{mtd_abi.MTD_CHAR_MAJOR}): it is {what}; {describe_devices(list_mtd_devices(proc_mtd))}")


def _unescape_mount_field(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mtd_users(index: int, name: str | None = None, *, proc_mounts: Path = PROC_MOUNTS,
              sysfs_ubi: Path = SYSFS_UBI) -> list[str]:
    """Who holds mtdN: mounts through /dev/mtdblockN (or jffs2's ``mtdN`` / ``mtd:NAME``
    sources) and UBI devices attached to it. An empty list means it looks free."""
    users = []
    sources = {f"/dev/mtdblock{index}", f"mtd{index}"}
    if name is not None:
        sources.add(f"mtd:{name}")
    try:
        mounts = proc_mounts.read_text()
    except OSError:
        mounts = ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and _unescape_mount_field(fields[0]) in sources:
            users.append(f"mounted on {_unescape_mount_field(fields[1])} ({fields[2]}) "
                         f"through {fields[0]}")
    try:
        ubi_devices = sorted(sysfs_ubi.iterdir())
    except OSError:
        ubi_devices = []
    for ubi in ubi_devices:
        try:
            attached = int((ubi / "mtd_num").read_text().strip())
        except (OSError, ValueError):
            continue  # a volume (ubiX_Y) has no mtd_num
        if attached == index:
            users.append(f"attached to UBI as {ubi.name}")
    return users


IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def _iovecs(view: memoryview, chunk: int) -> list[memoryview]:
    if chunk <= 0 or chunk >= len(view):
        return [view] if len(view) else []
    return [view[off:off + chunk] for off in range(0, len(view), chunk)]


class _IovecCache:
    """The iovec list of the last buffer and chunk, kept: the runners pass the same
    buffer for every eraseblock of a pass, and slicing it into 256 page views per call
    is what a chunked call cost (under TCG, more than the system call itself)."""

    def __init__(self) -> None:
        self._key: tuple[object, int] | None = None
        self._iov: list[memoryview] = []

    def of(self, buf: bytes | bytearray | memoryview, chunk: int) -> list[memoryview]:
        key = self._key
        if key is None or key[0] is not buf or key[1] != chunk:
            self._iov = _iovecs(memoryview(buf).cast("B"), chunk)
            self._key = (buf, chunk)  # holds buf, so its id is never another's
        return self._iov


def _groups(iov: list[memoryview]) -> list[list[memoryview]]:
    """At most IOV_MAX iovecs per system call (the kernel refuses more: EINVAL)."""
    return [iov[i:i + IOV_MAX] for i in range(0, len(iov), IOV_MAX)] if len(iov) > IOV_MAX \
        else [iov]


def _advance(iov: list[memoryview], done: int) -> list[memoryview]:
    """The iovecs still to transfer after a transfer of ``done`` bytes."""
    for i, piece in enumerate(iov):
        if done < len(piece):
            return [piece[done:], *iov[i + 1:]] if done else iov[i:]
        done -= len(piece)
    return []


class MTDChar:
    """A real MTD device through its character device; an MTDDevice.

    Opened read-only unless ``allow_destructive``, so even a bug here cannot write
    without the user's consent: the kernel refuses MEMERASE and write on such a file.
    """

    is_real_device = True  # suites ask before they write or erase it

    def __init__(self, fd: int, geometry: MTDGeometry, path: str, *,
                 allow_destructive: bool, ioctl: IoctlFn = fcntl.ioctl) -> None:
        self.fd = fd
        self.path = path
        self.allow_destructive = allow_destructive
        self.name = geometry.name or path
        self.type = geometry.type
        self.flags = geometry.flags
        self.size = geometry.size
        self.erasesize = geometry.erasesize
        self.writesize = geometry.writesize
        self.oobsize = geometry.oobsize
        self._ioctl = ioctl
        self._erase64 = True
        self.exclusive = False     # open_mtd_char sets it when it holds the flock
        self._read_iov = _IovecCache()
        self._write_iov = _IovecCache()

    def __repr__(self) -> str:
        return (f"MTDChar({self.path!r}, name={self.name!r}, size={self.size}, "
                f"erasesize={self.erasesize})")

    def _refuse_unless_allowed(self, what: str) -> None:
        if not self.allow_destructive:
            raise DestructiveRefused(
                errno.EPERM,
                f"refusing to {what} {self.path}: writing or erasing a real device needs "
                f"--folio-allow-destructive")

    def read(self, offset: int, length: int) -> bytes:
        mtdcore.mtd_check_read(offset, length, self.size)
        data = os.pread(self.fd, length, offset)
        if len(data) == length:
            return data
        buf = bytearray(length)  # a short read: fill the rest as the loop below does
        buf[:len(data)] = data
        self._readv(offset + len(data), [memoryview(buf)[len(data):]])
        return bytes(buf)

    def read_into(self, offset: int, buf: bytearray | memoryview, chunk: int = 0) -> None:
        """Fill ``buf`` from ``offset`` without allocating, in one system call.

        With ``chunk``, one iovec per ``chunk`` bytes: mtdchar has no read_iter, so the
        kernel's vectored read calls mtdchar_read once per iovec, and the driver sees
        ``chunk``-byte reads, as that many pread calls would give it (mtd_speedtest's
        page reads), without a Python call and a system call for each.
        """
        mtdcore.mtd_check_read(offset, memoryview(buf).nbytes, self.size)
        self._readv(offset, self._read_iov.of(buf, chunk))

    def _readv(self, offset: int, iov: list[memoryview]) -> None:
        self._transfer(os.preadv, "read", offset, iov)

    def _transfer(self, call: Callable[[int, list[memoryview], int], int], what: str,
                  offset: int, iov: list[memoryview]) -> None:
        """preadv/pwritev ``iov`` at ``offset`` to the end, resuming after short transfers."""
        for group in _groups(iov):
            while group:
                done = call(self.fd, group, offset)
                if done <= 0:
                    raise OSError(errno.EIO, f"{self.path}: short {what} at {offset}")
                offset += done
                group = _advance(group, done)

    def write(self, offset: int, data: bytes) -> None:
        self.write_from(offset, data)

    def write_from(self, offset: int, data: bytes | bytearray | memoryview,
                   chunk: int = 0) -> None:
        """Write ``data`` at ``offset`` in one system call; with ``chunk``, one iovec (one
        mtdchar_write, one driver write) per ``chunk`` bytes, as :meth:`read_into`."""
        self._refuse_unless_allowed("write")
        mtdcore.mtd_check_write(offset, memoryview(data).nbytes, self.size, self.flags,
                                self.name)
        self._transfer(os.pwritev, "write", offset, self._write_iov.of(data, chunk))

    def erase(self, offset: int, length: int) -> None:
        self._refuse_unless_allowed("erase")
        mtdcore.mtd_check_erase(offset, length, self.size, self.flags, self.name)
        if self._erase64:
            try:
                self._ioctl(self.fd, mtd_abi.MEMERASE64,
                            mtd_abi.ERASE_INFO_USER64.pack(offset, length), False)
                return
            except OSError as exc:
                if exc.errno != errno.ENOTTY:
                    raise
                self._erase64 = False  # a kernel before MEMERASE64: ask only once
        if offset + length > 0xFFFFFFFF:
            raise OSError(errno.EINVAL, f"{self.path}: this kernel has only the 32-bit "
                          f"MEMERASE, which cannot reach offset {offset + length}")
        self._ioctl(self.fd, mtd_abi.MEMERASE,
                    mtd_abi.ERASE_INFO_USER.pack(offset, length), False)

    def sync(self) -> None:
        """mtdchar has no fsync (EINVAL) and syncs the device on close; try anyway."""
        try:
            os.fsync(self.fd)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.EROFS, errno.EBADF):
                raise

    def reopen(self) -> None:
        """Close the node and open it again as before (mtdchar syncs the device on
        close); the flock, if any, is taken again."""
        flags = fcntl.fcntl(self.fd, fcntl.F_GETFL) & os.O_ACCMODE
        locked = self.exclusive
        self.close()
        self.fd = os.open(self.path, flags | os.O_CLOEXEC)
        if locked:
            fcntl.flock(self.fd, fcntl.LOCK_EX)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_mtd_char(path: str | Path, *, allow_destructive: bool = False,
                  exclusive: bool = False, sysfs_mtd: Path = SYSFS_MTD,
                  sysfs_ubi: Path = SYSFS_UBI, proc_mtd: Path = PROC_MTD,
                  proc_mounts: Path = PROC_MOUNTS) -> MTDChar:
    """Open ``/dev/mtdN`` after checking it is one and nobody else uses it.

    ``exclusive`` waits for an flock(2) on the node, held until close: tests on several
    xdist workers (or runs) then take the one device in turns instead of erasing it under
    each other. Raises TargetError (one line, for a usage error) on anything the user
    must fix.
    """
    path = Path(path)
    index = mtd_index(path, proc_mtd)
    sysfs = read_sysfs_geometry(index, sysfs_mtd)
    users = mtd_users(index, sysfs.name if sysfs else None, proc_mounts=proc_mounts,
                      sysfs_ubi=sysfs_ubi)
    if users:
        raise TargetError(f"--folio-mtd: refusing {path} (mtd{index}): it is in use, "
                          + "; ".join(users))
    read_only = os.minor(os.stat(path).st_rdev) % 2 == 1  # /dev/mtdNro
    flags = os.O_RDWR if allow_destructive and not read_only else os.O_RDONLY
    try:
        fd = os.open(path, flags | os.O_CLOEXEC)
    except OSError as exc:
        raise TargetError(f"--folio-mtd: cannot open {path}: {exc.strerror}") from None
    try:
        buf = bytearray(mtd_abi.MTD_INFO_USER.size)
        fcntl.ioctl(fd, mtd_abi.MEMGETINFO, buf, True)
    except OSError as exc:
        os.close(fd)
        raise TargetError(f"--folio-mtd: MEMGETINFO on {path} failed: {exc.strerror}") from None
    if exclusive:
        fcntl.flock(fd, fcntl.LOCK_EX)
    geometry = merge_geometry(parse_mtd_info_user(bytes(buf), str(path)), sysfs)
    if read_only:
        geometry = dataclasses.replace(geometry, flags=geometry.flags & ~MTD_WRITEABLE)
    dev = MTDChar(fd, geometry, str(path), allow_destructive=allow_destructive)
    dev.exclusive = exclusive
    return dev
