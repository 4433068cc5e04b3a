"""The FileSystem protocol: a small core, optional calls as capabilities, one way to say
"not supported" (leave the calls out, or inherit FileSystemBase's defaults)."""

from __future__ import annotations

import errno
import os

import pytest

from pytest_folio.model.ramfs import Ramfs
from pytest_folio.targets.capabilities import features_of, supports
from pytest_folio.targets.protocols import (
    CopyFileRange,
    Directories,
    Fallocate,
    FileSystem,
    FileSystemBase,
    MappedIO,
    missing_members,
)


class Core:
    """The core calls only, doing nothing: enough for the protocol checks."""

    blocksize = 4096

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return 3

    def close(self, fd: int) -> None: ...
    def pread(self, fd: int, n: int, offset: int) -> bytes:
        return b""

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return len(data)

    def ftruncate(self, fd: int, length: int) -> None: ...
    def fstat(self, fd: int) -> os.stat_result:
        return os.stat_result((0,) * 10)

    def fsync(self, fd: int) -> None: ...
    def unlink(self, path: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def listdir(self, path: str) -> list[str]:
        return []

    def stat(self, path: str) -> os.stat_result:
        return os.stat_result((0,) * 10)


class Mapped(Core):
    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        return b""

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None: ...


class FromBase(FileSystemBase, Core):
    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None: ...


def test_the_core_alone_is_a_file_system_with_no_features() -> None:
    fs = Core()
    assert isinstance(fs, FileSystem) and missing_members(fs, FileSystem) == []
    assert features_of(fs) == frozenset()
    assert not any(supports(fs, c) for c in (MappedIO, Fallocate, CopyFileRange, Directories))


def test_a_capability_is_having_its_calls() -> None:
    assert supports(Mapped(), MappedIO)
    assert features_of(Mapped()) == {"mmap"}


def test_the_base_class_defaults_count_as_left_out() -> None:
    fs = FromBase()
    assert not supports(fs, MappedIO) and not supports(fs, Directories)
    assert supports(fs, Fallocate)
    assert features_of(fs) == {"fallocate", "punch_hole", "zero_range", "collapse_range",
                               "insert_range"}
    with pytest.raises(OSError) as info:
        fs.mkdir("d")
    assert info.value.errno == errno.EOPNOTSUPP


def test_features_narrow_what_the_calls_give() -> None:
    fs = FromBase()
    fs.features = frozenset({"fallocate", "punch_hole", "mmap"})  # type: ignore[attr-defined]
    assert features_of(fs) == {"fallocate", "punch_hole"}      # no mmap calls: not used


def test_only_missing_core_calls_are_named() -> None:
    class NoRename:
        blocksize = 4096

    for name in ("open", "close", "pread", "pwrite", "ftruncate", "fstat", "fsync",
                 "unlink", "listdir", "stat"):
        setattr(NoRename, name, getattr(Core, name))
    assert not isinstance(NoRename(), FileSystem)
    assert missing_members(NoRename(), FileSystem) == ["rename"]


@pytest.mark.parametrize(("features", "expected"), [
    ("default", {"mmap", "copy_range", "directories"}),
    ("full", {"mmap", "copy_range", "directories", "fallocate", "punch_hole", "zero_range",
              "collapse_range", "insert_range"})])
def test_the_reference_ramfs_features_come_out_as_declared(features: str,
                                                            expected: set[str]) -> None:
    fs = Ramfs(blocksize=4096, features=features, memory=8 << 20)
    try:
        assert features_of(fs) == expected
    finally:
        fs.umount()
        fs.memory.release()
