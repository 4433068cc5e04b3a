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

import errno
import os
import random
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pytest_folio.fixtures.fs import fs_target

from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.targets.directory import DirectoryFS, directory_filesystem
from pytest_folio.targets.kernel_ramfs import (
    KernelRamfsUnavailable,
    mount_kernel_ramfs,
    temporary_mount,
)
from pytest_folio.targets.protocols import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
    FileSystem,
)

SEEDS = [1, 2, 3, 4]
OPS = 600
SLOTS = 4
MAXLEN = 12 * PAGE_SIZE
NAMES = ["a", "b", "d/c", "d/e/f", "d", "d/e", "g/", "a/"]
FLAGS = [
    os.O_RDWR | os.O_CREAT, os.O_RDWR | os.O_CREAT, os.O_RDWR | os.O_CREAT, os.O_RDONLY,
    os.O_WRONLY, os.O_RDWR | os.O_CREAT | os.O_EXCL, os.O_RDWR | os.O_TRUNC,
    os.O_WRONLY | os.O_APPEND | os.O_CREAT, os.O_RDONLY | os.O_DIRECTORY,
    os.O_RDONLY | os.O_TRUNC,
]
MODE_FEATURE = {
    0: "fallocate", FALLOC_FL_KEEP_SIZE: "fallocate",
    FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: "punch_hole",
    FALLOC_FL_ZERO_RANGE: "zero_range", FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE: "zero_range",
    FALLOC_FL_COLLAPSE_RANGE: "collapse_range", FALLOC_FL_INSERT_RANGE: "insert_range",
}
# invalid combinations: vfs_fallocate refuses them before the file system is asked
BAD_MODES = [FALLOC_FL_PUNCH_HOLE, FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_KEEP_SIZE,
             FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 0x100]


def fallocate_modes(a: FileSystem, b: FileSystem) -> list[int]:
    """Modes both support (collapse/insert only at equal block sizes: they must be
    block aligned), or all of them when neither supports fallocate."""
    if "fallocate" not in a.features and "fallocate" not in b.features:
        return [*MODE_FEATURE, *BAD_MODES]
    common = a.features & b.features
    if a.blocksize != b.blocksize:
        common -= {"collapse_range", "insert_range"}
    return [m for m, f in MODE_FEATURE.items() if f in common] + BAD_MODES


def generate(seed: int, modes: list[int]) -> list[tuple[Any, ...]]:
    """A target-independent op list; fds are named by slot."""
    rnd = random.Random(seed)

    def length() -> int:
        return rnd.choice([0, 1, 100, PAGE_SIZE, 5000, rnd.randrange(MAXLEN // 2)])

    def offset() -> int:
        return rnd.choice([0, PAGE_SIZE, 3 * PAGE_SIZE, rnd.randrange(MAXLEN),
                           rnd.randrange(16) * PAGE_SIZE // 2])

    def slot() -> int:
        return rnd.randrange(SLOTS)

    ops: list[tuple[Any, ...]] = []
    for _ in range(OPS):
        kind = rnd.choices(
            ["open", "close", "pread", "pwrite", "ftruncate", "fstat", "mmap_read",
             "mmap_write", "copy", "fallocate", "fsync", "unlink", "mkdir", "rmdir", "rename",
             "listdir", "stat"],
            [8, 3, 10, 14, 6, 4, 5, 5, 3, 6, 1, 2, 2, 2, 2, 1, 2])[0]
        if kind == "open":
            ops.append((kind, slot(), rnd.choice(NAMES), rnd.choice(FLAGS)))
        elif kind in ("close", "fstat", "fsync"):
            ops.append((kind, slot()))
        elif kind == "pread":
            ops.append((kind, slot(), length(), offset()))
        elif kind == "pwrite":
            ops.append((kind, slot(), length(), offset(), rnd.randrange(1, 256)))
        elif kind == "ftruncate":
            ops.append((kind, slot(), rnd.choice([0, 100, 5000, rnd.randrange(MAXLEN)])))
        elif kind == "mmap_read":
            ops.append((kind, slot(), offset(), rnd.choice([1, 100, PAGE_SIZE, 9000])))
        elif kind == "mmap_write":
            ops.append((kind, slot(), offset(), rnd.choice([1, 100, 5000]),
                        rnd.randrange(1, 256)))
        elif kind == "copy":
            ops.append((kind, slot(), slot(), length(), offset(), offset()))
        elif kind == "fallocate":
            mode = rnd.choice(modes)
            if mode in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE) and rnd.random() < .8:
                ops.append((kind, slot(), mode, rnd.randrange(8) * PAGE_SIZE,
                            rnd.randrange(1, 3) * PAGE_SIZE))
            else:
                ops.append((kind, slot(), mode, offset(), length()))
        elif kind == "rename":
            ops.append((kind, rnd.choice(NAMES), rnd.choice(NAMES)))
        else:
            ops.append((kind, rnd.choice(NAMES)))
    return ops


class Runner:
    """Applies ops to one file system, remembering which fd each slot holds."""

    def __init__(self, fs: FileSystem, *, clip_mapped_writes: bool = False) -> None:
        self.fs = fs
        self.fds: list[int] = [-1] * SLOTS
        self.clip_mapped_writes = clip_mapped_writes

    def apply(self, op: tuple[Any, ...]) -> Any:
        try:
            return ("ok", self._apply(op))
        except OSError as exc:
            return ("err", errno.errorcode.get(exc.errno or 0, exc.errno))

    def _apply(self, op: tuple[Any, ...]) -> Any:
        fs, fds = self.fs, self.fds
        kind, *args = op
        if kind == "open":
            slot, name, flags = args
            if fds[slot] >= 0:
                fs.close(fds[slot])
                fds[slot] = -1
            fds[slot] = fs.open(name, flags, 0o644)
            return None
        if kind == "close":
            fd, fds[args[0]] = fds[args[0]], -1
            return fs.close(fd)
        if kind == "pread":
            return fs.pread(fds[args[0]], args[1], args[2])
        if kind == "pwrite":
            return fs.pwrite(fds[args[0]], bytes([args[3]]) * args[1], args[2])
        if kind == "ftruncate":
            return fs.ftruncate(fds[args[0]], args[1])
        if kind == "fstat":
            st = fs.fstat(fds[args[0]])
            return st.st_size if stat.S_ISREG(st.st_mode) else "dir"
        if kind == "fsync":
            return fs.fsync(fds[args[0]])
        if kind == "mmap_read":
            return fs.mmap_read(fds[args[0]], args[1], args[2])
        if kind == "mmap_write":
            length = args[2]
            if self.clip_mapped_writes:
                st = fs.fstat(fds[args[0]])
                if stat.S_ISREG(st.st_mode):
                    length = max(0, min(length, st.st_size - args[1]))
            return fs.mmap_write(fds[args[0]], args[1], bytes([args[3]]) * length)
        if kind == "copy":
            return fs.copy_file_range(fds[args[0]], fds[args[1]], *args[2:])
        if kind == "fallocate":
            return fs.fallocate(fds[args[0]], *args[1:])
        if kind == "stat":
            st = fs.stat(args[0])
            return st.st_size if stat.S_ISREG(st.st_mode) else "dir"
        if kind == "listdir":
            return fs.listdir(args[0])
        return getattr(fs, kind)(*args)

    def snapshot(self) -> dict[str, Any]:
        """Every file's bytes and every directory's names, walked from the root."""
        out: dict[str, Any] = {}

        def walk(path: str) -> None:
            for name in self.fs.listdir(path):
                full = f"{path}/{name}" if path else name
                st = self.fs.stat(full)
                if stat.S_ISDIR(st.st_mode):
                    out[full] = "dir"
                    walk(full)
                else:
                    fd = self.fs.open(full, os.O_RDONLY)
                    out[full] = self.fs.pread(fd, st.st_size + 1, 0)
                    self.fs.close(fd)

        walk("")
        return out


def run_both(reference: FileSystem, real: FileSystem, seed: int, *,
             clip_mapped_writes: bool = False) -> None:
    ops = generate(seed, fallocate_modes(reference, real))
    ref = Runner(reference, clip_mapped_writes=clip_mapped_writes)
    other = Runner(real, clip_mapped_writes=clip_mapped_writes)
    log: list[str] = []
    for n, op in enumerate(ops):
        a, b = ref.apply(op), other.apply(op)
        log.append(f"{n}: {op} -> {_short(a)}")
        if a != b:
            raise AssertionError(
                f"seed {seed}, op {n} {op}: reference {_short(a)} but {real!r} {_short(b)}\n"
                + "\n".join(log[-25:]))
        sizes = [(ref.apply(("fstat", s)), other.apply(("fstat", s))) for s in range(SLOTS)]
        for s, (x, y) in enumerate(sizes):
            assert x == y, f"seed {seed}, after op {n} {op}: slot {s} size {x} vs {y}"
    assert ref.snapshot() == other.snapshot(), f"seed {seed}: final contents differ"


def _short(outcome: Any) -> str:
    kind, value = outcome
    if isinstance(value, bytes):
        return f"{kind} {len(value)} bytes {value[:8]!r}...{value[-8:]!r}"
    return f"{kind} {value!r}"


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
        if kind == "disk" and "collapse_range" not in real.features:
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
    if not target.directories:
        pytest.skip("needs a kernel file system per block size: --folio-fs=4K=DIR,16K=DIR,..."
                    " (python -m pytest_folio vm --fs=xfs)")
    with target.mount(block_size) as real:
        assert real.blocksize == block_size
        features = "full" if "collapse_range" in real.features else "default"
        reference = Ramfs(blocksize=block_size, features=features, memory=64 << 20)
        run_both(reference, real, seed, clip_mapped_writes=True)
