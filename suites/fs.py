"""Linux file semantics beyond fsx, as base classes (xfstests' generic tests and
pjdfstest in spirit): one behaviour per test, on the paths where folio-cached file
systems go wrong. Subclass :class:`FsSuite` (or one of its parts) in a ``test_*.py``
module and provide a ``filesystem`` fixture, or run the ready module
``pytest_folio.suites.test_fs_semantics`` against ``--folio-fs``::

    import pytest
    from pytest_folio.suites.fs import FsSuite

    class TestMyFs(FsSuite):
        large_file = 16 << 20          # bytes; the default is 6 MiB

        @pytest.fixture
        def filesystem(self, tmp_path):
            return MyFs(root=tmp_path)

Optional calls are used only when the target lists them in ``features`` (``mmap``,
``fallocate``, ``punch_hole``, ``zero_range``, ``collapse_range``, ``insert_range``,
``copy_range``); a test that needs a missing one skips and names it. Where Linux
versions give different errnos, the tests accept each one Linux has documented, and say
so. Every file is written with data that has no zero byte, so stale data can never pass
for the zeroes a hole or an extension must read as.
"""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Callable, Iterator
from functools import partial
from typing import ClassVar

import pytest

from pytest_folio.fixtures.fs import REPRODUCE, fs_rerun_command
from pytest_folio.fsx.oracle import (
    BAD_MODES,
    MAXLEN,
    VERSION_DEPENDENT_MODES,
    Mismatch,
    compare,
    fallocate_modes,
    generate,
)
from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.plugin import settings
from pytest_folio.targets.protocols import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
    FileSystem,
)

__all__ = ["FsAccounting", "FsCopyRange", "FsDifferential", "FsFallocate", "FsLargeFiles",
           "FsNames", "FsOpenFlags", "FsPersistence", "FsReadWrite", "FsSuite", "pattern"]

RDWR_CREAT = os.O_RDWR | os.O_CREAT
FALLOC_FL_UNKNOWN = 0x100   # a mode bit no kernel defines


def pattern(n: int, tag: int) -> bytes:
    """``n`` reproducible bytes without a zero byte (``tag`` picks the sequence)."""
    return random.Random(tag).randbytes(n).replace(b"\0", b"\x5a")


def need(fs: FileSystem, *features: str) -> None:
    missing = [f for f in features if f not in fs.features]
    if missing:
        pytest.skip(f"{type(fs).__name__} does not list {', '.join(missing)} in its features")


def errno_of(call: Callable[[], object]) -> int | None:
    """The errno ``call`` fails with, or None when it succeeds."""
    try:
        call()
    except OSError as exc:
        return exc.errno
    return None


def name(code: int | None) -> str:
    return "success" if code is None else errno.errorcode.get(code, str(code))


def expect_errno(call: Callable[[], object], *codes: int) -> None:
    got = errno_of(call)
    assert got in codes, f"expected {' or '.join(map(name, codes))}, got {name(got)}"


class _Base:
    """Helpers shared by the parts of the suite."""

    @pytest.fixture(autouse=True)
    def _reproduce(self, request: pytest.FixtureRequest) -> None:
        """A failure ends with the command that runs the test again."""
        request.node.stash[REPRODUCE] = True

    def create(self, fs: FileSystem, path: str, data: bytes) -> int:
        """A new file holding ``data``, open read-write."""
        fd = fs.open(path, RDWR_CREAT | os.O_TRUNC)
        self.write_all(fs, fd, data, 0)
        return fd

    @staticmethod
    def write_all(fs: FileSystem, fd: int, data: bytes, offset: int,
                  chunk: int = 1 << 20) -> None:
        for start in range(0, len(data), chunk):
            piece = data[start:start + chunk]
            n = fs.pwrite(fd, piece, offset + start)
            assert n == len(piece), f"pwrite at {offset + start} wrote {n} of {len(piece)}"

    @staticmethod
    def read_all(fs: FileSystem, fd: int, chunk: int = 1 << 20) -> bytes:
        """The whole file by fstat's size, in reads of ``chunk``."""
        size = fs.fstat(fd).st_size
        out = bytearray()
        while len(out) < size:
            piece = fs.pread(fd, min(chunk, size - len(out)), len(out))
            assert piece, f"pread at {len(out)} returned nothing before EOF ({size})"
            out += piece
        return bytes(out)

    def reopen(self, fs: FileSystem, fd: int, path: str, flags: int = os.O_RDWR) -> int:
        fs.close(fd)
        return fs.open(path, flags)

    def assert_contents(self, fs: FileSystem, fd: int, expected: bytes | bytearray) -> None:
        got = self.read_all(fs, fd)
        if len(got) != len(expected):
            raise AssertionError(f"the file holds {len(got)} bytes, expected {len(expected)}")
        if got != expected:
            first = next(i for i in range(len(got)) if got[i] != expected[i])
            bs = fs.blocksize
            raise AssertionError(
                f"first bad byte at offset {first:#x} (block {first // bs}, {first % bs:#x} "
                f"into it): {got[first:first + 8].hex()} instead of "
                f"{expected[first:first + 8].hex()}")

    @staticmethod
    def boundaries(fs: FileSystem) -> list[int]:
        """Offsets on and next to the page and block boundaries of the first blocks."""
        bs = fs.blocksize
        points = {1, PAGE_SIZE - 1, PAGE_SIZE, PAGE_SIZE + 1, bs - 1, bs, bs + 1,
                  bs + PAGE_SIZE - 1, 2 * bs - 1, 2 * bs, 2 * bs + 1}
        return sorted(points)


class FsReadWrite(_Base):
    """pread and pwrite around EOF, holes and block boundaries."""

    def test_pread_at_eof_returns_no_bytes(self, filesystem: FileSystem) -> None:
        for size in self.boundaries(filesystem):
            fd = self.create(filesystem, "f", pattern(size, size))
            assert filesystem.pread(fd, 4096, size) == b"", f"file of {size} bytes"
            filesystem.close(fd)

    def test_pread_past_eof_returns_no_bytes(self, filesystem: FileSystem) -> None:
        size = filesystem.blocksize + 100
        fd = self.create(filesystem, "f", pattern(size, 1))
        for offset in (size + 1, size + PAGE_SIZE, 3 * filesystem.blocksize, 1 << 30):
            assert filesystem.pread(fd, 100, offset) == b"", f"pread at {offset}"

    def test_pread_across_eof_returns_the_bytes_up_to_eof(
            self, filesystem: FileSystem) -> None:
        for size in self.boundaries(filesystem):
            data = pattern(size, size)
            fd = self.create(filesystem, "f", data)
            start = max(0, size - 10)
            assert filesystem.pread(fd, 2 * filesystem.blocksize, start) == data[start:], (
                f"file of {size} bytes, pread at {start}")
            filesystem.close(fd)

    def test_pread_before_eof_is_never_short(self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        data = pattern(4 * bs + 123, 2)
        fd = self.create(filesystem, "f", data)
        for offset in (0, 1, PAGE_SIZE - 1, bs - 1, bs + 7):
            n = len(data) - offset - 5
            assert filesystem.pread(fd, n, offset) == data[offset:offset + n], (
                f"pread of {n} at {offset}")

    def test_pread_of_a_hole_reads_zeroes(self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        fd = filesystem.open("f", RDWR_CREAT)
        filesystem.pwrite(fd, b"end", 3 * bs + 5)
        assert filesystem.pread(fd, 3 * bs + 5, 0) == bytes(3 * bs + 5)
        assert filesystem.pread(fd, 10, 3 * bs + 5) == b"end"

    def test_zero_length_pwrite_never_extends_the_file(self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        fd = filesystem.open("f", RDWR_CREAT)
        assert filesystem.pwrite(fd, b"", bs + 3) == 0
        assert filesystem.fstat(fd).st_size == 0
        filesystem.pwrite(fd, b"abc", 0)
        for offset in (3, 4, PAGE_SIZE, bs, 5 * bs + 1):
            assert filesystem.pwrite(fd, b"", offset) == 0
            assert filesystem.fstat(fd).st_size == 3, f"after an empty pwrite at {offset}"
        assert filesystem.pread(fd, 100, 0) == b"abc"

    def test_pwrite_past_eof_fills_the_gap_with_zeroes(self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        for size in (100, PAGE_SIZE - 1, bs + 5):
            fd = self.create(filesystem, "f", pattern(size, 3))
            far = 2 * bs + 7
            filesystem.pwrite(fd, b"xyz", far)
            assert filesystem.fstat(fd).st_size == far + 3
            assert filesystem.pread(fd, far - size, size) == bytes(far - size), (
                f"gap after a file of {size} bytes")
            filesystem.close(fd)

    def test_pwrite_after_truncate_down_leaves_zeroes_in_the_gap(
            self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(3 * bs, 4))
        filesystem.ftruncate(fd, 100)
        filesystem.pwrite(fd, b"xyz", 2 * bs + 3)
        assert filesystem.pread(fd, 2 * bs + 3 - 100, 100) == bytes(2 * bs + 3 - 100)

    def test_writes_across_every_block_boundary_read_back(
            self, filesystem: FileSystem) -> None:
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
            self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        model = bytearray(pattern(2 * bs, 6))
        fd = self.create(filesystem, "f", bytes(model))
        fd = self.reopen(filesystem, fd, "f")
        filesystem.pwrite(fd, b"!" * 10, bs + bs // 2 + 3)
        model[bs + bs // 2 + 3:bs + bs // 2 + 13] = b"!" * 10
        self.assert_contents(filesystem, fd, model)

    def test_pwrite_is_visible_to_mapped_reads(self, filesystem: FileSystem) -> None:
        need(filesystem, "mmap")
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(2 * bs, 7))
        assert filesystem.mmap_read(fd, 0, 2 * bs) == pattern(2 * bs, 7)
        filesystem.pwrite(fd, b"new", bs - 1)
        assert filesystem.mmap_read(fd, bs - 2, 5) == pattern(2 * bs, 7)[bs - 2:bs - 1] + (
            b"new" + pattern(2 * bs, 7)[bs + 2:bs + 3])

    def test_mapped_writes_are_visible_to_pread(self, filesystem: FileSystem) -> None:
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
            self, filesystem: FileSystem) -> None:
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

    def test_o_trunc_empties_an_existing_file(self, filesystem: FileSystem) -> None:
        fd = self.create(filesystem, "f", pattern(2 * filesystem.blocksize + 100, 11))
        filesystem.close(fd)
        fd = filesystem.open("f", os.O_RDWR | os.O_TRUNC)
        assert filesystem.fstat(fd).st_size == 0
        assert filesystem.pread(fd, 100, 0) == b""

    def test_o_trunc_leaves_no_old_data_to_read_after_extending(
            self, filesystem: FileSystem) -> None:
        size = 2 * filesystem.blocksize + 100
        fd = self.create(filesystem, "f", pattern(size, 12))
        filesystem.close(fd)
        fd = filesystem.open("f", os.O_RDWR | os.O_TRUNC)
        filesystem.ftruncate(fd, size)
        assert filesystem.pread(fd, size, 0) == bytes(size)
        filesystem.pwrite(fd, b"x", size + 10)
        assert filesystem.pread(fd, size + 10, 0) == bytes(size + 10)

    def test_o_append_writes_go_to_the_end_of_the_file(self, filesystem: FileSystem) -> None:
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

    def test_o_creat_on_an_existing_file_keeps_its_data(self, filesystem: FileSystem) -> None:
        data = pattern(filesystem.blocksize + 5, 13)
        filesystem.close(self.create(filesystem, "f", data))
        fd = filesystem.open("f", RDWR_CREAT)
        self.assert_contents(filesystem, fd, data)

    def test_o_creat_with_o_excl_on_an_existing_file_is_eexist(
            self, filesystem: FileSystem) -> None:
        filesystem.close(self.create(filesystem, "f", b"keep"))
        expect_errno(lambda: filesystem.open("f", RDWR_CREAT | os.O_EXCL), errno.EEXIST)
        fd = filesystem.open("f", os.O_RDONLY)
        assert filesystem.pread(fd, 10, 0) == b"keep"

    def test_o_creat_with_o_excl_creates_a_missing_file(self, filesystem: FileSystem) -> None:
        fd = filesystem.open("new", RDWR_CREAT | os.O_EXCL)
        assert filesystem.fstat(fd).st_size == 0
        assert "new" in filesystem.listdir("")

    def test_open_of_a_missing_file_without_o_creat_is_enoent(
            self, filesystem: FileSystem) -> None:
        expect_errno(lambda: filesystem.open("missing", os.O_RDWR), errno.ENOENT)
        assert "missing" not in filesystem.listdir("")

    def test_a_read_only_descriptor_refuses_writes_with_ebadf(
            self, filesystem: FileSystem) -> None:
        filesystem.close(self.create(filesystem, "f", b"keep"))
        fd = filesystem.open("f", os.O_RDONLY)
        expect_errno(lambda: filesystem.pwrite(fd, b"x", 0), errno.EBADF)
        assert filesystem.pread(fd, 10, 0) == b"keep"

    def test_a_write_only_descriptor_refuses_reads_with_ebadf(
            self, filesystem: FileSystem) -> None:
        filesystem.close(self.create(filesystem, "f", b"keep"))
        fd = filesystem.open("f", os.O_WRONLY)
        expect_errno(lambda: filesystem.pread(fd, 10, 0), errno.EBADF)

    def test_ftruncate_of_a_read_only_descriptor_is_refused(
            self, filesystem: FileSystem) -> None:
        """ftruncate(2): EBADF or EINVAL when fd is not open for writing (Linux: EINVAL)."""
        filesystem.close(self.create(filesystem, "f", b"keep"))
        fd = filesystem.open("f", os.O_RDONLY)
        expect_errno(lambda: filesystem.ftruncate(fd, 0), errno.EINVAL, errno.EBADF)
        assert filesystem.fstat(fd).st_size == 4


class FsNames(_Base):
    """rename and unlink while files are open or were looked up; directories."""

    def test_rename_over_an_existing_file_replaces_it(self, filesystem: FileSystem) -> None:
        filesystem.close(self.create(filesystem, "a", b"new data"))
        filesystem.close(self.create(filesystem, "b", b"old"))
        filesystem.rename("a", "b")
        fd = filesystem.open("b", os.O_RDONLY)
        assert filesystem.pread(fd, 100, 0) == b"new data"
        assert filesystem.fstat(fd).st_size == 8

    def test_rename_over_a_looked_up_open_file_then_open_finds_the_new_file(
            self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        new, old = pattern(bs + 3, 14), pattern(2 * bs, 15)
        filesystem.close(self.create(filesystem, "a", new))
        held = self.create(filesystem, "b", old)
        assert filesystem.stat("b").st_size == len(old)     # looked up by name
        filesystem.rename("a", "b")
        fd = filesystem.open("b", os.O_RDONLY)
        self.assert_contents(filesystem, fd, new)
        assert filesystem.stat("b").st_size == len(new)
        self.assert_contents(filesystem, held, old)

    def test_rename_over_an_open_file_keeps_its_descriptor_on_the_old_data(
            self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        old = pattern(2 * bs + 1, 16)
        filesystem.close(self.create(filesystem, "a", b"replacement"))
        held = self.create(filesystem, "b", old)
        filesystem.rename("a", "b")
        self.assert_contents(filesystem, held, old)
        filesystem.pwrite(held, b"more", len(old))
        assert filesystem.fstat(held).st_size == len(old) + 4
        fd = filesystem.open("b", os.O_RDONLY)
        assert filesystem.pread(fd, 100, 0) == b"replacement"

    def test_rename_keeps_the_sources_descriptor_working(
            self, filesystem: FileSystem) -> None:
        fd = self.create(filesystem, "a", b"before")
        filesystem.rename("a", "c")
        filesystem.pwrite(fd, b" after", 6)
        other = filesystem.open("c", os.O_RDONLY)
        assert filesystem.pread(other, 100, 0) == b"before after"

    def test_the_old_name_is_gone_after_rename(self, filesystem: FileSystem) -> None:
        filesystem.close(self.create(filesystem, "a", b"x"))
        filesystem.stat("a")
        filesystem.rename("a", "c")
        expect_errno(lambda: filesystem.stat("a"), errno.ENOENT)
        expect_errno(lambda: filesystem.open("a", os.O_RDONLY), errno.ENOENT)
        assert filesystem.listdir("") == ["c"]

    def test_an_unlinked_open_file_keeps_its_data(self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        data = pattern(3 * bs + 17, 17)
        fd = self.create(filesystem, "f", data)
        filesystem.unlink("f")
        self.assert_contents(filesystem, fd, data)

    def test_an_unlinked_open_file_can_still_be_written_and_read(
            self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        model = bytearray(pattern(bs, 18))
        fd = self.create(filesystem, "f", bytes(model))
        filesystem.unlink("f")
        more = pattern(2 * bs, 19)
        filesystem.pwrite(fd, more, bs - 3)
        model[bs - 3:] = more
        filesystem.fsync(fd)
        self.assert_contents(filesystem, fd, model)

    def test_an_unlinked_name_is_enoent(self, filesystem: FileSystem) -> None:
        fd = self.create(filesystem, "f", b"x")
        filesystem.stat("f")
        filesystem.unlink("f")
        expect_errno(lambda: filesystem.stat("f"), errno.ENOENT)
        expect_errno(lambda: filesystem.open("f", os.O_RDONLY), errno.ENOENT)
        expect_errno(lambda: filesystem.unlink("f"), errno.ENOENT)
        assert "f" not in filesystem.listdir("")
        filesystem.close(fd)

    def test_a_new_file_under_an_unlinked_name_is_a_separate_empty_file(
            self, filesystem: FileSystem) -> None:
        old = pattern(filesystem.blocksize + 9, 20)
        held = self.create(filesystem, "f", old)
        filesystem.unlink("f")
        fd = filesystem.open("f", RDWR_CREAT)
        assert filesystem.fstat(fd).st_size == 0
        assert filesystem.pread(fd, 100, 0) == b""
        filesystem.pwrite(fd, b"fresh", 0)
        self.assert_contents(filesystem, held, old)

    def test_listdir_shows_created_names_and_not_removed_ones(
            self, filesystem: FileSystem) -> None:
        filesystem.mkdir("d")
        for leaf in ("x", "y", "z"):
            filesystem.close(self.create(filesystem, f"d/{leaf}", b"1"))
        filesystem.unlink("d/x")
        filesystem.rename("d/y", "d/w")
        assert filesystem.listdir("d") == ["w", "z"]

    def test_rmdir_of_a_non_empty_directory_is_enotempty(
            self, filesystem: FileSystem) -> None:
        filesystem.mkdir("d")
        filesystem.close(self.create(filesystem, "d/x", b"1"))
        expect_errno(lambda: filesystem.rmdir("d"), errno.ENOTEMPTY, errno.EEXIST)
        filesystem.unlink("d/x")
        filesystem.rmdir("d")
        expect_errno(lambda: filesystem.stat("d"), errno.ENOENT)


class FsCopyRange(_Base):
    """copy_file_range at and past the source EOF, within one file, of zero bytes."""

    def copy_all(self, fs: FileSystem, src: int, dst: int, count: int, off_in: int,
                 off_out: int) -> int:
        """Copy until ``count`` bytes are done or the call copies nothing."""
        done = 0
        while done < count:
            n = fs.copy_file_range(src, dst, count - done, off_in + done, off_out + done)
            if n == 0:
                break
            done += n
        return done

    def test_copy_file_range_past_the_source_eof_copies_nothing(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "copy_range")
        src = self.create(filesystem, "a", pattern(1000, 21))
        dst = self.create(filesystem, "b", b"dst")
        assert filesystem.copy_file_range(src, dst, 100, 1000, 0) == 0
        assert filesystem.copy_file_range(src, dst, 100, 5000, 3) == 0
        assert filesystem.fstat(dst).st_size == 3
        assert filesystem.pread(dst, 10, 0) == b"dst"

    def test_copy_file_range_across_the_source_eof_copies_up_to_eof(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "copy_range")
        bs = filesystem.blocksize
        data = pattern(bs + 100, 22)
        src = self.create(filesystem, "a", data)
        dst = filesystem.open("b", RDWR_CREAT)
        n = self.copy_all(filesystem, src, dst, 3 * bs, bs - 50, 0)
        assert n == 150
        self.assert_contents(filesystem, dst, data[bs - 50:])

    def test_copy_file_range_of_overlapping_ranges_in_one_file_is_einval(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "copy_range")
        bs = filesystem.blocksize
        data = pattern(3 * bs, 23)
        fd = self.create(filesystem, "a", data)
        expect_errno(lambda: filesystem.copy_file_range(fd, fd, bs, 0, bs // 2), errno.EINVAL)
        expect_errno(lambda: filesystem.copy_file_range(fd, fd, bs, bs, bs - 1),
                     errno.EINVAL)
        self.assert_contents(filesystem, fd, data)

    def test_copy_file_range_between_ranges_of_one_file_copies(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "copy_range")
        bs = filesystem.blocksize
        model = bytearray(pattern(3 * bs, 24))
        fd = self.create(filesystem, "a", bytes(model))
        assert self.copy_all(filesystem, fd, fd, bs + 7, 3, 2 * bs - 5) == bs + 7
        model[2 * bs - 5:3 * bs + 2] = model[3:bs + 10]
        assert self.copy_all(filesystem, fd, fd, bs, bs, 0) == bs    # touching, not overlapping
        model[0:bs] = model[bs:2 * bs]
        self.assert_contents(filesystem, fd, model)

    def test_copy_file_range_of_zero_bytes_changes_nothing(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "copy_range")
        src = self.create(filesystem, "a", pattern(1000, 25))
        dst = self.create(filesystem, "b", b"dst")
        assert filesystem.copy_file_range(src, dst, 0, 0, 0) == 0
        assert filesystem.copy_file_range(src, dst, 0, 10, 5000) == 0
        assert filesystem.fstat(dst).st_size == 3
        assert filesystem.pread(dst, 10, 0) == b"dst"

    def test_copy_file_range_past_the_destination_eof_zero_fills_the_gap(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "copy_range")
        bs = filesystem.blocksize
        data = pattern(2 * bs + 3, 26)
        src = self.create(filesystem, "a", data)
        dst = self.create(filesystem, "b", b"dst")
        far = bs + PAGE_SIZE + 1
        assert self.copy_all(filesystem, src, dst, len(data), 0, far) == len(data)
        self.assert_contents(filesystem, dst, b"dst" + bytes(far - 3) + data)

    def test_copied_data_is_intact_after_close_and_reopen(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "copy_range")
        bs = filesystem.blocksize
        data = pattern(3 * bs + 5, 27)
        src = self.create(filesystem, "a", data)
        dst = filesystem.open("b", RDWR_CREAT)
        assert self.copy_all(filesystem, src, dst, len(data) - 1, 1, PAGE_SIZE - 1) == (
            len(data) - 1)
        dst = self.reopen(filesystem, dst, "b", os.O_RDONLY)
        self.assert_contents(filesystem, dst, bytes(PAGE_SIZE - 1) + data[1:])


class FsFallocate(_Base):
    """fallocate's argument and mode errors, and what each mode does to data and size."""

    def test_fallocate_of_zero_length_is_einval(self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate")
        fd = self.create(filesystem, "f", b"x")
        expect_errno(lambda: filesystem.fallocate(fd, 0, 0, 0), errno.EINVAL)
        expect_errno(lambda: filesystem.fallocate(fd, 0, 5000, 0), errno.EINVAL)
        assert filesystem.fstat(fd).st_size == 1

    def test_fallocate_at_a_negative_offset_or_length_is_einval(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate")
        fd = self.create(filesystem, "f", b"x")
        expect_errno(lambda: filesystem.fallocate(fd, 0, -1, 4096), errno.EINVAL)
        expect_errno(lambda: filesystem.fallocate(fd, 0, 0, -4096), errno.EINVAL)

    def test_punch_hole_without_keep_size_is_eopnotsupp(self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate")
        fd = self.create(filesystem, "f", pattern(8192, 28))
        expect_errno(lambda: filesystem.fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096),
                     errno.EOPNOTSUPP)
        assert filesystem.pread(fd, 8192, 0) == pattern(8192, 28)

    def test_punch_hole_together_with_zero_range_is_eopnotsupp(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate")
        fd = self.create(filesystem, "f", pattern(8192, 29))
        mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE
        expect_errno(lambda: filesystem.fallocate(fd, mode, 0, 4096), errno.EOPNOTSUPP)
        assert filesystem.pread(fd, 8192, 0) == pattern(8192, 29)

    def test_collapse_or_insert_range_with_keep_size_is_refused(
            self, filesystem: FileSystem) -> None:
        """vfs_fallocate: EINVAL before Linux 6.13's rework of its mode checks,
        EOPNOTSUPP since; both are accepted."""
        need(filesystem, "fallocate")
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(4 * bs, 30))
        for mode in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE):
            expect_errno(partial(filesystem.fallocate, fd, mode | FALLOC_FL_KEEP_SIZE, bs, bs),
                         errno.EINVAL, errno.EOPNOTSUPP)
        assert filesystem.fstat(fd).st_size == 4 * bs

    def test_an_unknown_fallocate_mode_bit_is_eopnotsupp(self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate")
        fd = self.create(filesystem, "f", b"x")
        expect_errno(lambda: filesystem.fallocate(fd, FALLOC_FL_UNKNOWN, 0, 4096),
                     errno.EOPNOTSUPP)
        assert filesystem.fstat(fd).st_size == 1

    def test_fallocate_on_a_read_only_descriptor_is_ebadf(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate")
        filesystem.close(self.create(filesystem, "f", b"x"))
        fd = filesystem.open("f", os.O_RDONLY)
        expect_errno(lambda: filesystem.fallocate(fd, 0, 0, 4096), errno.EBADF)
        assert filesystem.fstat(fd).st_size == 1

    def test_fallocate_past_eof_extends_the_file_with_zeroes(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate")
        bs = filesystem.blocksize
        data = pattern(bs + 10, 31)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, 0, bs - 1, 2 * bs)
        self.assert_contents(filesystem, fd, data + bytes(3 * bs - 1 - len(data)))

    def test_fallocate_with_keep_size_leaves_the_size_and_the_data(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate")
        bs = filesystem.blocksize
        data = pattern(bs + 10, 32)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4 * bs)
        self.assert_contents(filesystem, fd, data)
        filesystem.ftruncate(fd, 3 * bs)
        self.assert_contents(filesystem, fd, data + bytes(3 * bs - len(data)))

    def test_punch_hole_zeroes_the_range_and_keeps_the_size(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate", "punch_hole")
        bs = filesystem.blocksize
        model = bytearray(pattern(4 * bs, 33))
        fd = self.create(filesystem, "f", bytes(model))
        for offset, length in ((PAGE_SIZE - 3, 2 * bs), (3 * bs + 1, 10)):
            filesystem.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                                 length)
            model[offset:offset + length] = bytes(length)
        self.assert_contents(filesystem, fd, model)

    def test_punch_hole_past_eof_changes_nothing(self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate", "punch_hole")
        bs = filesystem.blocksize
        data = pattern(bs + 3, 34)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, bs + 3, 2 * bs)
        self.assert_contents(filesystem, fd, data)

    def test_zero_range_zeroes_the_range_and_extends_the_file(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate", "zero_range")
        bs = filesystem.blocksize
        data = pattern(2 * bs, 35)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_ZERO_RANGE, bs + 1, 2 * bs)
        self.assert_contents(filesystem, fd, data[:bs + 1] + bytes(2 * bs))

    def test_zero_range_inside_the_file_zeroes_exactly_the_range(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate", "zero_range")
        bs = filesystem.blocksize
        model = bytearray(pattern(3 * bs, 61))
        fd = self.create(filesystem, "f", bytes(model))
        for offset, length in ((PAGE_SIZE - 3, bs + 8), (2 * bs + 1, 10)):
            filesystem.fallocate(fd, FALLOC_FL_ZERO_RANGE, offset, length)
            model[offset:offset + length] = bytes(length)
        self.assert_contents(filesystem, fd, model)

    def test_zero_range_with_keep_size_never_extends_the_file(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate", "zero_range")
        bs = filesystem.blocksize
        data = pattern(2 * bs, 36)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, bs + 1, 2 * bs)
        self.assert_contents(filesystem, fd, data[:bs + 1] + bytes(bs - 1))

    def test_collapse_range_not_aligned_to_the_block_size_is_einval(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate", "collapse_range")
        bs = filesystem.blocksize
        data = pattern(6 * bs, 37)
        fd = self.create(filesystem, "f", data)
        for offset, length in ((bs // 2, bs), (bs, bs // 2), (bs + 512, bs)):
            expect_errno(partial(filesystem.fallocate, fd, FALLOC_FL_COLLAPSE_RANGE, offset,
                                 length), errno.EINVAL)
        self.assert_contents(filesystem, fd, data)

    def test_collapse_range_reaching_eof_is_einval(self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate", "collapse_range")
        bs = filesystem.blocksize
        data = pattern(4 * bs, 38)
        fd = self.create(filesystem, "f", data)
        expect_errno(lambda: filesystem.fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 2 * bs,
                                                  2 * bs), errno.EINVAL)
        expect_errno(lambda: filesystem.fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 3 * bs,
                                                  2 * bs), errno.EINVAL)
        self.assert_contents(filesystem, fd, data)

    def test_collapse_range_removes_the_range(self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate", "collapse_range")
        bs = filesystem.blocksize
        data = pattern(5 * bs + 7, 39)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, bs, 2 * bs)
        self.assert_contents(filesystem, fd, data[:bs] + data[3 * bs:])

    def test_insert_range_not_aligned_or_at_eof_is_einval(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate", "insert_range")
        bs = filesystem.blocksize
        data = pattern(3 * bs, 40)
        fd = self.create(filesystem, "f", data)
        for offset, length in ((bs // 2, bs), (bs, bs // 2), (3 * bs, bs), (4 * bs, bs)):
            expect_errno(partial(filesystem.fallocate, fd, FALLOC_FL_INSERT_RANGE, offset,
                                 length), errno.EINVAL)
        self.assert_contents(filesystem, fd, data)

    def test_insert_range_shifts_the_data_up_behind_a_hole(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate", "insert_range")
        bs = filesystem.blocksize
        data = pattern(3 * bs + 7, 41)
        fd = self.create(filesystem, "f", data)
        filesystem.fallocate(fd, FALLOC_FL_INSERT_RANGE, bs, bs)
        self.assert_contents(filesystem, fd, data[:bs] + bytes(bs) + data[bs:])


class FsAccounting(_Base):
    """st_size and st_blocks after every kind of operation."""

    def blocks(self, fs: FileSystem, fd: int) -> int:
        return int(fs.fstat(fd).st_blocks)

    def test_st_blksize_is_the_block_size(self, filesystem: FileSystem) -> None:
        fd = filesystem.open("f", RDWR_CREAT)
        assert filesystem.fstat(fd).st_blksize == filesystem.blocksize

    def test_stat_and_fstat_agree_on_the_size_after_every_operation(
            self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        fd = filesystem.open("f", RDWR_CREAT)
        steps: list[tuple[str, Callable[[], object], int]] = [
            ("write", lambda: filesystem.pwrite(fd, pattern(bs + 3, 42), 0), bs + 3),
            ("write past EOF", lambda: filesystem.pwrite(fd, b"x", 2 * bs), 2 * bs + 1),
            ("empty write", lambda: filesystem.pwrite(fd, b"", 5 * bs), 2 * bs + 1),
            ("truncate down", lambda: filesystem.ftruncate(fd, PAGE_SIZE + 1), PAGE_SIZE + 1),
            ("truncate up", lambda: filesystem.ftruncate(fd, 3 * bs - 1), 3 * bs - 1),
            ("fsync", lambda: filesystem.fsync(fd), 3 * bs - 1)]
        if "mmap" in filesystem.features:
            steps.append(("mapped write", lambda: filesystem.mmap_write(fd, 10, b"m" * 100),
                          3 * bs - 1))
        if "fallocate" in filesystem.features:
            steps += [("fallocate keep size", lambda: filesystem.fallocate(
                fd, FALLOC_FL_KEEP_SIZE, 0, 5 * bs), 3 * bs - 1),
                ("fallocate", lambda: filesystem.fallocate(fd, 0, 3 * bs, bs), 4 * bs)]
        if "copy_range" in filesystem.features:
            steps.append(("copy", lambda: filesystem.copy_file_range(fd, fd, 10, 0, 5 * bs),
                          5 * bs + 10))
        for what, step, size in steps:
            step()
            assert (filesystem.fstat(fd).st_size, filesystem.stat("f").st_size) == (
                size, size), f"after {what}"

    def test_st_blocks_cover_the_written_data(self, filesystem: FileSystem) -> None:
        """st_blocks counts 512-byte units: at least the data written, and not
        more than a generous multiple of it."""
        bs = filesystem.blocksize
        size = 3 * bs + 100
        fd = self.create(filesystem, "f", pattern(size, 43))
        for when in ("before fsync", "after fsync"):
            used = self.blocks(filesystem, fd) * 512
            assert size <= used <= 4 * (size + bs) + (4 << 20), (
                f"st_blocks {used // 512} {when} for {size} bytes")
            filesystem.fsync(fd)

    def test_st_blocks_drop_to_zero_after_truncate_to_zero(
            self, filesystem: FileSystem) -> None:
        fd = self.create(filesystem, "f", pattern(3 * filesystem.blocksize, 44))
        filesystem.fsync(fd)
        filesystem.ftruncate(fd, 0)
        assert self.blocks(filesystem, fd) == 0

    def test_st_blocks_shrink_after_truncate_down(self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(8 * bs, 45))
        filesystem.fsync(fd)
        before = self.blocks(filesystem, fd)
        filesystem.ftruncate(fd, bs + 1)
        assert self.blocks(filesystem, fd) <= before // 2, f"{before} before"

    def test_st_blocks_grow_with_fallocate_keep_size(self, filesystem: FileSystem) -> None:
        need(filesystem, "fallocate")
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(100, 46))
        before = self.blocks(filesystem, fd)
        filesystem.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4 * bs)
        assert self.blocks(filesystem, fd) >= before + 3 * bs // 512
        assert filesystem.fstat(fd).st_size == 100

    def test_st_blocks_shrink_after_punching_whole_blocks(
            self, filesystem: FileSystem) -> None:
        need(filesystem, "punch_hole")
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(8 * bs, 47))
        filesystem.fsync(fd)
        before = self.blocks(filesystem, fd)
        filesystem.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * bs, 4 * bs)
        assert self.blocks(filesystem, fd) <= before - 4 * bs // 512, f"{before} before"


class FsPersistence(_Base):
    """Data intact across close and reopen, fsync, and truncate down then up."""

    def test_data_is_intact_after_close_and_reopen(self, filesystem: FileSystem) -> None:
        bs = filesystem.blocksize
        model = bytearray(pattern(3 * bs + 11, 48))
        fd = self.create(filesystem, "f", bytes(model))
        filesystem.pwrite(fd, b"patch", bs - 2)
        model[bs - 2:bs + 3] = b"patch"
        fd = self.reopen(filesystem, fd, "f", os.O_RDONLY)
        self.assert_contents(filesystem, fd, model)

    def test_data_is_intact_after_fsync_close_and_reopen(
            self, filesystem: FileSystem) -> None:
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
            self, filesystem: FileSystem) -> None:
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
            self, filesystem: FileSystem) -> None:
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
            self, filesystem: FileSystem) -> None:
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

    def write_large(self, fs: FileSystem, path: str, data: bytes) -> int:
        fd = fs.open(path, RDWR_CREAT | os.O_TRUNC)
        for start, n in self.chunks(len(data)):
            assert fs.pwrite(fd, data[start:start + n], start) == n
        return fd

    def test_a_file_larger_than_any_cache_reads_back_after_fsync_and_reopen(
            self, filesystem: FileSystem) -> None:
        data = pattern(self.large_file + 123, 53)
        fd = self.write_large(filesystem, "big", data)
        filesystem.fsync(fd)
        fd = self.reopen(filesystem, fd, "big", os.O_RDONLY)
        self.assert_contents(filesystem, fd, data)

    def test_two_large_files_written_in_turns_keep_their_own_data(
            self, filesystem: FileSystem) -> None:
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
            self, filesystem: FileSystem) -> None:
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
            self, filesystem: FileSystem) -> None:
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
            self, filesystem: FileSystem) -> None:
        data = pattern(self.large_file, 60)
        fd = self.write_large(filesystem, "big", data)
        filesystem.fsync(fd)
        cut = self.large_file // 2 + PAGE_SIZE + 123
        filesystem.ftruncate(fd, cut)
        filesystem.ftruncate(fd, self.large_file)
        fd = self.reopen(filesystem, fd, "big", os.O_RDONLY)
        self.assert_contents(filesystem, fd, data[:cut] + bytes(self.large_file - cut))


class FsDifferential(_Base):
    """Differential mode (``--folio-fs-oracle``): one random sequence of
    ``--folio-fsx-ops`` operations from the run's seed on the target and on the oracle,
    every return value, errno, size and byte compared (:mod:`pytest_folio.fsx.oracle`).
    The first difference is one line: the operation, both sides' outcomes, and the
    command that replays it."""

    def test_the_target_matches_the_oracle(self, filesystem: FileSystem,
                                           fs_oracle: FileSystem,
                                           request: pytest.FixtureRequest) -> None:
        folio = settings(request.config)
        modes = fallocate_modes(filesystem, fs_oracle, [
            m for m in BAD_MODES if m not in VERSION_DEPENDENT_MODES])
        ops = generate(folio.fsx_seed, modes, folio.fsx_ops,
                       maxlen=max(MAXLEN, 3 * filesystem.blocksize))
        try:
            compare(filesystem, fs_oracle, ops)
        except Mismatch as exc:
            found = exc
        else:
            return
        request.node.add_report_section("call", "differential", "\n".join(found.log[-25:]))
        request.node.stash[REPRODUCE] = False     # the message says it already
        pytest.fail(f"differential: {found}; replay: {fs_rerun_command(request.node)}",
                    pytrace=False)


class FsSuite(FsLargeFiles, FsPersistence, FsAccounting, FsFallocate, FsCopyRange, FsNames,
              FsOpenFlags, FsReadWrite):
    """Every part above: the ready module's class. (pytest collects the bases last to
    first: the small, specific tests run first and the large files last.)"""
