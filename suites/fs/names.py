"""Names: rename and unlink of open files, directories."""

from __future__ import annotations

import errno
import os

from pytest_folio.suites.fs.base import RDWR_CREAT, _Base, expect_errno, pattern
from pytest_folio.targets.protocols import AnyFileSystem


class FsNames(_Base):
    """rename and unlink while files are open or were looked up; directories."""

    def test_rename_over_an_existing_file_replaces_it(self, filesystem: AnyFileSystem) -> None:
        filesystem.close(self.create(filesystem, "a", b"new data"))
        filesystem.close(self.create(filesystem, "b", b"old"))
        filesystem.rename("a", "b")
        fd = filesystem.open("b", os.O_RDONLY)
        assert filesystem.pread(fd, 100, 0) == b"new data"
        assert filesystem.fstat(fd).st_size == 8

    def test_rename_over_a_looked_up_open_file_then_open_finds_the_new_file(
            self, filesystem: AnyFileSystem) -> None:
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
            self, filesystem: AnyFileSystem) -> None:
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
            self, filesystem: AnyFileSystem) -> None:
        fd = self.create(filesystem, "a", b"before")
        filesystem.rename("a", "c")
        filesystem.pwrite(fd, b" after", 6)
        other = filesystem.open("c", os.O_RDONLY)
        assert filesystem.pread(other, 100, 0) == b"before after"

    def test_the_old_name_is_gone_after_rename(self, filesystem: AnyFileSystem) -> None:
        filesystem.close(self.create(filesystem, "a", b"x"))
        filesystem.stat("a")
        filesystem.rename("a", "c")
        expect_errno(lambda: filesystem.stat("a"), errno.ENOENT)
        expect_errno(lambda: filesystem.open("a", os.O_RDONLY), errno.ENOENT)
        assert filesystem.listdir("") == ["c"]

    def test_an_unlinked_open_file_keeps_its_data(self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        data = pattern(3 * bs + 17, 17)
        fd = self.create(filesystem, "f", data)
        filesystem.unlink("f")
        self.assert_contents(filesystem, fd, data)

    def test_an_unlinked_open_file_can_still_be_written_and_read(
            self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        model = bytearray(pattern(bs, 18))
        fd = self.create(filesystem, "f", bytes(model))
        filesystem.unlink("f")
        more = pattern(2 * bs, 19)
        filesystem.pwrite(fd, more, bs - 3)
        model[bs - 3:] = more
        filesystem.fsync(fd)
        self.assert_contents(filesystem, fd, model)

    def test_an_unlinked_name_is_enoent(self, filesystem: AnyFileSystem) -> None:
        fd = self.create(filesystem, "f", b"x")
        filesystem.stat("f")
        filesystem.unlink("f")
        expect_errno(lambda: filesystem.stat("f"), errno.ENOENT)
        expect_errno(lambda: filesystem.open("f", os.O_RDONLY), errno.ENOENT)
        expect_errno(lambda: filesystem.unlink("f"), errno.ENOENT)
        assert "f" not in filesystem.listdir("")
        filesystem.close(fd)

    def test_a_new_file_under_an_unlinked_name_is_a_separate_empty_file(
            self, filesystem: AnyFileSystem) -> None:
        old = pattern(filesystem.blocksize + 9, 20)
        held = self.create(filesystem, "f", old)
        filesystem.unlink("f")
        fd = filesystem.open("f", RDWR_CREAT)
        assert filesystem.fstat(fd).st_size == 0
        assert filesystem.pread(fd, 100, 0) == b""
        filesystem.pwrite(fd, b"fresh", 0)
        self.assert_contents(filesystem, held, old)

    def test_listdir_shows_created_names_and_not_removed_ones(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        for leaf in ("x", "y", "z"):
            filesystem.close(self.create(filesystem, f"d/{leaf}", b"1"))
        filesystem.unlink("d/x")
        filesystem.rename("d/y", "d/w")
        assert filesystem.listdir("d") == ["w", "z"]

    def test_rmdir_of_a_non_empty_directory_is_enotempty(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        filesystem.close(self.create(filesystem, "d/x", b"1"))
        expect_errno(lambda: filesystem.rmdir("d"), errno.ENOTEMPTY, errno.EEXIST)
        filesystem.unlink("d/x")
        filesystem.rmdir("d")
        expect_errno(lambda: filesystem.stat("d"), errno.ENOENT)
