"""What stat says: st_blksize, st_size, st_blocks."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_folio.fixtures.fs import fs_target
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.linux.uapi import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE
from pytest_folio.suites.fs.base import RDWR_CREAT, _Base, need, pattern
from pytest_folio.targets.capabilities import working_features
from pytest_folio.targets.protocols import AnyFileSystem


def _not_reported(fs: AnyFileSystem, field: str) -> str:
    """Why a check of ``field`` skips: the target's stat leaves it out (None, as an
    os.stat_result of ten fields has it). Python's stat_result has st_blocks and
    st_blksize only on some systems, and statx(2) lets a file system leave a field out
    of stx_mask: not reporting the field is no storage bug."""
    return (f"{type(fs).__name__}'s stat answers no {field} (None: an os.stat_result "
            f"of ten fields), so there is nothing to check")


class FsAccounting(_Base):
    """st_size and st_blocks after every kind of operation."""

    def blocks(self, fs: AnyFileSystem, fd: int) -> int:
        blocks = fs.fstat(fd).st_blocks
        if blocks is None:
            pytest.skip(_not_reported(fs, "st_blocks"))
        return int(blocks)

    def test_st_blksize_is_a_positive_size(self, filesystem: AnyFileSystem) -> None:
        fd = filesystem.open("f", RDWR_CREAT)
        blksize = filesystem.fstat(fd).st_blksize
        if blksize is None:
            pytest.skip(_not_reported(filesystem, "st_blksize"))
        assert isinstance(blksize, int) and blksize > 0, (
            f"st_blksize {blksize!r}: stat(2)'s preferred I/O size is a positive number")

    def test_st_blksize_is_the_block_size(self, filesystem: AnyFileSystem,
                                          request: pytest.FixtureRequest) -> None:
        if fs_target(request.config).kind == "factory":
            pytest.skip("st_blksize is a file system's preferred I/O size, its own choice "
                        "(tmpfs says PAGE_SIZE, XFS may say its stripe width): only the "
                        "ramfs targets promise the block size there")
        fd = filesystem.open("f", RDWR_CREAT)
        assert filesystem.fstat(fd).st_blksize == filesystem.blocksize

    def test_stat_and_fstat_agree_on_the_size_after_every_operation(
            self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        fd = filesystem.open("f", RDWR_CREAT)
        steps: list[tuple[str, Callable[[], object], int]] = [
            ("write", lambda: filesystem.pwrite(fd, pattern(bs + 3, 42), 0), bs + 3),
            ("write past EOF", lambda: filesystem.pwrite(fd, b"x", 2 * bs), 2 * bs + 1),
            ("empty write", lambda: filesystem.pwrite(fd, b"", 5 * bs), 2 * bs + 1),
            ("truncate down", lambda: filesystem.ftruncate(fd, PAGE_SIZE + 1), PAGE_SIZE + 1),
            ("truncate up", lambda: filesystem.ftruncate(fd, 3 * bs - 1), 3 * bs - 1),
            ("fsync", lambda: filesystem.fsync(fd), 3 * bs - 1)]
        features = working_features(filesystem)
        if "mmap" in features:
            steps.append(("mapped write", lambda: filesystem.mmap_write(fd, 10, b"m" * 100),
                          3 * bs - 1))
        if "fallocate" in features:
            steps += [("fallocate keep size", lambda: filesystem.fallocate(
                fd, FALLOC_FL_KEEP_SIZE, 0, 5 * bs), 3 * bs - 1),
                ("fallocate", lambda: filesystem.fallocate(fd, 0, 3 * bs, bs), 4 * bs)]
        if "copy_range" in features:
            steps.append(("copy", lambda: filesystem.copy_file_range(fd, fd, 10, 0, 5 * bs),
                          5 * bs + 10))
        for what, step, size in steps:
            step()
            assert (filesystem.fstat(fd).st_size, filesystem.stat("f").st_size) == (
                size, size), f"after {what}"

    def test_st_blocks_cover_the_written_data(self, filesystem: AnyFileSystem) -> None:
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
            self, filesystem: AnyFileSystem) -> None:
        fd = self.create(filesystem, "f", pattern(3 * filesystem.blocksize, 44))
        filesystem.fsync(fd)
        filesystem.ftruncate(fd, 0)
        assert self.blocks(filesystem, fd) == 0

    def test_st_blocks_shrink_after_truncate_down(self, filesystem: AnyFileSystem) -> None:
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(8 * bs, 45))
        filesystem.fsync(fd)
        before = self.blocks(filesystem, fd)
        filesystem.ftruncate(fd, bs + 1)
        assert self.blocks(filesystem, fd) <= before // 2, f"{before} before"

    def test_st_blocks_grow_with_fallocate_keep_size(self, filesystem: AnyFileSystem,
                                                     request: pytest.FixtureRequest) -> None:
        """On the reference, the blocks are allocated. Elsewhere they need not be: a
        file system that cannot reserve blocks checks the free space and allocates
        nothing (OpenZFS's zpl_fallocate: copy-on-write and snapshots make a
        reservation impossible), so st_blocks may stay as it was, and never shrinks."""
        need(filesystem, "fallocate")
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(100, 46))
        before = self.blocks(filesystem, fd)
        filesystem.fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4 * bs)
        after = self.blocks(filesystem, fd)
        if fs_target(request.config).kind == "reference":
            assert after >= before + 3 * bs // 512
        else:
            assert after >= before, (
                f"st_blocks {after} after fallocate KEEP_SIZE of 4 blocks, {before} "
                "before: an allocation may allocate nothing, never free blocks")
        assert filesystem.fstat(fd).st_size == 100

    def test_st_blocks_shrink_after_punching_whole_blocks(
            self, filesystem: AnyFileSystem) -> None:
        need(filesystem, "punch_hole")
        bs = filesystem.blocksize
        fd = self.create(filesystem, "f", pattern(8 * bs, 47))
        filesystem.fsync(fd)
        before = self.blocks(filesystem, fd)
        filesystem.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * bs, 4 * bs)
        assert self.blocks(filesystem, fd) <= before - 4 * bs // 512, f"{before} before"
