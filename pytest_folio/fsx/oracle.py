"""Differential runs: one random operation sequence on two file systems, every outcome
compared (``--folio-fs-oracle``, and the project's own reference-against-kernel tests).

:func:`generate` makes a target-independent sequence from a seed: open (with every kind
of flag), close, pread, pwrite, ftruncate, fstat, fsync, mapped reads and writes,
copy_file_range between any two descriptors, fallocate in the modes both sides support
(and the invalid ones, which both must refuse alike), unlink, mkdir, rmdir, rename,
listdir and stat, over a few names in a small tree. Descriptors are named by slot, so the
same sequence means the same thing on both sides. :func:`compare` applies each operation
to both and stops at the first difference in a return value, errno, the bytes read, or
any open file's size, then compares every file's bytes and every directory's names.

Deliberate differences, not compared: st_blocks, modes, link counts and directory sizes;
mapped writes are clipped at EOF (a disk file system's writeback zeroes the rest of the
EOF page, where ramfs and tmpfs keep what a mapping stored there).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import random
import stat
from typing import Any

from pytest_folio.constants import PAGE_SIZE
from pytest_folio.targets.protocols import AnyFileSystem, features_of
from pytest_folio.uapi import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
    FALLOC_MODE_FEATURE,
)

Op = tuple[Any, ...]
Outcome = tuple[str, Any]

SLOTS = 4
MAXLEN = 12 * PAGE_SIZE
NAMES = ["a", "b", "d/c", "d/e/f", "d", "d/e", "g/", "a/"]
FLAGS = [
    os.O_RDWR | os.O_CREAT, os.O_RDWR | os.O_CREAT, os.O_RDWR | os.O_CREAT, os.O_RDONLY,
    os.O_WRONLY, os.O_RDWR | os.O_CREAT | os.O_EXCL, os.O_RDWR | os.O_TRUNC,
    os.O_WRONLY | os.O_APPEND | os.O_CREAT, os.O_RDONLY | os.O_DIRECTORY,
    os.O_RDONLY | os.O_TRUNC,
]
MODE_FEATURE = FALLOC_MODE_FEATURE  # the modes generate() draws from, by feature
# invalid combinations: vfs_fallocate refuses them before the file system is asked
BAD_MODES = [FALLOC_FL_PUNCH_HOLE, FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_KEEP_SIZE,
             FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 0x100]
# refused with EINVAL before Linux 6.13 and EOPNOTSUPP since: not for a differential
# run between two kernels, or a kernel and the reference
VERSION_DEPENDENT_MODES = [FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_KEEP_SIZE]
_KINDS = ["open", "close", "pread", "pwrite", "ftruncate", "fstat", "mmap_read", "mmap_write",
          "copy", "fallocate", "fsync", "unlink", "mkdir", "rmdir", "rename", "listdir", "stat"]
_WEIGHTS = [8, 3, 10, 14, 6, 4, 5, 5, 3, 6, 1, 2, 2, 2, 2, 1, 2]


def fallocate_modes(a: AnyFileSystem, b: AnyFileSystem, bad_modes: list[int] | None = None
                    ) -> list[int]:
    """Modes both support (collapse/insert only at equal block sizes: they must be
    block aligned), or all of them when neither supports fallocate, plus ``bad_modes``
    (default :data:`BAD_MODES`)."""
    bad = BAD_MODES if bad_modes is None else bad_modes
    ours, theirs = features_of(a), features_of(b)
    if "fallocate" not in ours and "fallocate" not in theirs:
        return [*MODE_FEATURE, *bad]
    common = ours & theirs
    if a.blocksize != b.blocksize:
        common -= {"collapse_range", "insert_range"}
    return [m for m, f in MODE_FEATURE.items() if f in common] + bad


def generate(seed: int, modes: list[int], count: int = 600, maxlen: int = MAXLEN,
             unit: int = PAGE_SIZE) -> list[Op]:
    """``count`` operations from ``seed``; offsets and lengths gather on multiples of
    ``unit`` (collapse and insert ranges are made of them) within ``maxlen``."""
    rnd = random.Random(seed)

    def length() -> int:
        return rnd.choice([0, 1, 100, unit, unit + 904, rnd.randrange(maxlen // 2)])

    def offset() -> int:
        return rnd.choice([0, unit, 3 * unit, rnd.randrange(maxlen),
                           rnd.randrange(16) * unit // 2])

    def slot() -> int:
        return rnd.randrange(SLOTS)

    ops: list[Op] = []
    for _ in range(count):
        kind = rnd.choices(_KINDS, _WEIGHTS)[0]
        if kind == "open":
            ops.append((kind, slot(), rnd.choice(NAMES), rnd.choice(FLAGS)))
        elif kind in ("close", "fstat", "fsync"):
            ops.append((kind, slot()))
        elif kind == "pread":
            ops.append((kind, slot(), length(), offset()))
        elif kind == "pwrite":
            ops.append((kind, slot(), length(), offset(), rnd.randrange(1, 256)))
        elif kind == "ftruncate":
            ops.append((kind, slot(), rnd.choice([0, 100, unit + 904, rnd.randrange(maxlen)])))
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
                ops.append((kind, slot(), mode, rnd.randrange(8) * unit,
                            rnd.randrange(1, 3) * unit))
            else:
                ops.append((kind, slot(), mode, offset(), length()))
        elif kind == "rename":
            ops.append((kind, rnd.choice(NAMES), rnd.choice(NAMES)))
        else:
            ops.append((kind, rnd.choice(NAMES)))
    return ops


def describe(op: Op) -> str:
    """An operation as a call: ``pwrite(slot 1, 100 bytes of 0xab, at 4096)``."""
    kind, *args = op
    if kind == "pwrite":
        return f"pwrite(slot {args[0]}, {args[1]} bytes of {args[3]:#04x}, at {args[2]})"
    if kind == "mmap_write":
        return f"mmap_write(slot {args[0]}, at {args[1]}, {args[2]} bytes of {args[3]:#04x})"
    if kind == "open":
        return f"open(slot {args[0]}, {args[1]!r}, {args[2]:#o})"
    if kind == "copy":
        return (f"copy_file_range(slot {args[0]} -> slot {args[1]}, {args[2]} bytes, "
                f"{args[3]} -> {args[4]})")
    if kind == "fallocate":
        return f"fallocate(slot {args[0]}, mode {args[1]:#x}, {args[2]}, {args[3]})"
    if kind in ("close", "fstat", "fsync", "pread", "ftruncate", "mmap_read"):
        return f"{kind}(slot {args[0]}{''.join(f', {a}' for a in args[1:])})"
    return f"{kind}({', '.join(map(repr, args))})"


def short(outcome: Outcome) -> str:
    """An outcome in a few words: ``ok 100``, ``err EBADF``, ``ok 4096 bytes 5a5a...``."""
    kind, value = outcome
    if isinstance(value, bytes):
        if len(value) <= 16:
            return f"{kind} {value!r}"
        return f"{kind} {len(value)} bytes {value[:8].hex()}...{value[-8:].hex()}"
    return f"{kind} {value!r}" if value is not None else kind


class Runner:
    """Applies operations to one file system, remembering which fd each slot holds."""

    def __init__(self, fs: AnyFileSystem, *, clip_mapped_writes: bool = False) -> None:
        self.fs = fs
        self.fds: list[int] = [-1] * SLOTS
        self.clip_mapped_writes = clip_mapped_writes

    def apply(self, op: Op) -> Outcome:
        try:
            return ("ok", self._apply(op))
        except OSError as exc:
            return ("err", errno.errorcode.get(exc.errno or 0, exc.errno))

    def _apply(self, op: Op) -> Any:
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

    def close_all(self) -> None:
        for slot, fd in enumerate(self.fds):
            if fd >= 0:
                self.apply(("close", slot))

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


@dataclasses.dataclass(eq=False)
class Mismatch(AssertionError):
    """The first difference: ``index`` is the operation's number (None for the final
    comparison of the trees); ``log`` the operations up to it with the oracle's outcomes."""

    index: int | None
    what: str
    target: str
    oracle: str
    log: list[str]

    def __str__(self) -> str:
        where = f"op {self.index}: {self.what}" if self.index is not None else self.what
        return f"{where}: target {self.target}, oracle {self.oracle}"


def compare(target: AnyFileSystem, oracle: AnyFileSystem, ops: list[Op], *,
            clip_mapped_writes: bool = True) -> None:
    """Apply ``ops`` to both; raise :class:`Mismatch` at the first difference."""
    ours, theirs = (Runner(fs, clip_mapped_writes=clip_mapped_writes)
                    for fs in (target, oracle))
    log: list[str] = []
    for n, op in enumerate(ops):
        a, b = ours.apply(op), theirs.apply(op)
        log.append(f"{n}: {describe(op)} -> {short(b)}")
        if a != b:
            raise Mismatch(n, describe(op), short(a), short(b), log)
        for slot in range(SLOTS):
            x, y = ours.apply(("fstat", slot)), theirs.apply(("fstat", slot))
            if x != y:
                raise Mismatch(n, f"{describe(op)}, then fstat(slot {slot})", short(x),
                               short(y), log)
    ours.close_all()
    theirs.close_all()
    mine, good = ours.snapshot(), theirs.snapshot()
    if mine != good:
        names = sorted(set(mine) | set(good))
        name = next(n for n in names if mine.get(n) != good.get(n))
        raise Mismatch(None, f"after {len(ops)} ops, {name!r}",
                       short(("ok", mine.get(name, "missing"))),
                       short(("ok", good.get(name, "missing"))), log)
