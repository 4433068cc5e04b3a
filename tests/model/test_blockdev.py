"""The block device: logical block size rules, its page cache, and a real backing file."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from pytest_folio.model import (
    PAGE_SIZE,
    AddressSpace,
    BlockDevice,
    PhysicalMemory,
    check_mapping,
    folio_lock,
    folio_mark_dirty,
    folio_put,
    folio_unlock,
    invalidate_bdev,
    sync_blockdev,
)

MIB = 1 << 20


@pytest.mark.parametrize(("lbs", "min_order"), [
    (512, 0), (1024, 0), (4096, 0), (8192, 1), (16384, 2), (65536, 4), (2 * MIB, 9)])
def test_logical_block_size_sets_the_minimum_folio_order(lbs: int, min_order: int) -> None:
    bdev = BlockDevice(4 * MIB, logical_block_size=lbs)
    assert bdev.bd_mapping.mapping_min_folio_order() == min_order
    folio = bdev.bd_mapping.read_mapping_folio(4)          # pages 4-7: bytes 16K-32K
    assert folio.order == min_order
    folio_put(folio)


@pytest.mark.parametrize("lbs", [256, 3000, 4 * MIB, 0, 6144])
def test_bad_logical_block_size_names_the_range(lbs: int) -> None:
    with pytest.raises(ValueError, match="must be a power of two from 512B to 2M"):
        BlockDevice(8 * MIB, logical_block_size=lbs)


@pytest.mark.parametrize("size", [8 * 1024, 20 * 1024 + 100])
def test_size_must_be_whole_sectors_and_at_least_a_logical_block(size: int) -> None:
    with pytest.raises(ValueError, match="must be whole 512-byte sectors and at least its "
                                         "logical block size 16K"):
        BlockDevice(size, logical_block_size=16384)


def test_a_partial_last_folio_reads_zeroes_past_the_end_and_writes_back_its_part() -> None:
    bdev = BlockDevice(20 * 1024, logical_block_size=16384)
    folio = bdev.bd_mapping.read_mapping_folio(4)          # pages 4-7: bytes 16K-32K
    assert folio.pos == 16384 and bytes(folio.data[4096:]) == bytes(12288)
    folio_lock(folio)
    folio.data[:] = b"\xab" * 16384
    folio_mark_dirty(folio)
    folio_unlock(folio)
    folio_put(folio)
    bdev.sync_blockdev()
    assert bdev.read_backing(16384, 4096) == b"\xab" * 4096


def test_memory_too_small_for_the_block_size_names_the_limit() -> None:
    with pytest.raises(ValueError, match="1M is too small for order-9 folios: it needs at "
                                         "least 2M"):
        BlockDevice(4 * MIB, logical_block_size=2 * MIB, memory=PhysicalMemory(MIB))


def test_fixture_block_device_runs_at_the_folio_order(block_device: BlockDevice,
                                                      folio_order: int) -> None:
    assert block_device.logical_block_size == PAGE_SIZE << folio_order
    assert block_device.bd_mapping.mapping_min_folio_order() == folio_order
    assert block_device.size % block_device.logical_block_size == 0


def test_fixture_page_cache_has_the_minimum_order(page_cache: AddressSpace,
                                                   folio_order: int) -> None:
    page_cache.generic_perform_write(1, b"x")
    assert [f.order for f in page_cache.folios()] == [folio_order]


def test_memory_backed_write_sync_invalidate_round_trip() -> None:
    bdev = BlockDevice(MIB, logical_block_size=4096)
    mapping = bdev.bd_mapping
    mapping.generic_perform_write(5000, b"cached")
    assert bdev.read_backing(5000, 6) == bytes(6)         # not written back yet
    assert invalidate_bdev(bdev) == 0                      # dirty: survives
    sync_blockdev(bdev)
    assert bdev.read_backing(5000, 6) == b"cached"
    assert bdev.invalidate_bdev() == 1
    assert mapping.nrpages == 0
    bdev.write_backing(5000, b"behind")                    # the store changes underneath
    assert mapping.filemap_read(5000, 6) == b"behind"
    check_mapping(mapping)


def test_file_backed_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "disk.img"
    with BlockDevice(2 * MIB, logical_block_size=16384, path=path) as bdev:
        assert path.stat().st_size == 2 * MIB
        folio = bdev.bd_mapping.read_mapping_folio(9)
        assert (folio.index, folio.order) == (8, 2)
        folio_lock(folio)
        folio.data[PAGE_SIZE:PAGE_SIZE + 5] = b"folio"
        folio_mark_dirty(folio)
        folio_unlock(folio)
        folio_put(folio)
        assert bdev.invalidate_bdev() == 0                 # dirty folios survive
        bdev.sync_blockdev()
        assert path.read_bytes()[9 * PAGE_SIZE:9 * PAGE_SIZE + 5] == b"folio"
        assert bdev.invalidate_bdev() == 1
        with path.open("r+b") as f:                        # someone writes the file directly
            f.seek(9 * PAGE_SIZE)
            f.write(b"FOLIO")
        assert bdev.bd_mapping.filemap_read(9 * PAGE_SIZE, 5) == b"FOLIO"
    with BlockDevice(2 * MIB, path=path, read_only=True) as again:
        assert again.bd_mapping.filemap_read(9 * PAGE_SIZE, 5) == b"FOLIO"


def test_file_backing_keeps_existing_bytes(tmp_path: Path) -> None:
    path = tmp_path / "disk.img"
    path.write_bytes(b"\xab" * MIB)
    with BlockDevice(MIB, path=str(path)) as bdev:
        assert bdev.bd_mapping.filemap_read(MIB - 3, 3) == b"\xab" * 3


def test_read_only_device_refuses_writeback_with_erofs() -> None:
    bdev = BlockDevice(MIB, read_only=True)
    assert bdev.bdev_read_only()
    bdev.bd_mapping.generic_perform_write(0, b"x")
    with pytest.raises(OSError) as info:
        bdev.sync_blockdev()
    assert info.value.errno == errno.EROFS
    assert [f.dirty for f in bdev.bd_mapping.folios()] == [True]   # still dirty, not lost


def test_read_only_file_too_small_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "small.img"
    path.write_bytes(bytes(4096))
    with pytest.raises(ValueError, match="less than the device size"):
        BlockDevice(MIB, path=path, read_only=True)


def test_a_directory_or_device_is_never_opened_as_backing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a regular file"):
        BlockDevice(MIB, path=Path("/dev/null"))
    with pytest.raises(ValueError, match="not a regular file"):
        BlockDevice(MIB, path=tmp_path)
    with pytest.raises(ValueError, match="cannot open backing file"):
        BlockDevice(MIB, path=tmp_path / "no" / "such.img")


def test_backing_access_out_of_range_is_einval() -> None:
    bdev = BlockDevice(MIB)
    with pytest.raises(OSError) as info:
        bdev.read_backing(MIB - 1, 2)
    assert info.value.errno == errno.EINVAL
