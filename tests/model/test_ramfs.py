"""The reference ramfs: block sizes, folio orders, zeroing rules, errnos."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Any

import pytest

from pytest_folio.fixtures.fs import fs_target
from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.model.invariants import check_mapping
from pytest_folio.model.ramfs import DEFAULT_FEATURES, FULL_FEATURES, Ramfs
from pytest_folio.plugin import settings
from pytest_folio.targets.protocols import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
    FileSystem,
)

RW = os.O_RDWR | os.O_CREAT
ALL_BLOCK_SIZES = [PAGE_SIZE << order for order in range(10)]


def errno_of(call: Callable[[], Any]) -> int:
    with pytest.raises(OSError) as info:
        call()
    assert info.value.errno is not None
    return info.value.errno


def dirty_memory(fs: Ramfs, size: int) -> None:
    """Fill physical memory with 0xEE and free it, so new folios reuse non-zero pages."""
    fd = fs.open("garbage", RW)
    fs.pwrite(fd, b"\xee" * size, 0)
    fs.close(fd)
    fs.unlink("garbage")


@pytest.mark.parametrize("bad", [0, 512, 2048, 3000, 12288, 4 << 20, -4096])
def test_bad_block_sizes_are_einval(bad: int) -> None:
    with pytest.raises(OSError) as info:
        Ramfs(blocksize=bad)
    assert info.value.errno == errno.EINVAL
    assert "power of two from 4K to 2M" in str(info.value)


def test_block_size_as_text() -> None:
    assert Ramfs(blocksize="64k").blocksize == 65536
    with pytest.raises(OSError) as info:
        Ramfs(blocksize="3k")
    assert info.value.errno == errno.EINVAL and "from 4K to 2M" in str(info.value)


def test_bad_mount_options() -> None:
    assert errno_of(lambda: Ramfs(features="most")) == errno.EINVAL
    assert errno_of(lambda: Ramfs(memory=1000)) == errno.EINVAL


@pytest.mark.folio_block_sizes(*ALL_BLOCK_SIZES)
def test_every_folio_has_the_minimum_order(block_size: int) -> None:
    fs = Ramfs(blocksize=block_size, memory=32 << 20)
    assert isinstance(fs, FileSystem)
    order = block_size.bit_length() - 1 - 12
    fd = fs.open("f", RW)
    size = 3 * block_size + 100
    # writes of odd lengths at odd offsets, plus a mapped write and a read of a hole
    for offset in range(0, size, 7000):
        fs.pwrite(fd, b"w" * min(5000, size - offset), offset)
    fs.ftruncate(fd, size + 2 * block_size)
    fs.pread(fd, block_size, size + block_size // 2)
    fs.mmap_write(fd, 10, b"m")
    mapping = fs.lookup("f").i_mapping
    assert mapping is not None and mapping.mapping_min_folio_order() == order
    folios = mapping.folios()
    assert folios and {f.order for f in folios} == {order}
    check_mapping(mapping)
    st = fs.fstat(fd)
    assert st.st_blksize == block_size
    assert st.st_blocks == mapping.nrpages * PAGE_SIZE // 512 == len(folios) * block_size // 512


@pytest.mark.folio_block_sizes("4k", "16k", "64k", "2M")
def test_partial_write_into_a_fresh_large_folio_zeroes_the_rest(block_size: int) -> None:
    fs = Ramfs(blocksize=block_size, memory=8 << 20)
    dirty_memory(fs, 8 << 20)                   # every page of memory now holds 0xEE
    fd = fs.open("f", RW)
    inner = 1000 if block_size == PAGE_SIZE else 5000
    fs.pwrite(fd, b"abc", block_size + inner)
    mapping = fs.lookup("f").i_mapping
    assert mapping is not None
    folio = mapping.filemap_get_folio(block_size // PAGE_SIZE)
    assert folio is not None and folio.size == block_size
    expected = bytearray(block_size)
    expected[inner:inner + 3] = b"abc"
    assert bytes(folio.data) == bytes(expected)
    assert fs.pread(fd, 2 * block_size, 0) == bytes(block_size + inner) + b"abc"


def test_truncate_down_then_up_reads_zeroes(block_size: int) -> None:
    fs = Ramfs(blocksize=block_size)
    fd = fs.open("f", RW)
    fs.pwrite(fd, b"\xaa" * 3 * block_size, 0)
    fs.ftruncate(fd, 5000)
    mapping = fs.lookup("f").i_mapping
    assert mapping is not None
    assert {f.order for f in mapping.folios()} == {mapping.mapping_min_folio_order()}
    fs.ftruncate(fd, 3 * block_size)
    assert fs.pread(fd, 4 * block_size, 0) == b"\xaa" * 5000 + bytes(3 * block_size - 5000)
    assert fs.mmap_read(fd, 0, 3 * block_size) == fs.pread(fd, 3 * block_size, 0)


def test_punched_hole_inside_a_minimum_order_folio_is_zeroed_in_place(block_size: int) -> None:
    fs = Ramfs(blocksize=block_size, features="full")
    fd = fs.open("f", RW)
    fs.pwrite(fd, b"\xaa" * 2 * block_size, 0)
    mapping = fs.lookup("f").i_mapping
    assert mapping is not None
    before = mapping.folios()
    splits = fs.stats.splits
    fs.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1000, 2000)
    assert mapping.folios() == before and fs.stats.splits == splits
    assert bytes(before[0].data[:4000]) == b"\xaa" * 1000 + bytes(2000) + b"\xaa" * 1000
    assert fs.fstat(fd).st_size == 2 * block_size
    # a hole of whole folios removes them
    fs.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, block_size, block_size)
    assert mapping.folios() == before[:1]
    assert fs.pread(fd, block_size, block_size) == bytes(block_size)


def test_mapped_reads_past_eof_in_the_last_page_read_zeroes(block_size: int) -> None:
    fs = Ramfs(blocksize=block_size)
    fd = fs.open("f", RW)
    fs.pwrite(fd, b"\xbb" * block_size * 2, 0)
    fs.ftruncate(fd, block_size + 100)
    last_page_end = block_size + PAGE_SIZE
    assert fs.mmap_read(fd, block_size, PAGE_SIZE) == b"\xbb" * 100 + bytes(PAGE_SIZE - 100)
    assert errno_of(lambda: fs.mmap_read(fd, block_size, PAGE_SIZE + 1)) == errno.EFAULT
    assert errno_of(lambda: fs.mmap_write(fd, last_page_end, b"x")) == errno.EFAULT
    fs.mmap_write(fd, block_size + 50, b"\xcc" * 100)          # straddles EOF, stays inside
    assert fs.fstat(fd).st_size == block_size + 100
    assert fs.pread(fd, PAGE_SIZE, block_size) == b"\xbb" * 50 + b"\xcc" * 50


def test_default_features_are_kernel_ramfs() -> None:
    fs = Ramfs()
    assert fs.features == DEFAULT_FEATURES == {"mmap", "copy_range"}
    fd = fs.open("f", RW)
    assert errno_of(lambda: fs.fallocate(fd, 0, 0, 4096)) == errno.EOPNOTSUPP
    # vfs_fallocate's own checks still come first
    assert errno_of(lambda: fs.fallocate(fd, 0, 0, 0)) == errno.EINVAL
    assert errno_of(lambda: fs.fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 1)) == errno.EOPNOTSUPP
    ro = fs.open("f", os.O_RDONLY)
    assert errno_of(lambda: fs.fallocate(ro, 0, 0, 4096)) == errno.EBADF
    fs.fsync(fd)


def test_full_fallocate_modes() -> None:
    bs = 16384
    fs = Ramfs(blocksize=bs, features="full")
    assert fs.features == FULL_FEATURES
    fd = fs.open("f", RW)
    data = bytes(range(256)) * (4 * bs // 256)
    fs.pwrite(fd, data, 0)
    fs.fallocate(fd, FALLOC_FL_KEEP_SIZE, 4 * bs, 2 * bs)
    assert fs.fstat(fd).st_size == 4 * bs and fs.fstat(fd).st_blocks == 6 * bs // 512
    fs.fallocate(fd, 0, 4 * bs, 100)
    assert fs.fstat(fd).st_size == 4 * bs + 100
    fs.ftruncate(fd, 4 * bs)
    fs.fallocate(fd, FALLOC_FL_ZERO_RANGE, 100, 200)
    assert fs.pread(fd, 400, 0) == data[:100] + bytes(200) + data[300:400]
    fs.pwrite(fd, data[100:300], 100)
    # collapse the second block: the rest shifts down, the size shrinks
    assert errno_of(lambda: fs.fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 100, bs)) == errno.EINVAL
    assert errno_of(lambda: fs.fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 3 * bs, bs)) == \
        errno.EINVAL                                                   # reaches EOF
    fs.fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, bs, bs)
    assert fs.pread(fd, 4 * bs, 0) == data[:bs] + data[2 * bs:]
    # insert it back as a hole
    assert errno_of(lambda: fs.fallocate(fd, FALLOC_FL_INSERT_RANGE, 3 * bs, bs)) == \
        errno.EINVAL                                                   # at EOF
    fs.fallocate(fd, FALLOC_FL_INSERT_RANGE, bs, bs)
    assert fs.pread(fd, 5 * bs, 0) == data[:bs] + bytes(bs) + data[2 * bs:]
    mapping = fs.lookup("f").i_mapping
    assert mapping is not None
    check_mapping(mapping)
    assert errno_of(lambda: fs.fallocate(
        fd, FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_KEEP_SIZE, 0, bs)) == errno.EOPNOTSUPP


def test_copy_file_range() -> None:
    fs = Ramfs(blocksize=16384)
    a, b = fs.open("a", RW), fs.open("b", RW)
    fs.pwrite(a, b"0123456789", 0)
    assert fs.copy_file_range(a, b, 100, 3, 20000) == 7
    assert fs.fstat(b).st_size == 20007
    assert fs.pread(b, 10, 19999) == b"\x003456789"
    assert fs.copy_file_range(a, b, 5, 10, 0) == 0                  # at EOF
    assert errno_of(lambda: fs.copy_file_range(a, a, 5, 0, 2)) == errno.EINVAL
    ro = fs.open("a", os.O_RDONLY)
    assert errno_of(lambda: fs.copy_file_range(a, ro, 5, 0, 0)) == errno.EBADF
    d = fs.open("", os.O_RDONLY)
    assert errno_of(lambda: fs.copy_file_range(d, b, 5, 0, 0)) == errno.EISDIR


def test_names_and_errnos() -> None:
    fs = Ramfs()
    fs.mkdir("d")
    fd = fs.open("d/f", RW)
    assert fs.listdir("") == ["d"] and fs.listdir("d/") == ["f"]
    cases: list[tuple[Callable[[], Any], int]] = [
        (lambda: fs.open("nope", os.O_RDONLY), errno.ENOENT),
        (lambda: fs.open("d/f", RW | os.O_EXCL), errno.EEXIST),
        (lambda: fs.open("d", os.O_RDWR), errno.EISDIR),
        (lambda: fs.open("d", os.O_RDONLY | os.O_CREAT), errno.EISDIR),
        (lambda: fs.open("d/f/x", RW), errno.ENOTDIR),
        (lambda: fs.open("d/f/", os.O_RDONLY), errno.ENOTDIR),
        (lambda: fs.open("new/", RW), errno.EISDIR),
        (lambda: fs.open("d/f", os.O_RDONLY | os.O_DIRECTORY), errno.ENOTDIR),
        (lambda: fs.open("x" * 256, RW), errno.ENAMETOOLONG),
        (lambda: fs.mkdir("d"), errno.EEXIST),
        (lambda: fs.rmdir("d"), errno.ENOTEMPTY),
        (lambda: fs.rmdir("d/f"), errno.ENOTDIR),
        (lambda: fs.unlink("d"), errno.EISDIR),
        (lambda: fs.unlink("d/f/"), errno.ENOTDIR),
        (lambda: fs.rename("d", "d/sub"), errno.EINVAL),
        (lambda: fs.rename("d/f", "d/f/"), errno.ENOTDIR),
        (lambda: fs.listdir("d/f"), errno.ENOTDIR),
        (lambda: fs.stat("d/nope"), errno.ENOENT),
        (lambda: fs.pread(99, 1, 0), errno.EBADF),
        (lambda: fs.pread(fd, 1, -1), errno.EINVAL),
        (lambda: fs.ftruncate(fd, -1), errno.EINVAL),
    ]
    for call, expected in cases:
        assert errno_of(call) == expected, call
    fs.mkdir("e")
    assert errno_of(lambda: fs.rename("d/f", "e")) == errno.EISDIR
    assert errno_of(lambda: fs.rename("e", "d/f")) == errno.ENOTDIR
    assert errno_of(lambda: fs.rename("e", "d")) == errno.ENOTEMPTY
    assert errno_of(lambda: fs.rename("d/f", "d")) == errno.ENOTEMPTY    # onto an ancestor
    fs.rename("d", "e")                                     # over an empty directory
    assert fs.listdir("") == ["e"] and fs.stat("e/f").st_size == 0
    ro = fs.open("e/f", os.O_RDONLY)
    assert errno_of(lambda: fs.pwrite(ro, b"x", 0)) == errno.EBADF
    assert errno_of(lambda: fs.ftruncate(ro, 0)) == errno.EINVAL
    assert errno_of(lambda: fs.mmap_write(ro, 0, b"x")) == errno.EACCES
    d = fs.open("e", os.O_RDONLY)
    assert errno_of(lambda: fs.pread(d, 1, 0)) == errno.EISDIR
    assert errno_of(lambda: fs.mmap_read(d, 0, 1)) == errno.ENODEV
    assert fs.stat("").st_nlink == 3


def test_append_and_trunc() -> None:
    fs = Ramfs()
    fd = fs.open("f", RW)
    fs.pwrite(fd, b"hello", 0)
    ap = fs.open("f", os.O_WRONLY | os.O_APPEND)
    assert fs.pwrite(ap, b"!", 0) == 1                      # pwrite appends on O_APPEND
    assert fs.pread(fd, 10, 0) == b"hello!"
    fs.close(fs.open("f", os.O_RDONLY | os.O_TRUNC))       # Linux truncates even so
    assert fs.fstat(fd).st_size == 0


def test_data_is_never_reclaimed() -> None:
    """Folios stay dirty and unevictable: a full ramfs is ENOMEM, never data loss."""
    bs, size = 16384, 1 << 20
    fs = Ramfs(blocksize=bs, memory=size)
    hole = fs.open("hole", RW)
    fs.ftruncate(hole, bs)
    assert fs.pread(hole, bs, 0) == bytes(bs)          # one clean, zero-filled folio
    a = fs.open("a", RW)
    fs.pwrite(a, b"\x11" * (size - bs), 0)             # and the rest of memory, dirty
    mapping = fs.lookup("a").i_mapping
    assert mapping is not None and all(f.dirty for f in mapping.folios())
    b = fs.open("b", RW)
    assert errno_of(lambda: fs.pwrite(b, b"x", 0)) == errno.ENOMEM
    assert fs.stats.reclaims == 0 and fs.fstat(hole).st_blocks == bs // 512
    assert fs.pread(a, size, 0) == b"\x11" * (size - bs)
    fs.ftruncate(a, 0)
    assert fs.pwrite(b, b"x", 0) == 1


def test_unlinked_open_file_lives_until_close() -> None:
    fs = Ramfs(blocksize=65536, memory=8 << 20)
    free = fs.memory.nr_free
    fd = fs.open("f", RW)
    fs.pwrite(fd, b"z" * 200000, 0)
    fs.unlink("f")
    assert fs.listdir("") == []
    assert fs.pread(fd, 3, 199997) == b"zzz"
    assert fs.memory.nr_free < free
    fs.close(fd)
    assert fs.memory.nr_free == free


def test_ramfs_fixture(ramfs: Ramfs, block_size: int) -> None:
    assert ramfs.blocksize == block_size and ramfs.features == DEFAULT_FEATURES


def test_filesystem_fixture(filesystem: FileSystem, request: pytest.FixtureRequest) -> None:
    """Whatever --folio-fs names: a working FileSystem (the reference at the block size)."""
    assert isinstance(filesystem, FileSystem)
    fd = filesystem.open("f", RW)
    assert filesystem.pwrite(fd, b"data", 5) == 4
    assert filesystem.pread(fd, 10, 0) == bytes(5) + b"data"
    assert filesystem.listdir("") == ["f"]
    filesystem.close(fd)
    if fs_target(request.config).kind == "reference":
        assert isinstance(filesystem, Ramfs)
        assert filesystem.blocksize in settings(request.config).block_sizes
