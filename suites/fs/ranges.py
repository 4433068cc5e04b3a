"""Range operations: copy_file_range and fallocate's modes."""

from __future__ import annotations

import errno
import os
from functools import partial

from pytest_folio.fsx.differential import copy_all
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.linux.uapi import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
)
from pytest_folio.suites.fs.base import (
    FALLOC_FL_UNKNOWN,
    RDWR_CREAT,
    _Base,
    expect_errno,
    need,
    pattern,
)
from pytest_folio.targets.protocols import AnyFileSystem


class FsCopyRange(_Base):
    """copy_file_range at and past the source EOF, within one file, of zero bytes."""

    def assert_copies_nothing(self, fs: AnyFileSystem, *calls: tuple[int, int, int]) -> None:
        """Each ``(count, offset_src, offset_dst)`` from a 1000-byte file into a 3-byte one
        copies no byte and leaves the destination as it was."""
        need(fs, "copy_range")
        src = self.create(fs, "a", pattern(1000, 21))
        dst = self.create(fs, "b", b"dst")
        for count, off_in, off_out in calls:
            got = fs.copy_file_range(src, dst, count, off_in, off_out)
            assert got == 0, f"copying {count} bytes from {off_in} to {off_out} copied {got}"
        assert fs.fstat(dst).st_size == 3
        assert fs.pread(dst, 10, 0) == b"dst"

    def test_copy_file_range_past_the_source_eof_copies_nothing(
            self, filesystem: AnyFileSystem) -> None:
        self.assert_copies_nothing(filesystem, (100, 1000, 0), (100, 5000, 3))

    def test_copy_file_range_across_the_source_eof_copies_up_to_eof(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "copy_range")
        bs = filesystem.blocksize
        data = pattern(bs + 100, 22)
        src = self.create(filesystem, "a", data)
        dst = filesystem.open("b", RDWR_CREAT)
        n = copy_all(filesystem, src, dst, 3 * bs, bs - 50, 0)
        assert n == 150
        self.assert_contents(filesystem, dst, data[bs - 50:])

    def test_copy_file_range_of_overlapping_ranges_in_one_file_is_einval(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "copy_range")
        bs = filesystem.blocksize
        data = pattern(3 * bs, 23)
        fd = self.create(filesystem, "a", data)
        expect_errno(lambda: filesystem.copy_file_range(fd, fd, bs, 0, bs // 2), errno.EINVAL)
        expect_errno(lambda: filesystem.copy_file_range(fd, fd, bs, bs, bs - 1),
                     errno.EINVAL)
        self.assert_contents(filesystem, fd, data)

    def test_copy_file_range_between_ranges_of_one_file_copies(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "copy_range")
        bs = filesystem.blocksize
        model = bytearray(pattern(3 * bs, 24))
        fd = self.create(filesystem, "a", bytes(model))
        assert copy_all(filesystem, fd, fd, bs + 7, 3, 2 * bs - 5) == bs + 7
        model[2 * bs - 5:3 * bs + 2] = model[3:bs + 10]
        assert copy_all(filesystem, fd, fd, bs, bs, 0) == bs    # touching, not overlapping
        model[0:bs] = model[bs:2 * bs]
        self.assert_contents(filesystem, fd, model)

    def test_copy_file_range_of_zero_bytes_changes_nothing(
            self, filesystem: AnyFileSystem) -> None:
        self.assert_copies_nothing(filesystem, (0, 0, 0), (0, 10, 5000))

    def test_copy_file_range_past_the_destination_eof_zero_fills_the_gap(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "copy_range")
        bs = filesystem.blocksize
        data = pattern(2 * bs + 3, 26)
        src = self.create(filesystem, "a", data)
        dst = self.create(filesystem, "b", b"dst")
        far = bs + PAGE_SIZE + 1
        assert copy_all(filesystem, src, dst, len(data), 0, far) == len(data)
        self.assert_contents(filesystem, dst, b"dst" + bytes(far - 3) + data)

    def test_copied_data_is_intact_after_close_and_reopen(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "copy_range")
        bs = filesystem.blocksize
        data = pattern(3 * bs + 5, 27)
        src = self.create(filesystem, "a", data)
        dst = filesystem.open("b", RDWR_CREAT)
        assert copy_all(filesystem, src, dst, len(data) - 1, 1, PAGE_SIZE - 1) == (
            len(data) - 1)
        dst = self.reopen(filesystem, dst, "b", os.O_RDONLY)
        self.assert_contents(filesystem, dst, bytes(PAGE_SIZE - 1) + data[1:])


class FsFallocate(_Base):
    """fallocate's argument and mode errors, and what each mode does to data and size."""

    def test_fallocate_of_zero_length_is_einval(self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate")
        fd = self.create(filesystem, "f", b"x")
        expect_errno(lambda: filesystem.fallocate(fd, 0, 0, 0), errno.EINVAL)
        expect_errno(lambda: filesystem.fallocate(fd, 0, 5000, 0), errno.EINVAL)
        assert filesystem.fstat(fd).st_size == 1

    def test_fallocate_at_a_negative_offset_or_length_is_einval(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate")
        fd = self.create(filesystem, "f", b"x")
        expect_errno(lambda: filesystem.fallocate(fd, 0, -1, 4096), errno.EINVAL)
        expect_errno(lambda: filesystem.fallocate(fd, 0, 0, -4096), errno.EINVAL)

    def test_punch_hole_without_keep_size_is_eopnotsupp(self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate")
        fd = self.create(filesystem, "f", pattern(8192, 28))
        expect_errno(lambda: filesystem.fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096),
                     errno.EOPNOTSUPP)
        assert filesystem.pread(fd, 8192, 0) == pattern(8192, 28)

    def test_punch_hole_together_with_zero_range_is_eopnotsupp(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate")
        fd = self.create(filesystem, "f", pattern(8192, 29))
        mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE
        expect_errno(lambda: filesystem.fallocate(fd, mode, 0, 4096), errno.EOPNOTSUPP)
        assert filesystem.pread(fd, 8192, 0) == pattern(8192, 29)

    def test_collapse_or_insert_range_with_keep_size_is_refused(
            self, filesystem: AnyFileSystem) -> None:
        """vfs_fallocate: EINVAL before Linux 6.13's rework of its mode checks,
        EOPNOTSUPP since; both are accepted."""
        need(filesystem, "fallocate")
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(4 * bs, 30))
        for mode in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE):
            expect_errno(partial(filesystem.fallocate, fd, mode | FALLOC_FL_KEEP_SIZE, bs, bs),
                         errno.EINVAL, errno.EOPNOTSUPP)
        assert filesystem.fstat(fd).st_size == 4 * bs

    def test_an_unknown_fallocate_mode_bit_is_eopnotsupp(self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate")
        fd = self.create(filesystem, "f", b"x")
        expect_errno(lambda: filesystem.fallocate(fd, FALLOC_FL_UNKNOWN, 0, 4096),
                     errno.EOPNOTSUPP)
        assert filesystem.fstat(fd).st_size == 1

    def test_fallocate_on_a_read_only_descriptor_is_ebadf(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate")
        filesystem.close(self.create(filesystem, "f", b"x"))
        fd = filesystem.open("f", os.O_RDONLY)
        expect_errno(lambda: filesystem.fallocate(fd, 0, 0, 4096), errno.EBADF)
        assert filesystem.fstat(fd).st_size == 1

    def test_fallocate_past_eof_extends_the_file_with_zeroes(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate")
        bs = filesystem.blocksize
        data = pattern(bs + 10, 31)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, 0, bs - 1, 2 * bs)
        self.assert_contents(filesystem, fd, data + bytes(3 * bs - 1 - len(data)))

    def test_fallocate_with_keep_size_leaves_the_size_and_the_data(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate")
        bs = filesystem.blocksize
        data = pattern(bs + 10, 32)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4 * bs)
        self.assert_contents(filesystem, fd, data)
        filesystem.ftruncate(fd, 3 * bs)
        self.assert_contents(filesystem, fd, data + bytes(3 * bs - len(data)))

    def test_punch_hole_zeroes_the_range_and_keeps_the_size(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate", "punch_hole")
        bs = filesystem.blocksize
        model = bytearray(pattern(4 * bs, 33))
        fd = self.create(filesystem, "f", bytes(model))
        for offset, length in ((PAGE_SIZE - 3, 2 * bs), (3 * bs + 1, 10)):
            filesystem.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                                 length)
            model[offset:offset + length] = bytes(length)
        self.assert_contents(filesystem, fd, model)

    def test_punch_hole_past_eof_changes_nothing(self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate", "punch_hole")
        bs = filesystem.blocksize
        data = pattern(bs + 3, 34)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, bs + 3, 2 * bs)
        self.assert_contents(filesystem, fd, data)

    def test_zero_range_zeroes_the_range_and_extends_the_file(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate", "zero_range")
        bs = filesystem.blocksize
        data = pattern(2 * bs, 35)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_ZERO_RANGE, bs + 1, 2 * bs)
        self.assert_contents(filesystem, fd, data[:bs + 1] + bytes(2 * bs))

    def test_zero_range_inside_the_file_zeroes_exactly_the_range(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate", "zero_range")
        bs = filesystem.blocksize
        model = bytearray(pattern(3 * bs, 61))
        fd = self.create(filesystem, "f", bytes(model))
        for offset, length in ((PAGE_SIZE - 3, bs + 8), (2 * bs + 1, 10)):
            filesystem.fallocate(fd, FALLOC_FL_ZERO_RANGE, offset, length)
            model[offset:offset + length] = bytes(length)
        self.assert_contents(filesystem, fd, model)

    def test_zero_range_with_keep_size_never_extends_the_file(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate", "zero_range")
        bs = filesystem.blocksize
        data = pattern(2 * bs, 36)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, bs + 1, 2 * bs)
        self.assert_contents(filesystem, fd, data[:bs + 1] + bytes(bs - 1))

    def test_collapse_range_not_aligned_to_the_block_size_is_einval(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate", "collapse_range")
        bs = filesystem.blocksize
        data = pattern(6 * bs, 37)
        fd = self.create(filesystem, "f", data)
        for offset, length in ((bs // 2, bs), (bs, bs // 2), (bs + 512, bs)):
            expect_errno(partial(filesystem.fallocate, fd, FALLOC_FL_COLLAPSE_RANGE, offset,
                                 length), errno.EINVAL)
        self.assert_contents(filesystem, fd, data)

    def test_collapse_range_reaching_eof_is_einval(self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate", "collapse_range")
        bs = filesystem.blocksize
        data = pattern(4 * bs, 38)
        fd = self.create(filesystem, "f", data)
        expect_errno(lambda: filesystem.fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 2 * bs,
                                                  2 * bs), errno.EINVAL)
        expect_errno(lambda: filesystem.fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 3 * bs,
                                                  2 * bs), errno.EINVAL)
        self.assert_contents(filesystem, fd, data)

    def test_collapse_range_removes_the_range(self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate", "collapse_range")
        bs = filesystem.blocksize
        data = pattern(5 * bs + 7, 39)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, bs, 2 * bs)
        self.assert_contents(filesystem, fd, data[:bs] + data[3 * bs:])

    def test_insert_range_not_aligned_or_at_eof_is_einval(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate", "insert_range")
        bs = filesystem.blocksize
        data = pattern(3 * bs, 40)
        fd = self.create(filesystem, "f", data)
        for offset, length in ((bs // 2, bs), (bs, bs // 2), (3 * bs, bs), (4 * bs, bs)):
            expect_errno(partial(filesystem.fallocate, fd, FALLOC_FL_INSERT_RANGE, offset,
                                 length), errno.EINVAL)
        self.assert_contents(filesystem, fd, data)

    def test_insert_range_shifts_the_data_up_behind_a_hole(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "fallocate", "insert_range")
        bs = filesystem.blocksize
        data = pattern(3 * bs + 7, 41)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_INSERT_RANGE, bs, bs)
        self.assert_contents(filesystem, fd, data[:bs] + bytes(bs) + data[bs:])
