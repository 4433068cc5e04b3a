"""Power cuts on file systems: runs of random writes (through ``pwrite``, shared
mappings and ``copy_file_range``), fallocates, truncates, fsyncs and renames over a few
files, each open through two descriptors, a power cut at the end of each round, and after
each cut every name, size and byte checked against what the cut may leave
(docs/powercut.md).

Two sets of rules (``--folio-power-cut-rules``). ``fsync``, what fsync promises, per
file, since its last fsync (or since it was created, when it never was):

- its size is one it has had since then (the fsync'd size when nothing changed it);
- each ``unit`` (a page, or the target's ``power_cut_unit``) inside that size reads as
  the unit did in one of the file's states since then, zeros past a state's size
  included (a hole, or an extension whose size landed before its data), never garbage;
- it is found under one of the names it has had since then, under one name only; a
  file fsync'd since its last rename, and never replaced since, must be found;
- and nothing is invented: every name found is one some file has had since its fsync.

``ordered`` adds what ordered-mode journalling promises: a unit past the fsync'd size
reads only as in a state whose size covered it, so the data of an extension lands before
the size does, never zeros in its place. Every failure names the rule it broke.

fsync makes the file's data, size and present name durable. Under ``fsync`` each file's
fsync is followed by one of its directory, which fsync(2) asks for the name ("an explicit
fsync() on a file descriptor for the directory is also needed"), so a file system that
commits names only there (ext2) passes; under ``ordered`` the file's fsync alone must
commit its name, as the journalling file systems do. After the cut, what is found is the
new durable state of every file.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Iterator, Sequence
from typing import cast

from pytest_folio.linux.uapi import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE
from pytest_folio.targets.capabilities import features_of
from pytest_folio.targets.protocols import (
    CopyFileRange,
    Fallocate,
    FileSystem,
    MappedIO,
    PowerCut,
    power_cut_unit,
)

SCHEDULES = ("fsync", "writes", "renames")
NAMES = ("a", "b", "c", "d")
MIB = 1 << 20
# files stay below this (every state is kept whole): past 1 MiB, the first size where a
# writeback or fsync limited to a round number stops, and past the default cache of the
# project's own file systems
MAX_END = MIB + (256 << 10)
DESCRIPTORS = 2             # each file is open through this many descriptors

RULES = ("fsync", "ordered")
DEFAULT_RULES = "fsync"     # a user's file system: what POSIX and fsync(2) promise
KERNEL_RULES = "ordered"    # the kernel's ext4 and XFS: what their journals promise
FSYNC_RULE = "fsync's promise"
ORDERED_RULE = "ordered mode's 'size never before data'"
UNIT_RULE = "its power_cut_unit"

# fallocate modes a run draws, each with the feature that offers it
FALLOCATE_MODES = ((0, "fallocate"), (FALLOC_FL_KEEP_SIZE, "fallocate"),
                   (FALLOC_FL_ZERO_RANGE, "zero_range"),
                   (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, "punch_hole"))


def check_rules(rules: str) -> str:
    """``rules`` when it names a set of rules, else ValueError."""
    if rules not in RULES:
        raise ValueError(f"{rules!r} is not one of {'|'.join(RULES)}")
    return rules


@dataclasses.dataclass(frozen=True)
class FsOp:
    """One operation of a run; ``name`` is the file's name when the op runs, ``fd`` which
    of its descriptors the op goes through."""

    kind: str               # write, mmap_write, copy, fallocate, truncate, fsync, rename, cut
    name: str = ""
    offset: int = 0         # write, copy, fallocate: where; truncate: the new size
    length: int = 0
    tag: int = 0            # write, mmap_write: which data; fallocate: its mode
    to: str = ""            # rename: the new name; copy: the source file's name
    fd: int = 0
    src_offset: int = 0     # copy: where in the source

    def __str__(self) -> str:
        on = f" (fd {self.fd})" if self.fd else ""
        if self.kind in ("write", "mmap_write"):
            return (f"{self.kind} {self.name} {self.offset:#x} {self.length:#x} "
                    f"(data {self.tag}){on}")
        if self.kind == "copy":
            return (f"copy {self.to} {self.src_offset:#x} to {self.name} {self.offset:#x} "
                    f"{self.length:#x}{on}")
        if self.kind == "fallocate":
            return (f"fallocate {self.name} mode {self.tag:#x} {self.offset:#x} "
                    f"{self.length:#x}{on}")
        if self.kind == "truncate":
            return f"truncate {self.name} {self.offset:#x}{on}"
        if self.kind == "rename":
            return f"rename {self.name} {self.to}"
        if self.kind == "fsync":
            return f"fsync {self.name}{on}"
        return "power cut"


CUT = FsOp("cut")


def data_of(op: FsOp) -> bytes:
    """A write's bytes: reproducible from its tag, never a zero byte (so a hole or a lost
    write can never pass for data)."""
    return random.Random(op.tag).randbytes(op.length).replace(b"\0", b"\x5a")


def powercut_features(fs: object) -> frozenset[str]:
    """The calls beyond pwrite a run may dirty data with on ``fs``: ``mmap``,
    ``copy_range`` and the fallocate features it offers."""
    return features_of(fs) & {"mmap", "copy_range", *(f for _, f in FALLOCATE_MODES)}


def fs_powercut_ops(seed: int, rounds: int, schedule: str,
                    features: frozenset[str] = frozenset()) -> list[FsOp]:
    """``rounds`` rounds of random operations over the files ``a``..``d``, each ending in
    a power cut: ``fsync`` right after fsyncs; ``writes`` after writes and truncates that
    follow them; ``renames`` the same with as many renames as writes. ``features``
    (:func:`powercut_features`) adds mapped stores, copies and fallocates to the writes."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}")
    rng = random.Random(seed)
    renames = 0.35 if schedule == "renames" else 0.1
    modes = [mode for mode, feature in FALLOCATE_MODES if feature in features]
    writes = ["write", "write"] + [kind for kind, feature in (
        ("mmap_write", "mmap"), ("copy", "copy_range"), ("fallocate", "fallocate"))
        if feature in features and (kind != "fallocate" or modes)]

    def where() -> tuple[int, int]:
        offset = rng.choice((0, rng.randrange(MAX_END - 1), rng.randrange(16) << 12,
                             MIB - rng.randrange(1, 64 << 10), MIB + rng.randrange(-2, 2)))
        length = rng.choice((rng.randrange(1, 300), rng.randrange(1, 40 << 10), 4096,
                             rng.randrange(64 << 10, 320 << 10)))
        return offset, max(1, min(length, MAX_END - offset))

    def size() -> int:
        """A truncate's size: to 0 (an fsync of an empty file must save its
        emptiness), at a page boundary, or anywhere."""
        pick = rng.random()
        if pick < 0.2:
            return 0
        if pick < 0.4:
            return rng.randrange(MAX_END >> 12) << 12
        return rng.randrange(MAX_END)

    def change() -> FsOp:
        pick = rng.random()
        name = rng.choice(NAMES)
        fd = rng.randrange(DESCRIPTORS)
        if pick < renames:
            return FsOp("rename", name, to=rng.choice([n for n in NAMES if n != name]))
        if pick < renames + 0.15:
            return FsOp("truncate", name, size(), fd=fd)
        offset, length = where()
        kind = rng.choice(writes)
        if kind == "copy":
            src = rng.choice([n for n in NAMES if n != name])
            return FsOp("copy", name, offset, length, to=src, fd=fd,
                        src_offset=rng.choice((0, rng.randrange(MAX_END - 1))))
        tag = rng.choice(modes) if kind == "fallocate" else rng.getrandbits(32)
        return FsOp(kind, name, offset, length, tag, fd=fd)

    ops: list[FsOp] = []
    for _ in range(rounds):
        ops += [change() for _ in range(rng.randint(2, 6))]
        for name in rng.sample(NAMES, rng.randint(1, 3)):
            if rng.random() < 0.15:     # emptied, then fsynced: the emptiness is saved
                ops.append(FsOp("truncate", name, 0, fd=rng.randrange(DESCRIPTORS)))
            ops.append(FsOp("fsync", name, fd=rng.randrange(DESCRIPTORS)))
        if schedule != "fsync":
            ops += [change() for _ in range(rng.randint(1, 3))]
        ops.append(CUT)
    return ops


@dataclasses.dataclass
class Version:
    data: bytes             # the file's bytes (its size is their length)
    how: str


class FileStates:
    """One file (an inode) as the rules see it."""

    def __init__(self, name: str, data: bytes, how: str, durable: bool) -> None:
        self.name: str | None = name     # None: replaced or gone
        self.now = bytearray(data)
        self.versions = [Version(bytes(data), how)]
        self.names = [name]
        self.durable = durable           # fsync'd (or found after a cut) since its rename
        self.fds: dict[int, int] = {}    # the target's descriptors, by the ops' number

    def changed(self, how: str) -> None:
        if bytes(self.now) != self.versions[-1].data:
            self.versions.append(Version(bytes(self.now), how))

    def put(self, offset: int, data: bytes) -> None:
        """``data`` at ``offset`` (zeros between the end and ``offset``)."""
        if len(self.now) < offset:
            self.now += bytes(offset - len(self.now))
        self.now[offset:offset + len(data)] = data

    def fsynced(self, how: str) -> None:
        assert self.name is not None
        self.versions = [Version(bytes(self.now), how)]
        self.names = [self.name]
        self.durable = True

    def check(self, data: bytes, unit: int, rules: str = DEFAULT_RULES) -> str | None:
        """None when ``data`` is a state the file may be found in after a cut under
        ``rules``; else the rule it broke and how."""
        sizes = sorted({len(v.data) for v in self.versions})
        if len(data) not in sizes:
            allowed = " or ".join(f"{len(v.data)} ({v.how})" for v in _by_size(self.versions))
            return f"broke {FSYNC_RULE}: size {len(data)}, allowed {allowed}"
        durable = len(self.versions[0].data)
        for lo in range(0, len(data), unit):
            hi = min(len(data), lo + unit)
            piece = data[lo:hi]
            states = self.versions
            if rules == "ordered":
                covered = [v for v in states if len(v.data) >= hi or hi <= durable]
                if any(_padded(v.data, lo, hi) == piece for v in covered):
                    continue
                if any(_padded(v.data, lo, hi) == piece for v in states):
                    return (f"broke {ORDERED_RULE}: {_first_bad(data, lo, hi, covered)} "
                            "(the extension's size landed before its data)")
            elif any(_padded(v.data, lo, hi) == piece for v in states):
                continue
            bad = _first_bad(data, lo, hi, states)
            if bad:
                return f"broke {FSYNC_RULE}: {bad}"
            return (f"broke {UNIT_RULE}: the {unit}-byte unit at {lo:#x} mixes two of its "
                    "states (a cut tore a unit the file system lands whole)")
        return None


def _first_bad(data: bytes, lo: int, hi: int, states: Sequence[Version]) -> str:
    """The first byte of ``data[lo:hi]`` no state allows, what it read and what they
    allow; "" when each byte alone is allowed."""
    i = _first_unmatched(data[lo:hi], [_padded(v.data, lo, hi) for v in states])
    if i is None:
        return ""
    i += lo
    allowed = " or ".join(f"{_padded(v.data, i, i + 1)[0]:#04x} ({v.how})"
                          for v in _first_of_each(states, i)) or "nothing"
    return f"byte {i:#x} (of {len(data)}) read {data[i]:#04x}, allowed {allowed}"


def _first_unmatched(piece: bytes, states: list[bytes], start: int = 0,
                     end: int | None = None) -> int | None:
    """The first index of ``piece[start:end]`` where no state has ``piece``'s byte; None
    when each byte matches one. A range some state matches whole is skipped by one
    comparison, the rest halved: a unit of a 2M block is not looked at byte by byte."""
    end = len(piece) if end is None else end
    if any(state[start:end] == piece[start:end] for state in states):
        return None
    if end - start <= 64:
        return next((i for i in range(start, end)
                     if all(state[i] != piece[i] for state in states)), None)
    mid = (start + end) // 2
    first = _first_unmatched(piece, states, start, mid)
    return first if first is not None else _first_unmatched(piece, states, mid, end)


def _padded(data: bytes, lo: int, hi: int) -> bytes:
    piece = data[lo:hi]
    return piece + bytes(hi - lo - len(piece))


def _by_size(versions: Sequence[Version]) -> Iterator[Version]:
    seen: set[int] = set()
    for v in versions:
        if len(v.data) not in seen:
            seen.add(len(v.data))
            yield v


def _first_of_each(states: Sequence[Version], i: int) -> list[Version]:
    seen: dict[bytes, Version] = {}
    for v in states:
        seen.setdefault(_padded(v.data, i, i + 1), v)
    return list(seen.values())


class FsPowerCutFailure(AssertionError):
    """A cut left a state the rules do not allow (``ops``: the run up to that cut)."""

    def __init__(self, summary: str, ops: list[FsOp], at: int) -> None:
        super().__init__(summary)
        self.summary = summary
        self.ops = list(ops)
        self.at = at


class FsPowerCutRun:
    """Applies a run's operations to ``fs`` and checks each cut under ``rules``. With
    ``fs`` None the operations only move the states: the replay that checks, after a
    real power cut, what another run (another boot) did."""

    def __init__(self, fs: FileSystem | None, unit: int | None = None,
                 rules: str = DEFAULT_RULES, sync_directory: bool | None = None) -> None:
        self.fs = fs
        self.unit = unit if unit is not None else power_cut_unit(fs)
        self.rules = check_rules(rules)
        # fsync(2): the name needs an fsync of the directory; a journal commits it with
        # the file (ordered's rules hold the target to that)
        self.sync_directory = rules == "fsync" if sync_directory is None else sync_directory
        self.files: list[FileStates] = []
        self.assigned: dict[str, FileStates] = {}    # by the last match that passed
        self.cuts = 0

    def named(self, name: str) -> FileStates | None:
        return next((f for f in self.files if f.name == name), None)

    def opened(self, name: str, how: str, fd: int = 0) -> FileStates:
        """The file ``name`` (created empty when there is none), open through its
        descriptor number ``fd``."""
        f = self.named(name)
        if f is None:
            f = FileStates(name, b"", how, durable=False)
            self.files.append(f)
        if fd not in f.fds and self.fs is not None:
            f.fds[fd] = self.fs.open(name, os.O_RDWR | os.O_CREAT)
        return f

    def run(self, ops: Sequence[FsOp]) -> int:
        """Every op in turn; raises FsPowerCutFailure at the first cut that finds a state
        not allowed. Returns how many cuts were checked."""
        for i, op in enumerate(ops):
            how = f"op {i}: {op}"
            try:
                self.step(op, how)
            except FsPowerCutFailure as failure:
                after = f"after op {i - 1} ({ops[i - 1]})" if i else "before any op"
                raise FsPowerCutFailure(f"power cut at op {i}, {after}: {failure.summary}",
                                        list(ops[:i + 1]), i) from None
            except OSError as exc:
                raise FsPowerCutFailure(f"op {i} ({op}) failed: {exc}", list(ops[:i + 1]),
                                        i) from None
        return self.cuts

    def step(self, op: FsOp, how: str) -> None:
        if op.kind in ("write", "mmap_write", "copy", "fallocate", "truncate", "fsync"):
            f = self.opened(op.name, how, op.fd)
            if op.kind == "fsync":
                if self.fs is not None:
                    self.fs.fsync(f.fds[op.fd])
                    if self.sync_directory:
                        self.fsync_directory(self.fs)
                f.fsynced(how)
                return
            self.change(f, op)
            f.changed(how)
        elif op.kind == "rename":
            moved = self.named(op.name)
            if moved is None or op.to == op.name:
                return                  # nothing of that name now: the op does nothing
            if self.fs is not None:
                self.fs.rename(op.name, op.to)
            replaced = self.named(op.to)
            if replaced is not None:
                replaced.name = None
                replaced.durable = False    # may be gone, if the rename reached the disk
            moved.name = op.to
            moved.names.append(op.to)       # found under the old name or the new
        elif op.kind == "cut":
            if not isinstance(self.fs, PowerCut):
                raise TypeError(f"{type(self.fs).__name__} has no power_cut()")
            self.fs.power_cut()
            self.after_cut()
            self.cuts += 1
        else:
            raise ValueError(f"a power-cut run has no {op.kind!r} operation")

    @staticmethod
    def fsync_directory(fs: FileSystem) -> None:
        """An fsync of the files' directory (the root), as careful programs make one
        after a file's (fsync(2)); a file system that cannot open its root, or sync a
        directory (EINVAL: vfs_fsync_range without ->fsync), has no other way to commit
        a name than the file's fsync, and is held to that."""
        try:
            fd = fs.open("", os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            fs.fsync(fd)
        except OSError:
            pass
        finally:
            fs.close(fd)

    def change(self, f: FileStates, op: FsOp) -> None:
        """A write, mapped store, copy, fallocate or truncate of ``f``, on the file system
        (when there is one) and on the states. Mapped stores and copies are clipped to
        what the file (the source) holds; a copy may copy less than asked, as Linux's
        may, and what it copied counts."""
        fs, fd = self.fs, f.fds.get(op.fd, -1)
        if op.kind == "write":
            data = data_of(op)
            if fs is not None:
                written = fs.pwrite(fd, data, op.offset)
                if written != len(data):
                    raise OSError(0, f"short write: {written} of {len(data)} bytes")
            f.put(op.offset, data)
        elif op.kind == "mmap_write":
            data = data_of(op)[:max(0, len(f.now) - op.offset)]
            if data:
                if fs is not None:
                    cast(MappedIO, fs).mmap_write(fd, op.offset, data)
                f.put(op.offset, data)
        elif op.kind == "copy":
            self.copy(f, op)
        elif op.kind == "fallocate":
            if fs is not None:
                cast(Fallocate, fs).fallocate(fd, op.tag, op.offset, op.length)
            end = op.offset + op.length
            if op.tag & (FALLOC_FL_ZERO_RANGE | FALLOC_FL_PUNCH_HOLE):
                zeros = min(end, len(f.now)) if op.tag & FALLOC_FL_KEEP_SIZE else end
                if zeros > op.offset:
                    f.put(op.offset, bytes(zeros - op.offset))
            if not op.tag & FALLOC_FL_KEEP_SIZE and end > len(f.now):
                f.put(end, b"")
        else:
            if fs is not None:
                fs.ftruncate(fd, op.offset)
            f.now = (f.now + bytes(max(0, op.offset - len(f.now))))[:op.offset]

    def copy(self, f: FileStates, op: FsOp) -> None:
        src = self.named(op.to)
        if src is None or src is f:
            return                  # no source now, or the same file: the op does nothing
        want = max(0, min(op.length, len(src.now) - op.src_offset))
        done = 0
        if self.fs is not None:
            self.opened(op.to, "", 0)
            while done < want:
                n = cast(CopyFileRange, self.fs).copy_file_range(
                    src.fds[0], f.fds[op.fd], want - done, op.src_offset + done,
                    op.offset + done)
                if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= want - done:
                    raise OSError(0, f"copy_file_range returned {n!r}, not a count of "
                                     f"0..{want - done}")
                if n == 0:
                    break
                done += n
        else:
            done = want
        if done:
            f.put(op.offset, bytes(src.now[op.src_offset:op.src_offset + done]))

    def after_cut(self) -> None:
        assert self.fs is not None
        found = read_files(self.fs)
        problem = self.match(found)
        if problem is not None:
            raise FsPowerCutFailure(problem, [], 0)
        # what was found is the new durable state; open files are gone with the power
        self.files = [FileStates(name, data, "found after the cut before", durable=True)
                      for name, data in found.items()]

    def match(self, found: dict[str, bytes]) -> str | None:
        """None when each name found can be given a file (each file once, every file
        that must survive given one) whose state the rules allow (``assigned`` then says
        which); else the rule broken and what is wrong."""
        problems: dict[tuple[str, int], str | None] = {}
        for name, data in found.items():
            for k, f in enumerate(self.files):
                if name in f.names:
                    problems[name, k] = f.check(data, self.unit, self.rules)
        names = list(found)
        required = {k for k, f in enumerate(self.files) if f.durable}

        def assign(i: int, used: frozenset[int]) -> list[int] | None:
            if i == len(names):
                return [] if required <= used else None
            for (name, k), problem in problems.items():
                if name == names[i] and problem is None and k not in used:
                    rest = assign(i + 1, used | {k})
                    if rest is not None:
                        return [k, *rest]
            return None

        chosen = assign(0, frozenset())
        if chosen is not None:
            self.assigned = {name: self.files[k] for name, k in zip(names, chosen, strict=True)}
            return None
        listing = ", ".join(names) or "nothing"
        for name in names:
            mine = {k: p for (n, k), p in problems.items() if n == name}
            if not mine:
                return (f"broke {FSYNC_RULE}: the directory holds {listing}: no file was "
                        f"named {name!r} since its last fsync (a name invented)")
            if all(p is not None for p in mine.values()):
                ranked = sorted(mine.items(), key=lambda kp: self.files[kp[0]].name != name)
                text = f"file {name!r} {ranked[0][1]}"
                for k, problem in ranked[1:]:     # another file once had the name
                    f = self.files[k]
                    text += (f"; or, as the file named {' then '.join(map(repr, f.names))} "
                             f"since {f.versions[0].how}: {problem}")
                return text
        for k in sorted(required):
            f = self.files[k]
            if not any(n in found for n in f.names):
                return (f"broke {FSYNC_RULE}: the directory holds {listing}: the file "
                        f"fsync'd as {f.names[0]!r} ({f.versions[0].how}) is missing")
        return (f"broke {FSYNC_RULE}: the directory holds {listing}: no way to give each "
                "name one file whose state is allowed (one file under two names?)")


def read_files(fs: FileSystem) -> dict[str, bytes]:
    """Every file at the top of ``fs`` and its bytes: what a power cut left."""
    found: dict[str, bytes] = {}
    for name in sorted(fs.listdir("")):
        fd = fs.open(name, os.O_RDONLY)
        try:
            size = fs.fstat(fd).st_size
            found[name] = bytes(fs.pread(fd, size, 0)) if size else b""
        finally:
            fs.close(fd)
    return found
