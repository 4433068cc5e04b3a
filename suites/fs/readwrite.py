"""pread/pwrite around EOF, holes and block boundaries, and the open flags."""

from __future__ import annotations

import errno
import os

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.suites.fs.base import RDWR_CREAT, _Base, expect_errno, need, pattern
from pytest_folio.targets.protocols import AnyFileSystem


class FsReadWrite(_Base):
    """pread and pwrite around EOF, holes and block boundaries."""

    def test_pread_at_eof_returns_no_bytes(self, filesystem: AnyFileSystem) -> None:
        for size in self.boundaries(filesystem):
            fd = self.create(filesystem, "f", pattern(size, size))
            assert filesystem.pread(fd, 4096, size) == b"", f"file of {size} bytes"
            filesystem.close(fd)

    def test_pread_past_eof_returns_no_bytes(self, filesystem: AnyFileSystem) -> None:
        size = filesystem.blocksize + 100
        fd = self.create(filesystem, "f", pattern(size, 1))
        for offset in (size + 1, size + PAGE_SIZE, 3 * filesystem.blocksize, 1 << 30):
            assert filesystem.pread(fd, 100, offset) == b"", f"pread at {offset}"

    def test_pread_across_eof_returns_the_bytes_up_to_eof(
            self, filesystem: AnyFileSystem) -> None:
        for size in self.boundaries(filesystem):
            data = pattern(size, size)
            fd = self.create(filesystem, "f", data)
            start = max(0, size - 10)
            assert filesystem.pread(fd, 2 * filesystem.blocksize, start) == data[start:], (
                f"file of {size} bytes, pread at {start}")
            filesystem.close(fd)

    def test_pread_before_eof_is_never_short(self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        data = pattern(4 * bs + 123, 2)
        fd = self.create(filesystem, "f", data)
        for offset in (0, 1, PAGE_SIZE - 1, bs - 1, bs + 7):
            n = len(data) - offset - 5
            assert filesystem.pread(fd, n, offset) == data[offset:offset + n], (
                f"pread of {n} at {offset}")

    def test_pread_of_a_hole_reads_zeroes(self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        fd = filesystem.open("f", RDWR_CREAT)
        filesystem.pwrite(fd, b"end", 3 * bs + 5)
        assert filesystem.pread(fd, 3 * bs + 5, 0) == bytes(3 * bs + 5)
        assert filesystem.pread(fd, 10, 3 * bs + 5) == b"end"

    def test_zero_length_pwrite_never_extends_the_file(self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        fd = filesystem.open("f", RDWR_CREAT)
        assert filesystem.pwrite(fd, b"", bs + 3) == 0
        assert filesystem.fstat(fd).st_size == 0
        filesystem.pwrite(fd, b"abc", 0)
        for offset in (3, 4, PAGE_SIZE, bs, 5 * bs + 1):
            assert filesystem.pwrite(fd, b"", offset) == 0
            assert filesystem.fstat(fd).st_size == 3, f"after an empty pwrite at {offset}"
        assert filesystem.pread(fd, 100, 0) == b"abc"

    def test_pwrite_past_eof_fills_the_gap_with_zeroes(self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        for size in (100, PAGE_SIZE - 1, bs + 5):
            fd = self.create(filesystem, "f", pattern(size, 3))
            far = 2 * bs + 7
            filesystem.pwrite(fd, b"xyz", far)
            assert filesystem.fstat(fd).st_size == far + 3
            assert filesystem.pread(fd, far - size, size) == bytes(far - size), (
                f"gap after a file of {size} bytes")
            filesystem.close(fd)

    def test_a_block_long_pwrite_from_inside_a_new_block_zero_fills_its_head(
            self, filesystem: AnyFileSystem) -> None:
        """A write exactly one block long starting inside a block past EOF leaves zeroes
        before it in that block. Linux's simple_write_begin() took such a write for a
        whole-folio one once folios were larger than a page, and left the folio's head
        holding whatever the memory held before (freed file data, here)."""
        bs = filesystem.blocksize
        data = pattern(bs, 13)
        for start in sorted(s for s in {1, PAGE_SIZE + 1, bs // 2 + 3} if s < bs):
            stale = self.create(filesystem, "stale", b"\xa5" * (4 * bs))
            filesystem.close(stale)
            filesystem.unlink("stale")
            fd = self.create(filesystem, "f", b"abc")
            assert filesystem.pwrite(fd, data, bs + start) == bs
            self.assert_contents(filesystem, fd, b"abc" + bytes(bs + start - 3) + data)
            filesystem.close(fd)

    def test_pwrite_after_truncate_down_leaves_zeroes_in_the_gap(
            self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(3 * bs, 4))
        filesystem.ftruncate(fd, 100)
        filesystem.pwrite(fd, b"xyz", 2 * bs + 3)
        assert filesystem.pread(fd, 2 * bs + 3 - 100, 100) == bytes(2 * bs + 3 - 100)

    def test_writes_across_every_block_boundary_read_back(
            self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        model = bytearray(pattern(3 * bs, 5))
        fd = self.create(filesystem, "f", bytes(model))
        for n, offset in enumerate(self.boundaries(filesystem)):
            for length in (1, 2, PAGE_SIZE + 1):
                data = pattern(length, 100 + n * 7 + length)
                start = max(0, offset - length // 2)
                assert filesystem.pwrite(fd, data, start) == length
                model[start:start + length] = data
        self.assert_contents(filesystem, fd, model)

    def test_an_overwrite_inside_a_block_keeps_the_rest_of_it(
            self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        model = bytearray(pattern(2 * bs, 6))
        fd = self.create(filesystem, "f", bytes(model))
        fd = self.reopen(filesystem, fd, "f")
        filesystem.pwrite(fd, b"!" * 10, bs + bs // 2 + 3)
        model[bs + bs // 2 + 3:bs + bs // 2 + 13] = b"!" * 10
        self.assert_contents(filesystem, fd, model)

    def test_pwrite_is_visible_to_mapped_reads(self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "mmap")
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(2 * bs, 7))
        assert filesystem.mmap_read(fd, 0, 2 * bs) == pattern(2 * bs, 7)
        filesystem.pwrite(fd, b"new", bs - 1)
        assert filesystem.mmap_read(fd, bs - 2, 5) == pattern(2 * bs, 7)[bs - 2:bs - 1] + (
            b"new" + pattern(2 * bs, 7)[bs + 2:bs + 3])

    def test_mapped_writes_are_visible_to_pread(self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "mmap")
        bs = filesystem.blocksize
        model = bytearray(pattern(2 * bs, 8))
        fd = self.create(filesystem, "f", bytes(model))
        data = pattern(bs // 2 + 3, 9)
        filesystem.mmap_write(fd, bs - 1, data)
        model[bs - 1:bs - 1 + len(data)] = data
        assert filesystem.fstat(fd).st_size == 2 * bs
        self.assert_contents(filesystem, fd, model)

    def test_a_mapped_read_of_the_last_page_reads_zeroes_past_eof(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "mmap")
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(2 * bs, 10))
        for size in (bs + PAGE_SIZE + 10, bs + 1, 100):
            filesystem.ftruncate(fd, size)
            end = -(-size // PAGE_SIZE) * PAGE_SIZE
            assert filesystem.mmap_read(fd, size, end - size) == bytes(end - size), (
                f"after truncating to {size}")


class FsOpenFlags(_Base):
    """O_TRUNC, O_APPEND, O_CREAT, O_EXCL and the access modes on existing files."""

    def test_o_trunc_empties_an_existing_file(self, filesystem: AnyFileSystem) -> None:
        fd = self.create(filesystem, "f", pattern(2 * filesystem.blocksize + 100, 11))
        filesystem.close(fd)
        fd = filesystem.open("f", os.O_RDWR | os.O_TRUNC)
        assert filesystem.fstat(fd).st_size == 0
        assert filesystem.pread(fd, 100, 0) == b""

    def test_o_trunc_leaves_no_old_data_to_read_after_extending(
            self, filesystem: AnyFileSystem) -> None:
        size = 2 * filesystem.blocksize + 100
        fd = self.create(filesystem, "f", pattern(size, 12))
        filesystem.close(fd)
        fd = filesystem.open("f", os.O_RDWR | os.O_TRUNC)
        filesystem.ftruncate(fd, size)
        assert filesystem.pread(fd, size, 0) == bytes(size)
        filesystem.pwrite(fd, b"x", size + 10)
        assert filesystem.pread(fd, size + 10, 0) == bytes(size + 10)

    def test_o_append_writes_go_to_the_end_of_the_file(self, filesystem: AnyFileSystem) -> None:
        """Linux's pwrite appends on an O_APPEND descriptor whatever the offset (pwrite(2),
        BUGS), so the offset given here is ignored."""
        fd = self.create(filesystem, "f", b"0123456789")
        filesystem.close(fd)
        fd = filesystem.open("f", os.O_WRONLY | os.O_APPEND)
        assert filesystem.pwrite(fd, b"abc", 0) == 3
        assert filesystem.pwrite(fd, b"de", 2) == 2
        filesystem.close(fd)
        fd = filesystem.open("f", os.O_RDONLY)
        assert filesystem.pread(fd, 100, 0) == b"0123456789abcde"

    def test_o_creat_on_an_existing_file_keeps_its_data(self, filesystem: AnyFileSystem) -> None:
        data = pattern(filesystem.blocksize + 5, 13)
        filesystem.close(self.create(filesystem, "f", data))
        fd = filesystem.open("f", RDWR_CREAT)
        self.assert_contents(filesystem, fd, data)

    def test_o_creat_with_o_excl_on_an_existing_file_is_eexist(
            self, filesystem: AnyFileSystem) -> None:
        filesystem.close(self.create(filesystem, "f", b"keep"))
        expect_errno(lambda: filesystem.open("f", RDWR_CREAT | os.O_EXCL), errno.EEXIST)
        fd = filesystem.open("f", os.O_RDONLY)
        assert filesystem.pread(fd, 10, 0) == b"keep"

    def test_o_creat_with_o_excl_creates_a_missing_file(self, filesystem: AnyFileSystem) -> None:
        fd = filesystem.open("new", RDWR_CREAT | os.O_EXCL)
        assert filesystem.fstat(fd).st_size == 0
        assert "new" in filesystem.listdir("")

    def test_open_of_a_missing_file_without_o_creat_is_enoent(
            self, filesystem: AnyFileSystem) -> None:
        expect_errno(lambda: filesystem.open("missing", os.O_RDWR), errno.ENOENT)
        assert "missing" not in filesystem.listdir("")

    def test_a_read_only_descriptor_refuses_writes_with_ebadf(
            self, filesystem: AnyFileSystem) -> None:
        filesystem.close(self.create(filesystem, "f", b"keep"))
        fd = filesystem.open("f", os.O_RDONLY)
        expect_errno(lambda: filesystem.pwrite(fd, b"x", 0), errno.EBADF)
        assert filesystem.pread(fd, 10, 0) == b"keep"

    def test_a_write_only_descriptor_refuses_reads_with_ebadf(
            self, filesystem: AnyFileSystem) -> None:
        filesystem.close(self.create(filesystem, "f", b"keep"))
        fd = filesystem.open("f", os.O_WRONLY)
        expect_errno(lambda: filesystem.pread(fd, 10, 0), errno.EBADF)

    def test_ftruncate_of_a_read_only_descriptor_is_refused(
            self, filesystem: AnyFileSystem) -> None:
        """ftruncate(2): EBADF or EINVAL when fd is not open for writing (Linux: EINVAL)."""
        filesystem.close(self.create(filesystem, "f", b"keep"))
        fd = filesystem.open("f", os.O_RDONLY)
        expect_errno(lambda: filesystem.ftruncate(fd, 0), errno.EINVAL, errno.EBADF)
        assert filesystem.fstat(fd).st_size == 4
