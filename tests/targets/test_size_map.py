"""The per-size targets the VM passes its guest: ``--folio-mtd=4K=/dev/mtd0,16K=...`` (a
kernel device per folio order) and ``--folio-fs=4K=DIR,16K=DIR`` (a file system per
block size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_folio.targets.fs import resolve_fs_target
from pytest_folio.targets.mtd import MTDTarget, resolve_mtd_target
from pytest_folio.targets.spec import TargetError, TargetSpec, parse_size_map


def test_size_map_parses_sizes_and_paths() -> None:
    assert parse_size_map("4K=/dev/mtd0,16K=/dev/mtd1", "--x") == {
        4096: Path("/dev/mtd0"), 16384: Path("/dev/mtd1")}
    assert parse_size_map("/dev/mtd0", "--x") is None
    assert parse_size_map("reference:api=page", "--x") is None


@pytest.mark.parametrize(("text", "message"), [
    ("4K=/dev/mtd0,4K=/dev/mtd1", "size 4K given twice"),
    ("4K=dev/mtd0", "is not of the form SIZE=/absolute/path"),
    ("4Q=/dev/mtd0", "not a size"),
])
def test_bad_size_maps_are_one_line(text: str, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        parse_size_map(text, "--folio-mtd")


def test_mtd_map_needs_folio_sizes() -> None:
    with pytest.raises(TargetError, match="3K is not a folio size"):
        resolve_mtd_target("3K=/dev/mtd0")


def test_mtd_map_without_a_device_at_this_order_is_an_error() -> None:
    target = MTDTarget(TargetSpec("path", "4K=/dev/mtd0", path=Path("/dev/mtd0")),
                       paths={4096: Path("/dev/mtd0")})
    with (pytest.raises(TargetError, match=r"4K=/dev/mtd0: no device at 16K folios"),
          target.open(size=1 << 20, erasesize=1 << 17, folio_order=2)):
        pass


def test_fs_map_mounts_the_directory_of_each_block_size(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    target = resolve_fs_target(f"4K={tmp_path / 'a'},16K={tmp_path / 'b'}")
    assert target.per_size
    with target.open(16384) as fs:
        fd = fs.open("f", 0o102)  # O_RDWR | O_CREAT
        fs.close(fd)
    assert [p.name for p in (tmp_path / "b").iterdir()] == []  # its scratch dir is gone
    with pytest.raises(TargetError, match="no directory at 64K blocks"), target.open(65536):
        pass


def test_fs_map_checks_every_directory(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="does not exist"):
        resolve_fs_target(f"4K={tmp_path},16K={tmp_path / 'missing'}")
