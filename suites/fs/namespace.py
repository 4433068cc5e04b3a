"""The namespace: mkdir, rmdir, unlink, rename and the path walk, with Linux's errnos
(fs/namei.c), in the spirit of pjdfstest. These are where file systems kept as a dict
keyed by path, or as a tree of dicts, go wrong: a directory renamed without its children,
a name created under a missing directory or under a file, a rename onto itself that
deletes the file, a directory moved into itself.

A target without directories says so the protocol's way, a mkdir that raises EOPNOTSUPP:
the tests that need a directory then skip (:meth:`_Base.make_dir`)."""

from __future__ import annotations

import errno
import os
import stat

import pytest

from pytest_folio.suites.fs.base import RDWR_CREAT, _Base, errno_of, expect_errno, name, pattern
from pytest_folio.targets.protocols import AnyFileSystem


class FsNamespace(_Base):
    """Directories and the names in them: what each call must refuse, and what a
    directory rename must carry along."""

    def file(self, fs: AnyFileSystem, path: str, tag: int) -> bytes:
        """A closed new file at ``path`` holding a block and a bit of ``pattern(tag)``."""
        data = pattern(fs.blocksize + 7, tag)
        fs.close(self.create(fs, path, data))
        return data

    def assert_file(self, fs: AnyFileSystem, path: str, expected: bytes) -> None:
        """``path`` opens and holds ``expected``."""
        fd = fs.open(path, os.O_RDONLY)
        try:
            self.assert_contents(fs, fd, expected)
        finally:
            fs.close(fd)

    @staticmethod
    def rename_dir(fs: AnyFileSystem, src: str, dst: str) -> None:
        """rename of a directory, or skip the test: a target whose rename of a directory
        raises EOPNOTSUPP (the protocol's answer for what it does not support) has
        directories but cannot move them."""
        try:
            fs.rename(src, dst)
        except OSError as exc:
            if exc.errno != errno.EOPNOTSUPP:
                raise
            pytest.skip(f"{type(fs).__name__}.rename of a directory raises EOPNOTSUPP: it "
                        "cannot move directories")

    @staticmethod
    def assert_gone(fs: AnyFileSystem, path: str) -> None:
        got = errno_of(lambda: fs.stat(path))
        assert got == errno.ENOENT, f"stat({path!r}) after it went: {name(got)}, not ENOENT"

    # -- what the tests below rely on: stat, one name per directory ------------------------
    def test_stat_of_a_directory_is_s_isdir(self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        mode = filesystem.stat("d").st_mode
        assert stat.S_ISDIR(mode), f"st_mode {mode:#o} is not a directory's"

    def test_stat_of_a_file_is_s_isreg(self, filesystem: AnyFileSystem) -> None:
        self.file(filesystem, "f", 56)
        mode = filesystem.stat("f").st_mode
        assert stat.S_ISREG(mode), f"st_mode {mode:#o} is not a regular file's"

    def test_the_same_name_in_two_directories_names_two_files(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        self.make_dir(filesystem, "e")
        files = {path: self.file(filesystem, path, tag)
                 for tag, path in enumerate(("f", "d/f", "e/f"), 50)}
        for path, data in files.items():
            self.assert_file(filesystem, path, data)
        filesystem.unlink("d/f")
        self.assert_file(filesystem, "f", files["f"])
        self.assert_file(filesystem, "e/f", files["e/f"])

    # -- rename ---------------------------------------------------------------------------
    def test_rename_of_a_file_onto_itself_changes_nothing(
            self, filesystem: AnyFileSystem) -> None:
        data = self.file(filesystem, "a", 30)
        filesystem.rename("a", "a")
        self.assert_file(filesystem, "a", data)
        assert filesystem.listdir("") == ["a"]

    def test_rename_of_a_directory_onto_itself_changes_nothing(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "d/x", 31)
        self.rename_dir(filesystem, "d", "d")
        self.assert_file(filesystem, "d/x", data)
        assert filesystem.listdir("") == ["d"]

    def test_rename_of_a_missing_name_is_enoent_and_leaves_the_target(
            self, filesystem: AnyFileSystem) -> None:
        data = self.file(filesystem, "b", 32)
        expect_errno(lambda: filesystem.rename("a", "b"), errno.ENOENT)
        self.assert_file(filesystem, "b", data)

    def test_rename_into_a_missing_directory_is_enoent_and_keeps_the_source(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "a", 33)
        expect_errno(lambda: filesystem.rename("a", "missing/a"), errno.ENOENT)
        expect_errno(lambda: filesystem.rename("a", "d/missing/a"), errno.ENOENT)
        self.assert_file(filesystem, "a", data)
        assert filesystem.listdir("") == ["a", "d"]

    def test_rename_of_a_file_into_another_directory_moves_it(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "a", 34)
        filesystem.rename("a", "d/b")
        self.assert_file(filesystem, "d/b", data)
        assert filesystem.listdir("") == ["d"]
        assert filesystem.listdir("d") == ["b"]

    def test_a_renamed_directorys_files_open_under_the_new_name(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        self.make_dir(filesystem, "d/sub")
        x = self.file(filesystem, "d/x", 35)
        y = self.file(filesystem, "d/sub/y", 36)
        self.rename_dir(filesystem, "d", "e")
        self.assert_file(filesystem, "e/x", x)
        self.assert_file(filesystem, "e/sub/y", y)
        assert filesystem.listdir("e") == ["sub", "x"]
        assert filesystem.listdir("e/sub") == ["y"]

    def test_a_renamed_directorys_files_are_gone_from_the_old_name(
            self, filesystem: AnyFileSystem) -> None:
        """Also when every name was looked up before (a name cache must forget them)."""
        self.make_dir(filesystem, "d")
        self.make_dir(filesystem, "d/sub")
        self.file(filesystem, "d/x", 37)
        self.file(filesystem, "d/sub/y", 38)
        old = ("d", "d/x", "d/sub", "d/sub/y")
        for path in old:
            filesystem.stat(path)
        self.rename_dir(filesystem, "d", "e")
        for path in old:
            self.assert_gone(filesystem, path)
        expect_errno(lambda: filesystem.open("d/x", os.O_RDONLY), errno.ENOENT)
        assert filesystem.listdir("") == ["e"]

    def test_a_new_directory_under_a_renamed_ones_old_name_is_empty(
            self, filesystem: AnyFileSystem) -> None:
        """Also when the old names were looked up before (a name cache must forget them)."""
        self.make_dir(filesystem, "d")
        self.file(filesystem, "d/x", 57)
        filesystem.stat("d/x")
        self.rename_dir(filesystem, "d", "e")
        self.make_dir(filesystem, "d")
        assert filesystem.listdir("d") == []
        expect_errno(lambda: filesystem.open("d/x", os.O_RDONLY), errno.ENOENT)

    def test_renaming_a_directory_leaves_names_that_only_share_its_prefix(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        self.make_dir(filesystem, "dd")
        data = self.file(filesystem, "dd/x", 58)
        other = self.file(filesystem, "d.txt", 59)
        self.rename_dir(filesystem, "d", "e")
        self.assert_file(filesystem, "dd/x", data)
        self.assert_file(filesystem, "d.txt", other)
        assert filesystem.listdir("") == ["d.txt", "dd", "e"]

    def test_a_directory_can_take_a_name_that_starts_with_its_own(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "d/x", 60)
        self.rename_dir(filesystem, "d", "dd")
        self.assert_file(filesystem, "dd/x", data)
        assert filesystem.listdir("") == ["dd"]

    def test_a_descriptor_opened_before_its_directory_moved_keeps_working(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = pattern(filesystem.blocksize + 11, 39)
        fd = self.create(filesystem, "d/f", data)
        self.rename_dir(filesystem, "d", "e")
        self.assert_contents(filesystem, fd, data)
        filesystem.pwrite(fd, b"tail", len(data))
        filesystem.close(fd)
        self.assert_file(filesystem, "e/f", data + b"tail")

    def test_a_directory_cannot_move_into_its_own_subdirectory(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        self.make_dir(filesystem, "d/sub")
        data = self.file(filesystem, "d/sub/x", 40)
        expect_errno(lambda: self.rename_dir(filesystem, "d", "d/sub/d"), errno.EINVAL)
        expect_errno(lambda: self.rename_dir(filesystem, "d", "d/e"), errno.EINVAL)
        self.assert_file(filesystem, "d/sub/x", data)
        assert filesystem.listdir("") == ["d"]
        assert filesystem.listdir("d") == ["sub"]

    def test_a_directory_cannot_replace_its_own_parent(self, filesystem: AnyFileSystem) -> None:
        """The target is not empty (it holds the source): ENOTEMPTY, or EEXIST as
        rename(2) allows for a non-empty target."""
        self.make_dir(filesystem, "d")
        self.make_dir(filesystem, "d/sub")
        expect_errno(lambda: self.rename_dir(filesystem, "d/sub", "d"),
                     errno.ENOTEMPTY, errno.EEXIST)
        assert filesystem.listdir("d") == ["sub"]

    def test_rename_of_a_file_over_a_directory_is_eisdir(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "a", 41)
        expect_errno(lambda: filesystem.rename("a", "d"), errno.EISDIR)
        self.assert_file(filesystem, "a", data)
        assert stat.S_ISDIR(filesystem.stat("d").st_mode)

    def test_rename_of_a_directory_over_a_file_is_enotdir(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "a", 42)
        expect_errno(lambda: self.rename_dir(filesystem, "d", "a"), errno.ENOTDIR)
        self.assert_file(filesystem, "a", data)
        assert stat.S_ISDIR(filesystem.stat("d").st_mode)

    def test_rename_of_a_directory_over_a_non_empty_directory_is_enotempty(
            self, filesystem: AnyFileSystem) -> None:
        """ENOTEMPTY, or EEXIST as rename(2) allows; both directories keep their files."""
        self.make_dir(filesystem, "d")
        self.make_dir(filesystem, "e")
        x = self.file(filesystem, "d/x", 43)
        y = self.file(filesystem, "e/y", 44)
        expect_errno(lambda: self.rename_dir(filesystem, "d", "e"), errno.ENOTEMPTY, errno.EEXIST)
        self.assert_file(filesystem, "d/x", x)
        self.assert_file(filesystem, "e/y", y)
        assert filesystem.listdir("e") == ["y"]

    def test_rename_of_a_directory_over_an_empty_directory_replaces_it(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        self.make_dir(filesystem, "e")
        x = self.file(filesystem, "d/x", 45)
        self.rename_dir(filesystem, "d", "e")
        self.assert_file(filesystem, "e/x", x)
        assert filesystem.listdir("e") == ["x"]
        assert filesystem.listdir("") == ["e"]

    # -- mkdir and create -------------------------------------------------------------------
    def test_mkdir_of_an_existing_directory_is_eexist(self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "d/x", 46)
        expect_errno(lambda: filesystem.mkdir("d"), errno.EEXIST)
        self.assert_file(filesystem, "d/x", data)

    def test_mkdir_over_a_file_is_eexist(self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "f", 47)
        expect_errno(lambda: filesystem.mkdir("f"), errno.EEXIST)
        self.assert_file(filesystem, "f", data)
        assert stat.S_ISREG(filesystem.stat("f").st_mode)

    def test_mkdir_under_a_missing_directory_is_enoent(self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        expect_errno(lambda: filesystem.mkdir("missing/x"), errno.ENOENT)
        expect_errno(lambda: filesystem.mkdir("d/missing/x"), errno.ENOENT)
        assert filesystem.listdir("") == ["d"]
        assert filesystem.listdir("d") == []

    def test_mkdir_under_a_file_is_enotdir(self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "f", 48)
        expect_errno(lambda: filesystem.mkdir("f/x"), errno.ENOTDIR)
        self.assert_file(filesystem, "f", data)

    def test_creating_a_file_under_a_missing_directory_is_enoent(
            self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        expect_errno(lambda: filesystem.open("missing/f", RDWR_CREAT), errno.ENOENT)
        expect_errno(lambda: filesystem.open("d/missing/f", RDWR_CREAT), errno.ENOENT)
        assert filesystem.listdir("") == ["d"]

    def test_creating_a_file_under_a_file_is_enotdir(self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "f", 49)
        expect_errno(lambda: filesystem.open("f/x", RDWR_CREAT), errno.ENOTDIR)
        self.assert_file(filesystem, "f", data)

    # -- rmdir, unlink, open, listdir ----------------------------------------------------------
    def test_rmdir_of_a_file_is_enotdir(self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "f", 53)
        expect_errno(lambda: filesystem.rmdir("f"), errno.ENOTDIR)
        self.assert_file(filesystem, "f", data)

    def test_rmdir_of_a_missing_name_is_enoent(self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        expect_errno(lambda: filesystem.rmdir("missing"), errno.ENOENT)
        expect_errno(lambda: filesystem.rmdir("d/missing"), errno.ENOENT)
        assert filesystem.listdir("") == ["d"]

    def test_a_removed_directory_is_gone_from_its_parent(
            self, filesystem: AnyFileSystem) -> None:
        """Also when it was looked up before (a name cache must forget it)."""
        self.make_dir(filesystem, "d")
        self.make_dir(filesystem, "d/sub")
        filesystem.stat("d/sub")
        filesystem.rmdir("d/sub")
        assert filesystem.listdir("d") == []
        self.assert_gone(filesystem, "d/sub")
        expect_errno(lambda: filesystem.open("d/sub/f", RDWR_CREAT), errno.ENOENT)

    def test_unlink_of_a_directory_fails_and_keeps_it(self, filesystem: AnyFileSystem) -> None:
        """EISDIR as Linux answers, or EPERM as POSIX says (unlink(2))."""
        self.make_dir(filesystem, "d")
        data = self.file(filesystem, "d/x", 54)
        expect_errno(lambda: filesystem.unlink("d"), errno.EISDIR, errno.EPERM)
        self.assert_file(filesystem, "d/x", data)

    def test_opening_a_directory_for_writing_is_eisdir(self, filesystem: AnyFileSystem) -> None:
        self.make_dir(filesystem, "d")
        expect_errno(lambda: filesystem.open("d", os.O_WRONLY), errno.EISDIR)
        expect_errno(lambda: filesystem.open("d", os.O_RDWR), errno.EISDIR)
        assert stat.S_ISDIR(filesystem.stat("d").st_mode)

    def test_listdir_of_a_file_is_enotdir(self, filesystem: AnyFileSystem) -> None:
        self.file(filesystem, "f", 55)
        expect_errno(lambda: filesystem.listdir("f"), errno.ENOTDIR)
