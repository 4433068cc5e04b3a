"""The same random operation sequence on the reference ramfs and on real file systems
gives the same bytes, sizes and errnos.

Real targets: tmpfs (/dev/shm, or a tmpfs mounted in a temporary directory when /dev/shm
is missing and we are root), a real kernel ramfs when root, and the disk file system
under pytest's tmp_path (ext4/xfs, which have collapse/insert/zero range). An fallocate
mode is only generated when both sides support it, or when neither supports fallocate at
all (then both must refuse it alike). Deliberate differences are in docs/fs.md: st_blocks
(the reference counts pages like kernel ramfs; disk file systems count blocks), modes,
link counts and directory sizes are not compared; against a disk file system, mapped
writes are clipped at EOF (its writeback zeroes the rest of the EOF page).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pytest_folio.fixtures.fs import fs_target
from pytest_folio.fsx.differential import Mismatch, common, compare, generate
from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.targets.capabilities import features_of
from pytest_folio.targets.directory import DirectoryFS, directory_filesystem
from pytest_folio.targets.kernel_ramfs import (
    KernelRamfsUnavailable,
    mount_kernel_ramfs,
    temporary_mount,
)
from pytest_folio.targets.protocols import AnyFileSystem

SEEDS = [1, 2, 3, 4]


def run_both(reference: AnyFileSystem, real: AnyFileSystem, seed: int, *,
             clip_mapped_writes: bool = False, count: int = 600) -> None:
    ops = generate(seed, common(real, reference), count)
    try:
        compare(real, reference, ops, clip_mapped_writes=clip_mapped_writes)
    except Mismatch as exc:
        raise AssertionError(f"seed {seed}, {exc} (target {real!r}, oracle the reference)\n"
                             + "\n".join(exc.log[-25:])) from None


@pytest.fixture(scope="module")
def tmpfs_dir() -> Iterator[Path]:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and os.statvfs(shm).f_blocks:
        yield shm
        return
    try:
        with temporary_mount("tmpfs") as where:
            yield Path(where)
    except KernelRamfsUnavailable as exc:
        pytest.skip(f"no writable /dev/shm and {exc}")


def _real(kind: str, tmpfs: Path | None, tmp_path: Path) -> Iterator[DirectoryFS]:
    if kind == "tmpfs":
        assert tmpfs is not None
        with directory_filesystem(tmpfs) as fs:
            yield fs
    elif kind == "kernel-ramfs":
        try:
            with mount_kernel_ramfs() as fs:
                yield fs
        except KernelRamfsUnavailable as exc:
            pytest.skip(str(exc))
    else:
        with directory_filesystem(tmp_path) as fs:
            yield fs


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("kind", "features", "ref_block_size"), [
    ("tmpfs", "full", PAGE_SIZE), ("tmpfs", "full", 64 << 10),
    ("kernel-ramfs", "default", PAGE_SIZE), ("kernel-ramfs", "default", 2 << 20),
    ("disk", "full", PAGE_SIZE)],
    ids=["tmpfs-4K", "tmpfs-64K", "kernel-ramfs-4K", "kernel-ramfs-2M", "disk-4K"])
def test_reference_matches_the_kernel(kind: str, features: str, ref_block_size: int, seed: int,
                                      request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The reference at ``ref_block_size`` against a real file system with 4K pages: the
    folio size must never show in bytes, sizes or errnos."""
    tmpfs = request.getfixturevalue("tmpfs_dir") if kind == "tmpfs" else None
    with contextmanager(_real)(kind, tmpfs, tmp_path) as real:
        if kind == "disk" and "collapse_range" not in features_of(real):
            pytest.skip(f"{tmp_path} has no collapse/insert range (not ext4/xfs)")
        if real.blocksize != PAGE_SIZE:
            pytest.skip(f"{real!r} has block size {real.blocksize}")
        reference = Ramfs(blocksize=ref_block_size, features=features, memory=64 << 20)
        # A disk file system's writeback zeroes the part of the EOF page past EOF
        # (msync writes it back), where ramfs and tmpfs keep what a mapping wrote there.
        run_both(reference, real, seed, clip_mapped_writes=kind == "disk")


@pytest.mark.parametrize("seed", SEEDS)
def test_reference_matches_the_kernel_fs_at_each_block_size(
        block_size: int, seed: int, request: pytest.FixtureRequest) -> None:
    """The reference ramfs at each block size against a kernel file system made at that
    block size (``--folio-fs=4K=DIR,16K=DIR,...``: ``python -m pytest_folio vm --fs=xfs``
    makes one per ``--folio-block-sizes`` size, above the page size included)."""
    target = fs_target(request.config)
    if not target.paths:
        pytest.skip("needs a kernel file system per block size: --folio-fs=4K=DIR,16K=DIR,..."
                    " (python -m pytest_folio vm --fs=xfs)")
    with target.open(block_size) as real:
        assert real.blocksize == block_size
        features = "full" if "collapse_range" in features_of(real) else "default"
        reference = Ramfs(blocksize=block_size, features=features, memory=64 << 20)
        run_both(reference, real, seed, clip_mapped_writes=True)


PROPERTY_SEEDS = range(1, 201)


@pytest.mark.parametrize(("kind", "features", "ref_block_size"), [
    ("tmpfs", "full", PAGE_SIZE), ("tmpfs", "full", 16 << 10), ("kernel-ramfs", "default",
                                                                 PAGE_SIZE),
    ("disk", "full", PAGE_SIZE)], ids=["tmpfs-4K", "tmpfs-16K", "kernel-ramfs-4K", "disk-4K"])
def test_no_difference_over_200_seeds(kind: str, features: str, ref_block_size: int,
                                      request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The property the default oracle rests on: over 200 seeds of short sequences (every
    call, flag, region and trailing slash of the generator), the reference answers as
    the kernel does. The disk file system (ext4 or XFS under ``tmp_path``) has mapped
    writes clipped at EOF (its writeback zeroes the rest of the EOF page)."""
    tmpfs = request.getfixturevalue("tmpfs_dir") if kind == "tmpfs" else None
    with contextmanager(_real)(kind, tmpfs, tmp_path) as first:
        if kind == "disk" and os.statvfs(tmp_path).f_bsize != PAGE_SIZE:
            pytest.skip(f"{tmp_path} has blocks of {os.statvfs(tmp_path).f_bsize} bytes")
        root = Path(first.root)
        for seed in PROPERTY_SEEDS:
            with directory_filesystem(root) as real:     # a fresh subdirectory each
                reference = Ramfs(blocksize=ref_block_size, features=features,
                                  memory=64 << 20)
                run_both(reference, real, seed, clip_mapped_writes=kind == "disk",
                         count=120)
