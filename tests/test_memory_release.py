"""A finished test's model memory goes back to the operating system when the test ends,
not when Python's cycle collector happens to run (mappings and folios refer to each other,
so reference counting alone never frees them): a run's peak stays near one device."""

from __future__ import annotations

import pytest

from pytest_folio.model import BlockDevice, PhysicalMemory

# gc is off, so only an explicit release keeps the peak down; each test fills a 32 MiB
# device (its store and its page cache: 64 MiB) or writes 32 MiB into a ramfs.
MEMORY_RUN = """
import gc, os, resource
import pytest

def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024

START = []

def setup_module():
    gc.disable()
    START.append(rss_mib())

@pytest.mark.parametrize("i", range(6))
def test_fill_device(mtd_device, i):
    chunk = bytes([i + 1]) * mtd_device.erasesize
    for off in range(0, mtd_device.size, mtd_device.erasesize):
        mtd_device.write(off, chunk)
    mtd_device.sync()

@pytest.mark.parametrize("i", range(6))
def test_fill_file(filesystem, i):
    fd = filesystem.open("f", os.O_CREAT | os.O_RDWR)
    for off in range(0, 32 << 20, 1 << 20):
        filesystem.pwrite(fd, b"x" * (1 << 20), off)
    filesystem.close(fd)

def test_peak_is_about_one_device():
    grown = rss_mib() - START[0]
    print(f"peak grew by {grown} MiB")
    assert grown < 3 * 64, grown     # six devices held would be 6 * 64 MiB
"""


def test_a_run_of_large_devices_peaks_at_about_one_device(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(MEMORY_RUN)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s",
                                           "--folio-mtd-size=32M", "--folio-orders=0",
                                           "--folio-block-sizes=4k")
    result.assert_outcomes(passed=13)


def test_a_released_block_device_gives_its_pages_back() -> None:
    bdev = BlockDevice(1 << 20, logical_block_size=4096)
    bdev.bd_mapping.generic_perform_write(0, b"\x5a" * 8192)
    bdev.sync_blockdev()
    assert bdev.read_backing(0, 2) == b"\x5a\x5a"
    bdev.release()
    # MADV_REMOVE freed the pages: the store and the cache's memory read as zeroes
    assert bdev.read_backing(0, 8192) == bytes(8192)
    assert not any(bdev.memory.buffer[:8192])


def test_release_leaves_memory_the_device_was_given_alone() -> None:
    memory = PhysicalMemory(4 << 20)
    memory.buffer[:4] = b"keep"
    bdev = BlockDevice(1 << 20, memory=memory)
    bdev.release()
    assert bytes(memory.buffer[:4]) == b"keep"


def test_a_store_that_cannot_be_reserved_is_one_line() -> None:
    with pytest.raises(ValueError, match=r"^cannot reserve 1024T for the block device's "
                       r"store: .*"):
        BlockDevice(1 << 50, memory=PhysicalMemory(1 << 20))
