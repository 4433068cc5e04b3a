"""The directory target: real system calls, probed features, fresh subdirectories."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.targets.capabilities import FS_FEATURES
from pytest_folio.targets.directory import DirectoryFS, directory_filesystem
from pytest_folio.targets.protocols import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
    FileSystem,
)

RW_CREATE = os.O_RDWR | os.O_CREAT

# Where to find tmpfs without mounting one: /dev/shm on any Linux with glibc.
SHM = Path("/dev/shm")


def _dirs() -> list[Path]:
    return [SHM] if SHM.is_dir() and os.access(SHM, os.W_OK) else []


@pytest.fixture(params=["tmp_path", *map(str, _dirs())])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return tmp_path if request.param == "tmp_path" else Path(request.param)


def test_is_a_filesystem(where: Path) -> None:
    with directory_filesystem(where) as fs:
        assert isinstance(fs, FileSystem)
        assert fs.features <= FS_FEATURES
        assert fs.blocksize == os.stat(fs.root).st_blksize


MODE_OF = {
    "punch_hole": FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
    "zero_range": FALLOC_FL_ZERO_RANGE,
    "collapse_range": FALLOC_FL_COLLAPSE_RANGE,
    "insert_range": FALLOC_FL_INSERT_RANGE,
}


def test_probed_features_match_the_calls(where: Path) -> None:
    """Each fallocate mode works exactly when it was detected, else EOPNOTSUPP."""
    with directory_filesystem(where) as fs:
        bs = fs.blocksize
        for feature, mode in MODE_OF.items():
            fd = fs.open(f"f-{feature}", RW_CREATE)
            fs.pwrite(fd, b"x" * 4 * bs, 0)
            if feature in fs.features:
                fs.fallocate(fd, mode, bs, bs)
            else:
                with pytest.raises(OSError) as info:
                    fs.fallocate(fd, mode, bs, bs)
                assert info.value.errno == errno.EOPNOTSUPP, feature
            fs.close(fd)


def test_fallocate_is_not_emulated(tmp_path: Path) -> None:
    """Plain fallocate grows the file; KEEP_SIZE does not, but allocates blocks."""
    with directory_filesystem(tmp_path) as fs:
        if "fallocate" not in fs.features:
            pytest.skip(f"{fs.root} does not support fallocate")
        fd = fs.open("f", RW_CREATE)
        fs.fallocate(fd, 0, 0, 3 * fs.blocksize)
        assert fs.fstat(fd).st_size == 3 * fs.blocksize
        fs.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8 * fs.blocksize)
        st = fs.fstat(fd)
        assert st.st_size == 3 * fs.blocksize
        assert st.st_blocks * 512 >= 8 * fs.blocksize
        assert fs.pread(fd, 3 * fs.blocksize, 0) == bytes(3 * fs.blocksize)


def test_fresh_subdirectory_is_removed(tmp_path: Path) -> None:
    (tmp_path / "theirs").write_text("keep")
    with pytest.raises(RuntimeError), directory_filesystem(tmp_path) as fs:
        root = Path(fs.root)
        assert root.parent == tmp_path and root.name.startswith("pytest-folio-")
        fd = fs.open("a", RW_CREATE)
        fs.mkdir("d")
        fs.pwrite(fd, b"data", 0)
        raise RuntimeError("the test failed")
    assert not root.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs"]
    with pytest.raises(OSError) as info:
        os.fstat(fd)
    assert info.value.errno == errno.EBADF


def test_working_in_the_directory_itself_needs_permission(tmp_path: Path) -> None:
    with directory_filesystem(tmp_path, fresh=False) as fs:
        fs.close(fs.open("mine", RW_CREATE))
    assert (tmp_path / "mine").exists()
    with pytest.raises(PermissionError, match="--folio-allow-destructive"), \
            directory_filesystem(tmp_path, fresh=False):
        pass
    with directory_filesystem(tmp_path, fresh=False, allow_destructive=True) as fs:
        assert fs.listdir("") == ["mine"]
    assert (tmp_path / "mine").exists()


def test_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError), directory_filesystem(tmp_path / "file"):
        pass


def test_foreign_fds_are_ebadf(tmp_path: Path) -> None:
    outside = os.open(tmp_path / "outside", RW_CREATE)
    try:
        fs = DirectoryFS(tmp_path)
        for call in (lambda: fs.pread(outside, 1, 0), lambda: fs.close(outside),
                     lambda: fs.pwrite(outside, b"x", 0), lambda: fs.fstat(outside)):
            with pytest.raises(OSError) as info:
                call()
            assert info.value.errno == errno.EBADF
        assert os.fstat(outside).st_size == 0
    finally:
        os.close(outside)


def test_paths_stay_inside_the_root(tmp_path: Path) -> None:
    fs = DirectoryFS(tmp_path)
    with pytest.raises(PermissionError):
        fs.open("../escape", RW_CREATE)
    assert not (tmp_path.parent / "escape").exists()
    fs.mkdir("d")
    fs.close(fs.open("/d/../f", RW_CREATE))
    assert fs.listdir("/") == ["d", "f"]
    with pytest.raises(NotADirectoryError):
        fs.stat("f/")


def test_mapped_io_never_extends_and_sees_zeroes_past_eof(where: Path) -> None:
    with directory_filesystem(where) as fs:
        fd = fs.open("m", RW_CREATE)
        fs.pwrite(fd, b"a" * 5000, 0)
        fs.mmap_write(fd, 4990, b"b" * 10)
        assert fs.pread(fd, 6000, 0) == b"a" * 4990 + b"b" * 10
        assert fs.mmap_read(fd, 4096, 2 * PAGE_SIZE - 4096) == (
            b"a" * 894 + b"b" * 10 + bytes(2 * PAGE_SIZE - 5000))
        assert fs.fstat(fd).st_size == 5000
        for call in (lambda: fs.mmap_read(fd, 0, 2 * PAGE_SIZE + 1),
                     lambda: fs.mmap_write(fd, 2 * PAGE_SIZE, b"x")):
            with pytest.raises(OSError) as info:
                call()
            assert info.value.errno == errno.EFAULT
        assert fs.fstat(fd).st_size == 5000


def test_copy_file_range_between_files(tmp_path: Path) -> None:
    with directory_filesystem(tmp_path) as fs:
        src, dst = fs.open("s", RW_CREATE), fs.open("d", RW_CREATE)
        fs.pwrite(src, bytes(range(256)) * 64, 0)
        assert fs.copy_file_range(src, dst, 1000, 100, 50) == 1000
        assert fs.pread(dst, 2000, 0) == bytes(50) + (bytes(range(256)) * 64)[100:1100]
