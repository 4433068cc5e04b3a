"""Tests of the user's file system through pytest-folio's ``filesystem`` fixture."""

from __future__ import annotations

import errno
import os

import pytest

from pytest_folio.fsx.config import FsxOptions
from pytest_folio.fsx.engine import FsxEngine
from pytest_folio.targets.protocols import FileSystem


def test_the_fixture_hands_out_the_users_fs(filesystem: FileSystem, block_size: int) -> None:
    # block_size: each of --folio-block-sizes (the ini's, or the command line's)
    assert type(filesystem).__name__ == "DictFS"
    assert filesystem.blocksize == block_size


def test_write_read_truncate(filesystem: FileSystem) -> None:
    fd = filesystem.open("f", os.O_RDWR | os.O_CREAT)
    filesystem.pwrite(fd, b"hello", 10)
    assert filesystem.pread(fd, 100, 0) == bytes(10) + b"hello"
    filesystem.ftruncate(fd, 12)
    assert filesystem.fstat(fd).st_size == 12
    assert filesystem.mmap_read(fd, 10, 4086) == b"he" + bytes(4084)   # zeroes past EOF
    with pytest.raises(OSError) as info:
        filesystem.mmap_read(fd, 0, 4097)
    assert info.value.errno == errno.EFAULT


def test_fsx(filesystem: FileSystem) -> None:
    """fsx's random operations; fallocate and copy range are skipped as unsupported."""
    result = FsxEngine(filesystem, FsxOptions(numops=2000, seed=7)).run()
    assert result.skipped > 0
