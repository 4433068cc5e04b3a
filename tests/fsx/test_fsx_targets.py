"""fsx passes on the reference ramfs at 4K..2M block sizes, on tmpfs and (as root) on a
real kernel ramfs; the broken file systems are caught on the reference ramfs too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_folio.fsx.config import FsxOptions
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.targets.directory import DirectoryFS, directory_filesystem
from tests.helpers.fsx_broken import BUGS, PassThrough

BLOCK_SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 2 << 20]
OPS = FsxOptions(numops=1500, seed=21)


@pytest.mark.parametrize("features", ["default", "full"])
@pytest.mark.parametrize("blocksize", BLOCK_SIZES, ids=lambda b: f"{b >> 10}K")
def test_reference_ramfs_passes(blocksize: int, features: str) -> None:
    fs = Ramfs(blocksize=blocksize, features=features)
    result = FsxEngine(fs, OPS).run()
    assert result.testcalls == OPS.numops
    if features == "full":
        assert not result.skipped_unsupported
        assert result.done["punch_hole"] and result.done["zero_range"]
        if blocksize <= 16 << 10:  # collapse/insert need block-aligned room in 256 KiB
            assert result.done["collapse_range"] and result.done["insert_range"]
    else:  # kernel ramfs has no fallocate: skipped and counted
        assert result.skipped_unsupported["fallocate"] > 0
        assert result.done["mapwrite"] and result.done["copy_range"]


@pytest.fixture
def tmpfs() -> Iterator[DirectoryFS]:
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm tmpfs on this machine")
    with directory_filesystem(shm) as fs:
        yield fs


def test_tmpfs_passes(tmpfs: DirectoryFS) -> None:
    result = FsxEngine(tmpfs, FsxOptions(numops=3000, seed=22)).run()
    assert result.testcalls == 3000
    assert result.done["mapread"] and result.done["punch_hole"]


def test_kernel_ramfs_passes(kernel_ramfs: DirectoryFS) -> None:
    result = FsxEngine(kernel_ramfs, FsxOptions(numops=3000, seed=23)).run()
    assert result.testcalls == 3000


@pytest.mark.parametrize("bug", BUGS, ids=[bug.__name__ for bug in BUGS])
def test_bugs_are_caught_on_the_reference_ramfs(bug: type[PassThrough]) -> None:
    with pytest.raises(FsxFailure) as info:
        FsxEngine(bug(Ramfs(features="full")), FsxOptions(seed=1)).run()
    assert info.value.badoff >= 0
