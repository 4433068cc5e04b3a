"""The invalidate race suite on the reference and on a user's device, and the kernel
block device calls its droppers make (the kernel itself is raced in the VM)."""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from unittest import mock

import pytest

from pytest_folio.mtdtests.kernel_blockdev import BLKFLSBUF, BLKZEROOUT, SECTOR, BackingDevice
from pytest_folio.suites.mtd.race import RaceRun, owned, run_invalidate_race
from pytest_folio.targets.mtd import resolve_mtd_target
from tests.helpers import mtd_devices


def _reference(spec: str, order: int = 0):
    return resolve_mtd_target(spec).open(size=2 << 20, erasesize=64 << 10,
                                         folio_order=order)


@pytest.mark.parametrize("order", [0, 2])
def test_the_reference_with_its_retry_loses_nothing(order: int) -> None:
    with _reference("reference", order) as dev:
        counts = run_invalidate_race(dev, 0.5, seed=1)
    assert counts.lost == [] and counts.page_writes > 0 and counts.erases > 0
    assert sum(counts.drops.values()) > 0


def test_the_reference_without_its_retry_loses_writes_and_names_their_offsets() -> None:
    with _reference("reference:retry=off") as dev:
        counts = run_invalidate_race(dev, 0.5, seed=1)
    assert counts.lost, counts.summary()
    first = counts.lost[0]
    assert first.startswith(("lost write at 0x", "lost erase at 0x")) and "eraseblock" in first
    offset = int(first.split(" at ")[1].split()[0], 16)
    assert offset % 4096 >= SECTOR  # the droppers' sector is never the writers'


class DroppingRam(mtd_devices.CachedRamMTD):
    """A user's device with a cache and drop_caches(), counting the calls."""

    def __init__(self, folio_order: int) -> None:
        super().__init__(folio_order=folio_order)
        self.dropped = 0
        self.guard = threading.Lock()

    def drop_caches(self, *path: str) -> None:
        with self.guard:
            self.dropped += 1


def test_a_users_device_gets_its_drop_caches_called_from_the_dropping_threads() -> None:
    dev = DroppingRam(folio_order=0)
    counts = run_invalidate_race(dev, 0.3, seed=2)
    assert counts.lost == [] and dev.dropped == counts.drops["drop_caches()"] + 1  # + final


def test_a_device_with_no_cache_to_drop_is_refused_with_the_reason() -> None:
    with pytest.raises(LookupError, match="has no cache to drop"):
        run_invalidate_race(mtd_devices.CachedRamMTD(folio_order=0), 0.1, seed=1)


def test_a_write_that_did_not_land_is_reported_at_its_first_differing_byte() -> None:
    run = RaceRun(mtd_devices.CachedRamMTD(folio_order=0), 0.1, 1, seed=1)
    want = bytes(range(256)) * (run.esz // 256)
    got = bytearray(want)
    got[3 * 4096 + SECTOR + 7] ^= 0xFF      # a lost byte in page 3
    got[5 * 4096] ^= 0xFF                   # the droppers' sector: not the writers'
    assert run._lost("write", 2 * run.esz, bytes(got), want, 2)
    assert run.counts.lost == [f"lost write at {2 * run.esz + 3 * 4096 + SECTOR + 7:#x} "
                               f"(eraseblock 2, page 3): read {got[3 * 4096 + SECTOR + 7]:#04x}, "
                               f"expected {want[3 * 4096 + SECTOR + 7]:#04x}"]
    assert owned(b"\0" * 4096) == b"\0" * (4096 - SECTOR)


def test_the_backing_device_is_found_from_block2mtds_name(tmp_path: Path) -> None:
    disk = tmp_path / "vdb"
    disk.write_bytes(b"\0" * 8192)
    backing = BackingDevice.of(f"block2mtd: {disk}")
    assert backing is not None and backing.path == str(disk)
    backing.close()
    assert BackingDevice.of("nand0") is None
    assert BackingDevice.of(f"block2mtd: {tmp_path / 'gone'}") is None


@pytest.mark.parametrize(("error", "dropped"), [(None, True), (errno.EINVAL, True),
                                                (errno.EBUSY, False)])
def test_zeroing_a_sector_counts_as_a_drop_unless_the_page_was_dirty(
        tmp_path: Path, error: int | None, dropped: bool) -> None:
    disk = tmp_path / "vdb"
    disk.write_bytes(b"\0" * 8192)
    backing = BackingDevice(str(disk))
    calls: list[tuple[int, bytes]] = []

    def ioctl(fd: int, request: int, arg: bytes = b"") -> None:
        calls.append((request, arg))
        if error is not None:
            raise OSError(error, "fake")
    try:
        with mock.patch("fcntl.ioctl", ioctl):
            assert backing.zero_sector(8192) is dropped
        with mock.patch("fcntl.ioctl", lambda fd, request: calls.append((request, b""))):
            backing.flush()
    finally:
        backing.close()
    assert calls[0] == (BLKZEROOUT, (8192).to_bytes(8, "little") + SECTOR.to_bytes(8, "little"))
    assert calls[1][0] == BLKFLSBUF


def test_another_error_of_the_zeroing_is_raised(tmp_path: Path) -> None:
    disk = tmp_path / "vdb"
    disk.write_bytes(b"\0" * 8192)
    backing = BackingDevice(str(disk))
    try:
        with mock.patch("fcntl.ioctl", side_effect=OSError(errno.EACCES, "no")), \
                pytest.raises(OSError, match="no"):
            backing.zero_sector(0)
    finally:
        backing.close()
