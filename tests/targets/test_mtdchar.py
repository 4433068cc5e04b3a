"""The real-device target as far as a machine without MTD hardware allows.

sysfs, /proc/mtd and /proc/mounts parsing run against faked trees (pyfakefs); device
nodes are real ``mknod`` nodes in tmp_path (pyfakefs has no st_rdev), which the kernel
refuses to open for lack of a driver; the data path runs on a regular file with a fake
ioctl standing in for the kernel's MEMERASE64/MEMERASE.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyfakefs.fake_filesystem import FakeFilesystem

from pytest_folio.mtdtests.common import MTDTestError
from pytest_folio.mtdtests.speed import run_speedtest
from pytest_folio.mtdtests.stress import run_stresstest
from pytest_folio.targets import mtd_abi, mtdchar
from pytest_folio.targets.mtdchar import (
    DestructiveRefused,
    MTDChar,
    MTDGeometry,
    ProcMtdEntry,
    list_mtd_devices,
    merge_geometry,
    mtd_index,
    mtd_users,
    open_mtd_char,
    parse_mtd_info_user,
    parse_proc_mtd,
    read_sysfs_geometry,
)
from pytest_folio.targets.protocols import (
    MTD_CAP_NANDFLASH,
    MTD_CAP_NORFLASH,
    MTD_CAP_ROM,
    MTD_NANDFLASH,
    MTD_NORFLASH,
    MTD_RAM,
)
from pytest_folio.targets.spec import TargetError

PROC_MTD = """dev:    size   erasesize  name
mtd0: 00100000 00010000 "u-boot"
mtd1: 00400000 00020000 "kernel with spaces"
mtd12: 100000000 00040000 "big nand"
"""


def _add_sysfs(fs: FakeFilesystem, index: int, **attrs: str) -> None:
    values = {"name": "u-boot", "type": "nor", "flags": "0xc00", "size": "1048576",
              "erasesize": "65536", "writesize": "1", "oobsize": "0"}
    values.update(attrs)
    for attr, value in values.items():
        fs.create_file(f"/sys/class/mtd/mtd{index}/{attr}", contents=value + "\n")


def test_proc_mtd_is_parsed() -> None:
    assert parse_proc_mtd(PROC_MTD) == [
        ProcMtdEntry(0, 0x100000, 0x10000, "u-boot"),
        ProcMtdEntry(1, 0x400000, 0x20000, "kernel with spaces"),
        ProcMtdEntry(12, 1 << 32, 0x40000, "big nand"),
    ]


def test_proc_mtd_discovery_from_the_real_path(fs: FakeFilesystem) -> None:
    assert list_mtd_devices() == []  # a kernel without MTD support has no /proc/mtd
    fs.create_file("/proc/mtd", contents=PROC_MTD)
    assert [e.index for e in list_mtd_devices()] == [0, 1, 12]


def test_sysfs_geometry(fs: FakeFilesystem) -> None:
    assert read_sysfs_geometry(0) is None
    _add_sysfs(fs, 0)
    _add_sysfs(fs, 3, name="nand0", type="nand", flags="0x400", size=str(8 << 30),
               erasesize="131072", writesize="2048", oobsize="64")
    assert read_sysfs_geometry(0) == MTDGeometry(
        "u-boot", MTD_NORFLASH, MTD_CAP_NORFLASH, 1 << 20, 64 << 10, 1, 0)
    assert read_sysfs_geometry(3) == MTDGeometry(
        "nand0", MTD_NANDFLASH, MTD_CAP_NANDFLASH, 8 << 30, 128 << 10, 2048, 64)


def test_sysfs_garbage_is_a_one_line_target_error(fs: FakeFilesystem) -> None:
    _add_sysfs(fs, 0, erasesize="lots")
    with pytest.raises(TargetError, match=r"^/sys/class/mtd/mtd0: unexpected sysfs"):
        read_sysfs_geometry(0)


def test_geometry_takes_the_ioctl_and_sysfs_name_and_64bit_size() -> None:
    buf = mtd_abi.MTD_INFO_USER.pack(MTD_NANDFLASH, MTD_CAP_NANDFLASH, 0, 128 << 10, 2048,
                                     64, 0)  # 4 GiB reported as 0 by the 32-bit ioctl
    info = parse_mtd_info_user(buf, "/dev/mtd3")
    assert info.size == 0 and info.writesize == 2048 and info.name == "/dev/mtd3"
    sysfs = MTDGeometry("nand0", MTD_NANDFLASH, MTD_CAP_NANDFLASH, 4 << 30, 128 << 10,
                        2048, 64)
    merged = merge_geometry(info, sysfs)
    assert merged.size == 4 << 30 and merged.name == "nand0" and merged.oobsize == 64
    assert merge_geometry(info, None) == info


def test_users_mtdblock_mount_jffs2_and_ubi(fs: FakeFilesystem) -> None:
    fs.create_file("/proc/mounts", contents=(
        "/dev/vda / ext4 rw 0 0\n"
        "/dev/mtdblock2 /mnt/with\\040space jffs2 rw 0 0\n"
        "mtd:rootfs /rom jffs2 ro 0 0\n"
        "ubi0:data /data ubifs rw 0 0\n"))
    fs.create_file("/sys/class/ubi/ubi0/mtd_num", contents="5\n")
    fs.create_dir("/sys/class/ubi/ubi0_0")  # a volume: no mtd_num
    assert mtd_users(0) == []
    assert mtd_users(2) == ["mounted on /mnt/with space (jffs2) through /dev/mtdblock2"]
    assert mtd_users(4, "rootfs") == ["mounted on /rom (jffs2) through mtd:rootfs"]
    assert mtd_users(5) == ["attached to UBI as ubi0"]
    assert mtd_users(12) == []  # mtdblock12 must not match mtdblock1-style prefixes


def _mknod(path: Path, kind: int, major: int, minor: int) -> Path:
    try:
        os.mknod(path, kind | 0o600, os.makedev(major, minor))
    except PermissionError:
        pytest.skip("creating device nodes needs CAP_MKNOD")
    return path


def test_index_from_a_character_device_node(tmp_path: Path) -> None:
    assert mtd_index(_mknod(tmp_path / "mtd3", stat.S_IFCHR, 90, 6)) == 3
    assert mtd_index(_mknod(tmp_path / "mtd3ro", stat.S_IFCHR, 90, 7)) == 3


@pytest.mark.parametrize(("kind", "major", "said"), [
    (stat.S_IFBLK, 31, "an mtdblock block device; use the character device /dev/mtdN"),
    (stat.S_IFCHR, 1, "a character device of major 1"),
    (stat.S_IFBLK, 8, "a block device of major 8"),
])
def test_other_device_nodes_are_refused(tmp_path: Path, kind: int, major: int,
                                        said: str) -> None:
    node = _mknod(tmp_path / "node", kind, major, 0)
    with pytest.raises(TargetError) as info:
        mtd_index(node, proc_mtd=tmp_path / "absent")
    message = str(info.value)
    assert message == (f"--folio-mtd: {node} is not an MTD character device (major 90): "
                       f"it is {said}; no MTD devices on this machine (no /proc/mtd entries)")


def test_files_and_missing_paths_are_refused_listing_the_devices(tmp_path: Path) -> None:
    proc = tmp_path / "proc_mtd"
    proc.write_text(PROC_MTD)
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(TargetError, match=r"it is a regular file; MTD devices here: "
                       r'/dev/mtd0 "u-boot", /dev/mtd1 "kernel with spaces"'):
        mtd_index(tmp_path / "file", proc_mtd=proc)
    with pytest.raises(TargetError, match=r"it is a directory"):
        mtd_index(tmp_path, proc_mtd=proc)
    with pytest.raises(TargetError, match=r"cannot use .*/nope: No such file or directory"):
        mtd_index(tmp_path / "nope", proc_mtd=proc)


def test_device_in_use_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    node = _mknod(tmp_path / "mtd2", stat.S_IFCHR, 90, 4)
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/mtdblock2 /mnt jffs2 rw 0 0\n")
    ubi = tmp_path / "ubi"
    (ubi / "ubi1").mkdir(parents=True)
    (ubi / "ubi1" / "mtd_num").write_text("2\n")
    with pytest.raises(TargetError) as info:
        open_mtd_char(node, sysfs_mtd=tmp_path / "nosys", sysfs_ubi=ubi, proc_mounts=mounts)
    assert str(info.value) == (
        f"--folio-mtd: refusing {node} (mtd2): it is in use, mounted on /mnt (jffs2) "
        "through /dev/mtdblock2; attached to UBI as ubi1")


def test_a_node_without_a_driver_is_a_clear_error(tmp_path: Path) -> None:
    node = _mknod(tmp_path / "mtd0", stat.S_IFCHR, 90, 0)
    with pytest.raises(TargetError, match=r"^--folio-mtd: cannot open .*mtd0: "):
        open_mtd_char(node, sysfs_mtd=tmp_path / "nosys", sysfs_ubi=tmp_path,
                      proc_mounts=tmp_path / "none")


# The data path, on a regular file standing in for the character device.

SIZE, ERASESIZE = 64 << 10, 16 << 10


class FakeKernel:
    """Answers the erase ioctls as mtdchar would, on the file behind ``fd``."""

    def __init__(self, has_erase64: bool = True) -> None:
        self.has_erase64 = has_erase64
        self.calls: list[str] = []

    def __call__(self, fd: int, request: int, arg: Any, mutate: bool) -> int:
        if request == mtd_abi.MEMERASE64:
            self.calls.append("MEMERASE64")
            if not self.has_erase64:
                raise OSError(errno.ENOTTY, "Inappropriate ioctl for device")
            start, length = mtd_abi.ERASE_INFO_USER64.unpack(arg)
        elif request == mtd_abi.MEMERASE:
            self.calls.append("MEMERASE")
            start, length = mtd_abi.ERASE_INFO_USER.unpack(arg)
        else:
            raise OSError(errno.ENOTTY, "Inappropriate ioctl for device")
        os.pwrite(fd, b"\xff" * length, start)
        return 0


@pytest.fixture
def make_device(tmp_path: Path) -> Iterator[Callable[..., MTDChar]]:
    opened: list[MTDChar] = []

    def make(allow_destructive: bool = True, flags: int = MTD_CAP_NORFLASH,
             kernel: FakeKernel | None = None) -> MTDChar:
        backing = tmp_path / f"flash{len(opened)}"
        backing.write_bytes(bytes(range(256)) * (SIZE // 256))
        fd = os.open(backing, os.O_RDWR)
        geometry = MTDGeometry("nor0", MTD_NORFLASH, flags, SIZE, ERASESIZE, 1, 0)
        device = MTDChar(fd, geometry, str(backing), allow_destructive=allow_destructive,
                         ioctl=kernel or FakeKernel())
        opened.append(device)
        return device

    yield make
    for device in opened:
        device.close()


def test_read_write_erase_round_trip(make_device: Callable[..., MTDChar]) -> None:
    kernel = FakeKernel()
    dev = make_device(kernel=kernel)
    assert dev.read(0, 4) == b"\x00\x01\x02\x03"
    dev.write(SIZE - 3, b"abc")
    assert dev.read(SIZE - 4, 4) == b"\xfcabc"
    dev.erase(ERASESIZE, ERASESIZE)
    assert dev.read(ERASESIZE, ERASESIZE) == b"\xff" * ERASESIZE
    assert dev.read(ERASESIZE - 1, 1) == b"\xff"
    assert dev.read(2 * ERASESIZE, 1) == b"\x00"
    assert kernel.calls == ["MEMERASE64"]


def test_erase_falls_back_to_memerase_on_enotty_once(
        make_device: Callable[..., MTDChar]) -> None:
    kernel = FakeKernel(has_erase64=False)
    dev = make_device(kernel=kernel)
    dev.erase(0, ERASESIZE)
    dev.erase(ERASESIZE, ERASESIZE)
    assert dev.read(0, 2 * ERASESIZE) == b"\xff" * (2 * ERASESIZE)
    assert kernel.calls == ["MEMERASE64", "MEMERASE", "MEMERASE"]


def test_other_erase_errors_are_not_swallowed(make_device: Callable[..., MTDChar]) -> None:
    def failing(fd: int, request: int, arg: Any, mutate: bool) -> int:
        raise OSError(errno.EIO, "erase failed")

    dev = make_device(kernel=failing)
    with pytest.raises(OSError) as info:
        dev.erase(0, ERASESIZE)
    assert info.value.errno == errno.EIO


def test_nothing_is_written_or_erased_without_consent(
        make_device: Callable[..., MTDChar], tmp_path: Path) -> None:
    kernel = FakeKernel()
    dev = make_device(allow_destructive=False, kernel=kernel)
    before = dev.read(0, SIZE)
    with pytest.raises(DestructiveRefused, match="needs --folio-allow-destructive") as info:
        dev.write(0, b"x")
    assert info.value.errno == errno.EPERM
    with pytest.raises(DestructiveRefused, match=r"^\[Errno 1\] refusing to erase "):
        dev.erase(0, ERASESIZE)
    assert kernel.calls == []
    assert dev.read(0, SIZE) == before


def test_range_checks_and_erofs(make_device: Callable[..., MTDChar]) -> None:
    dev = make_device()
    for call in (lambda: dev.read(SIZE - 1, 2), lambda: dev.write(SIZE, b"x"),
                 lambda: dev.erase(SIZE, ERASESIZE), lambda: dev.read(-1, 1)):
        with pytest.raises(OSError) as info:
            call()
        assert info.value.errno == errno.EINVAL
    rom = make_device(flags=MTD_CAP_ROM)
    with pytest.raises(OSError) as info:
        rom.write(0, b"x")
    assert info.value.errno == errno.EROFS


def test_close_is_idempotent(make_device: Callable[..., MTDChar]) -> None:
    dev = make_device()
    dev.sync()
    dev.close()
    dev.close()
    assert dev.fd == -1


def test_the_geometry_is_exposed_as_the_protocol_wants(
        make_device: Callable[..., MTDChar]) -> None:
    from pytest_folio.targets.protocols import MTDDevice
    dev = make_device()
    assert isinstance(dev, MTDDevice)
    assert (dev.name, dev.type, dev.size, dev.erasesize, dev.writesize, dev.oobsize) == (
        "nor0", MTD_NORFLASH, SIZE, ERASESIZE, 1, 0)
    assert dev.type != MTD_RAM
    assert dev.is_real_device  # the suites' cue to ask for --folio-allow-destructive


def test_chunked_reads_fill_the_callers_buffer_past_iov_max(
        make_device: Callable[..., MTDChar]) -> None:
    dev = make_device()
    buf = bytearray(ERASESIZE)
    dev.read_into(ERASESIZE, buf, chunk=ERASESIZE // (2 * mtdchar.IOV_MAX) or 1)
    assert buf == dev.read(ERASESIZE, ERASESIZE) == (bytes(range(256)) * (ERASESIZE // 256))


def test_chunked_writes_land_where_one_write_would(make_device: Callable[..., MTDChar]) -> None:
    dev = make_device()
    data = bytes(reversed(range(256))) * 12
    dev.write_from(100, memoryview(data), chunk=512)
    assert dev.read(100, len(data)) == data
    assert dev.read(99, 1) == b"\x63" and dev.read(100 + len(data), 1) == b"\x64"


def test_chunked_io_checks_the_range_and_consent(make_device: Callable[..., MTDChar]) -> None:
    with pytest.raises(OSError) as exc:
        make_device().read_into(SIZE - 4, bytearray(8), chunk=2)
    assert exc.value.errno == errno.EINVAL
    with pytest.raises(DestructiveRefused):
        make_device(allow_destructive=False).write_from(0, b"xx", chunk=1)


def test_a_partial_vectored_transfer_resumes_mid_iovec() -> None:
    iov = [memoryview(b"abcd"), memoryview(b"efgh"), memoryview(b"ij")]
    assert [bytes(v) for v in mtdchar._advance(iov, 6)] == [b"gh", b"ij"]
    assert [bytes(v) for v in mtdchar._advance(iov, 8)] == [b"ij"]
    assert mtdchar._advance(iov, 10) == []


def test_the_iovecs_of_a_buffer_used_again_are_made_once() -> None:
    cache = mtdchar._IovecCache()
    buf = bytearray(b"abcdefgh")
    first = cache.of(buf, 2)
    assert [bytes(v) for v in first] == [b"ab", b"cd", b"ef", b"gh"]
    assert cache.of(buf, 2) is first                       # the same buffer: kept
    assert [bytes(v) for v in cache.of(buf, 4)] == [b"abcd", b"efgh"]
    assert [bytes(v) for v in cache.of(bytearray(b"ijkl"), 4)] == [b"ijkl"]
    buf[:2] = b"zz"                                          # the views are of the buffer
    assert bytes(cache.of(buf, 2)[0]) == b"zz"


def test_the_speed_runner_moves_whole_eraseblocks_through_the_chunked_calls(
        make_device: Callable[..., MTDChar], monkeypatch: pytest.MonkeyPatch) -> None:
    dev = make_device()
    calls: list[tuple[int, int]] = []
    read_into = dev.read_into

    def counted(offset: int, buf: bytearray | memoryview, chunk: int = 0) -> None:
        calls.append((len(buf), chunk))
        read_into(offset, buf, chunk)

    monkeypatch.setattr(dev, "read_into", counted)
    results = run_speedtest(dev)
    assert {r.name for r in results} >= {"Page read (512 B)", "Eraseblock read (16 KiB)"}
    assert calls.count((ERASESIZE, 512)) == SIZE // ERASESIZE  # one call per block


def test_the_chunked_runners_catch_a_device_that_loses_data(
        make_device: Callable[..., MTDChar], monkeypatch: pytest.MonkeyPatch) -> None:
    dev = make_device()
    write_from = dev.write_from

    def lossy(offset: int, data: bytes | bytearray | memoryview, chunk: int = 0) -> None:
        data = bytes(data)
        write_from(offset, data[:-1] + b"\x00" if len(data) > 1 else data, chunk)

    monkeypatch.setattr(dev, "write_from", lossy)
    with pytest.raises(MTDTestError, match="read wrong data"):
        run_speedtest(dev)
    with pytest.raises(MTDTestError, match="read wrong data"):
        run_stresstest(dev, count=200, seed=3)


def test_the_chunked_stress_run_passes_on_a_good_device(
        make_device: Callable[..., MTDChar]) -> None:
    assert run_stresstest(make_device(), count=300, seed=5).operations == 300
