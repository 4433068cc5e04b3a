"""The protocols a target meets, and the optional capabilities suites ask for by isinstance."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.model.block2mtd import make_reference_block2mtd
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.targets.protocols import (
    FileSystem,
    HasBadBlocks,
    HasOOB,
    HasStats,
    MTDDevice,
    RealDevice,
    Reopenable,
    Snapshot,
    Unmountable,
    is_real_device,
    missing_members,
    protocol_members,
)


def test_the_mtd_protocol_lists_the_specs_members_in_order() -> None:
    assert protocol_members(MTDDevice) == (
        "name", "type", "flags", "size", "erasesize", "writesize", "oobsize",
        "read", "write", "erase", "sync", "close")


def test_missing_members_names_what_an_object_lacks() -> None:
    class Half:
        blocksize = 4096
        features: frozenset[str] = frozenset()

        def open(self, path: str, flags: int, mode: int = 0o644) -> int:
            return 3

    missing = missing_members(Half(), FileSystem)
    assert missing[:2] == ["close", "pread"] and "open" not in missing
    assert not isinstance(Half(), FileSystem)


def test_the_reference_block2mtd_has_stats_and_reopen_but_no_nand_calls() -> None:
    dev = make_reference_block2mtd(size=1 << 20, erasesize=64 << 10, folio_order=0)
    try:
        assert isinstance(dev, MTDDevice)
        assert isinstance(dev, HasStats) and isinstance(dev.stats, Snapshot)
        assert isinstance(dev, Reopenable)
        assert not isinstance(dev, HasBadBlocks) and not isinstance(dev, HasOOB)
        assert not is_real_device(dev)
    finally:
        dev.close()
        dev.bdev.release()


def test_a_device_saying_it_is_real_is_one_only_when_true() -> None:
    class Flash:
        is_real_device = False

    assert isinstance(Flash(), RealDevice) and not is_real_device(Flash())
    Flash.is_real_device = True
    assert is_real_device(Flash())


def test_the_reference_ramfs_can_be_unmounted() -> None:
    fs = Ramfs(blocksize=4 * PAGE_SIZE)
    try:
        assert isinstance(fs, FileSystem) and isinstance(fs, Unmountable)
    finally:
        fs.umount()
        fs.memory.release()


def test_a_snapshot_is_any_object_with_snapshot() -> None:
    class Counters:
        def snapshot(self) -> Mapping[str, int]:
            return {"reads": 1}

    assert isinstance(Counters(), Snapshot) and not isinstance(object(), Snapshot)
