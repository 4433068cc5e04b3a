"""Data that must survive: close and reopen, fsync, truncate, files larger than any
cache."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import ClassVar

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.suites.fs.base import RDWR_CREAT, _Base, need, pattern
from pytest_folio.targets.protocols import AnyFileSystem


class FsPersistence(_Base):
    """Data intact across close and reopen, fsync, and truncate down then up."""

    def test_data_is_intact_after_close_and_reopen(self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        model = bytearray(pattern(3 * bs + 11, 48))
        fd = self.create(filesystem, "f", bytes(model))
        filesystem.pwrite(fd, b"patch", bs - 2)
        model[bs - 2:bs + 3] = b"patch"
        fd = self.reopen(filesystem, fd, "f", os.O_RDONLY)
        self.assert_contents(filesystem, fd, model)

    def test_data_is_intact_after_fsync_close_and_reopen(
            self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        model = bytearray(pattern(3 * bs + 11, 49))
        fd = self.create(filesystem, "f", bytes(model))
        filesystem.fsync(fd)
        filesystem.pwrite(fd, b"after fsync", 2 * bs - 1)
        model[2 * bs - 1:2 * bs + 10] = b"after fsync"
        filesystem.fsync(fd)
        fd = self.reopen(filesystem, fd, "f", os.O_RDONLY)
        self.assert_contents(filesystem, fd, model)

    def test_mapped_writes_are_intact_after_close_and_reopen(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "mmap")
        bs = filesystem.blocksize
        model = bytearray(pattern(3 * bs, 50))
        fd = self.create(filesystem, "f", bytes(model))
        for offset in (1, bs - 5, 2 * bs + PAGE_SIZE - 1):
            data = pattern(PAGE_SIZE + 3, offset)[:len(model) - offset]
            filesystem.mmap_write(fd, offset, data)
            model[offset:offset + len(data)] = data
        fd = self.reopen(filesystem, fd, "f")
        self.assert_contents(filesystem, fd, model)

    def test_truncate_down_then_up_reads_zeroes_past_the_cut(
            self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        size = 3 * bs
        data = pattern(size, 51)
        for cut in self.boundaries(filesystem):
            fd = self.create(filesystem, "f", data)
            filesystem.ftruncate(fd, cut)
            filesystem.ftruncate(fd, size)
            got = filesystem.pread(fd, size, 0)
            assert got[:cut] == data[:cut], f"data before the cut at {cut}"
            assert got[cut:] == bytes(size - cut), (
                f"stale data after truncating to {cut} and back to {size}")
            filesystem.close(fd)

    def test_truncate_down_reopen_then_up_reads_zeroes_past_the_cut(
            self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        size = 3 * bs
        data = pattern(size, 52)
        for cut in (PAGE_SIZE + 1, bs - 1, bs + 1, 2 * bs + PAGE_SIZE - 1):
            fd = self.create(filesystem, "f", data)
            filesystem.fsync(fd)
            filesystem.ftruncate(fd, cut)
            fd = self.reopen(filesystem, fd, "f")
            filesystem.ftruncate(fd, size)
            fd = self.reopen(filesystem, fd, "f")
            self.assert_contents(filesystem, fd, data[:cut] + bytes(size - cut))
            filesystem.close(fd)


class FsLargeFiles(_Base):
    """Files larger than any plausible cache: written, fsynced, reopened and compared,
    so every dirty folio is written back and read again at least once."""

    large_file: ClassVar[int] = 6 << 20
    chunk: ClassVar[int] = 100_003      # unaligned, so writes start mid-folio

    def chunks(self, size: int) -> Iterator[tuple[int, int]]:
        for start in range(0, size, self.chunk):
            yield start, min(self.chunk, size - start)

    def write_large(self, fs: AnyFileSystem, path: str, data: bytes) -> int:
        fd = fs.open(path, RDWR_CREAT | os.O_TRUNC)
        for start, n in self.chunks(len(data)):
            assert fs.pwrite(fd, data[start:start + n], start) == n
        return fd

    def test_a_file_larger_than_any_cache_reads_back_after_fsync_and_reopen(
            self, filesystem: AnyFileSystem) -> None:
        data = pattern(self.large_file + 123, 53)
        fd = self.write_large(filesystem, "big", data)
        filesystem.fsync(fd)
        fd = self.reopen(filesystem, fd, "big", os.O_RDONLY)
        self.assert_contents(filesystem, fd, data)

    def test_two_large_files_written_in_turns_keep_their_own_data(
            self, filesystem: AnyFileSystem) -> None:
        size = self.large_file // 2
        a, b = pattern(size, 54), pattern(size, 55)
        fa = filesystem.open("a", RDWR_CREAT)
        fb = filesystem.open("b", RDWR_CREAT)
        for start, n in self.chunks(size):
            filesystem.pwrite(fa, a[start:start + n], start)
            filesystem.pwrite(fb, b[start:start + n], start)
        fa, fb = self.reopen(filesystem, fa, "a"), self.reopen(filesystem, fb, "b")
        self.assert_contents(filesystem, fa, a)
        self.assert_contents(filesystem, fb, b)

    def test_small_rewrites_all_over_a_large_file_survive(
            self, filesystem: AnyFileSystem) -> None:
        model = bytearray(pattern(self.large_file, 56))
        fd = self.write_large(filesystem, "big", bytes(model))
        filesystem.fsync(fd)
        rnd = random.Random(57)
        bs = filesystem.blocksize
        for n in range(64):
            offset = rnd.randrange(len(model) // bs) * bs + rnd.choice(
                [0, 1, PAGE_SIZE - 1, PAGE_SIZE, bs - 7])
            data = pattern(rnd.choice([1, 17, PAGE_SIZE, bs]), 1000 + n)
            data = data[:len(model) - offset]
            filesystem.pwrite(fd, data, offset)
            model[offset:offset + len(data)] = data
        fd = self.reopen(filesystem, fd, "big", os.O_RDONLY)
        self.assert_contents(filesystem, fd, model)

    def test_mapped_writes_to_a_large_file_survive_other_traffic(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "mmap")
        model = bytearray(pattern(self.large_file, 58))
        fd = self.write_large(filesystem, "big", bytes(model))
        bs = filesystem.blocksize
        for n, offset in enumerate(range(bs - 3, len(model) - PAGE_SIZE, len(model) // 16)):
            data = pattern(PAGE_SIZE, 2000 + n)
            filesystem.mmap_write(fd, offset, data)
            model[offset:offset + PAGE_SIZE] = data
        filesystem.close(self.write_large(filesystem, "other", pattern(self.large_file, 59)))
        fd = self.reopen(filesystem, fd, "big", os.O_RDONLY)
        self.assert_contents(filesystem, fd, model)

    def test_a_large_file_truncated_down_then_up_reads_zeroes_past_the_cut(
            self, filesystem: AnyFileSystem) -> None:
        data = pattern(self.large_file, 60)
        fd = self.write_large(filesystem, "big", data)
        filesystem.fsync(fd)
        cut = self.large_file // 2 + PAGE_SIZE + 123
        filesystem.ftruncate(fd, cut)
        filesystem.ftruncate(fd, self.large_file)
        fd = self.reopen(filesystem, fd, "big", os.O_RDONLY)
        self.assert_contents(filesystem, fd, data[:cut] + bytes(self.large_file - cut))
