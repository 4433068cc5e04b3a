"""Power cuts on file systems: runs of random writes, truncates, fsyncs and renames over
a few files, a power cut at the end of each round, and after each cut every name, size
and byte checked against what the cut may leave (docs/powercut.md).

The rules, per file, since its last fsync (or since it was created, when it never was):

- its size is one it has had since then (the fsync'd size when nothing changed it);
- each ``unit`` (a page, or the target's ``power_cut_unit``) inside that size reads as
  the unit did in one of the file's states since then, and a unit past the fsync'd size
  only as in a state whose size covered it: the data of an extension lands before the
  size does, never zeros or garbage in its place;
- it is found under one of the names it has had since then, under one name only; a
  file fsync'd since its last rename, and never replaced since, must be found;
- and nothing is invented: every name found is one some file has had since its fsync.

fsync makes the file's data, size and present name durable (as the journalling file
systems do; POSIX asks for an fsync of the directory for the name). After the cut,
what is found is the new durable state of every file.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Iterator, Sequence

from pytest_folio.targets.protocols import FileSystem, PowerCut, power_cut_unit

SCHEDULES = ("fsync", "writes", "renames")
NAMES = ("a", "b", "c", "d")
MAX_END = 192 << 10         # files stay below this: every state is kept whole


@dataclasses.dataclass(frozen=True)
class FsOp:
    """One operation of a run; ``name`` is the file's name when the op runs."""

    kind: str               # write, truncate, fsync, rename, cut
    name: str = ""
    offset: int = 0         # write: where; truncate: the new size
    length: int = 0
    tag: int = 0            # write: which data
    to: str = ""            # rename: the new name

    def __str__(self) -> str:
        if self.kind == "write":
            return f"write {self.name} {self.offset:#x} {self.length:#x} (data {self.tag})"
        if self.kind == "truncate":
            return f"truncate {self.name} {self.offset:#x}"
        if self.kind == "rename":
            return f"rename {self.name} {self.to}"
        if self.kind == "fsync":
            return f"fsync {self.name}"
        return "power cut"


CUT = FsOp("cut")


def data_of(op: FsOp) -> bytes:
    """A write's bytes: reproducible from its tag, never a zero byte (so a hole or a lost
    write can never pass for data)."""
    return random.Random(op.tag).randbytes(op.length).replace(b"\0", b"\x5a")


def fs_powercut_ops(seed: int, rounds: int, schedule: str) -> list[FsOp]:
    """``rounds`` rounds of random operations over the files ``a``..``d``, each ending in
    a power cut: ``fsync`` right after fsyncs; ``writes`` after writes and truncates that
    follow them; ``renames`` the same with as many renames as writes."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}")
    rng = random.Random(seed)
    renames = 0.35 if schedule == "renames" else 0.1

    def change() -> FsOp:
        pick = rng.random()
        name = rng.choice(NAMES)
        if pick < renames:
            return FsOp("rename", name, to=rng.choice([n for n in NAMES if n != name]))
        if pick < renames + 0.15:
            return FsOp("truncate", name, rng.randrange(MAX_END))
        offset = rng.choice((0, rng.randrange(MAX_END - 1), rng.randrange(16) << 12))
        length = rng.choice((rng.randrange(1, 300), rng.randrange(1, 40 << 10), 4096))
        return FsOp("write", name, offset, min(length, MAX_END - offset),
                    rng.getrandbits(32))

    ops: list[FsOp] = []
    for _ in range(rounds):
        ops += [change() for _ in range(rng.randint(2, 6))]
        ops += [FsOp("fsync", name) for name in rng.sample(NAMES, rng.randint(1, 3))]
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
        self.fd: int | None = None

    def changed(self, how: str) -> None:
        if bytes(self.now) != self.versions[-1].data:
            self.versions.append(Version(bytes(self.now), how))

    def fsynced(self, how: str) -> None:
        assert self.name is not None
        self.versions = [Version(bytes(self.now), how)]
        self.names = [self.name]
        self.durable = True

    def check(self, data: bytes, unit: int) -> str | None:
        """None when ``data`` is a state the file may be found in after a cut."""
        sizes = sorted({len(v.data) for v in self.versions})
        if len(data) not in sizes:
            allowed = " or ".join(f"{len(v.data)} ({v.how})" for v in _by_size(self.versions))
            return f"size {len(data)}, allowed {allowed}"
        durable = len(self.versions[0].data)
        for lo in range(0, len(data), unit):
            hi = min(len(data), lo + unit)
            piece = data[lo:hi]
            states = [v for v in self.versions if len(v.data) >= hi or hi <= durable]
            if any(_padded(v.data, lo, hi) == piece for v in states):
                continue
            for i in range(lo, hi):
                values = {_padded(v.data, i, i + 1) for v in states}
                if data[i:i + 1] not in values:
                    allowed = " or ".join(
                        f"{_padded(v.data, i, i + 1)[0]:#04x} ({v.how})"
                        for v in _first_of_each(states, i)) or "nothing"
                    return (f"byte {i:#x} (of {len(data)}) read {data[i]:#04x}, allowed "
                            f"{allowed}")
            return (f"the {unit}-byte unit at {lo:#x} mixes two of its states (a cut "
                    "tore a unit the file system lands whole)")
        return None


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
    """Applies a run's operations to ``fs`` and checks each cut. With ``fs`` None the
    operations only move the states: the replay that checks, after a real power cut,
    what another run (another boot) did."""

    def __init__(self, fs: FileSystem | None, unit: int | None = None) -> None:
        self.fs = fs
        self.unit = unit if unit is not None else power_cut_unit(fs)
        self.files: list[FileStates] = []
        self.assigned: dict[str, FileStates] = {}    # by the last match that passed
        self.cuts = 0

    def named(self, name: str) -> FileStates | None:
        return next((f for f in self.files if f.name == name), None)

    def opened(self, name: str, how: str) -> FileStates:
        """The file ``name`` (created empty when there is none), open."""
        f = self.named(name)
        if f is None:
            f = FileStates(name, b"", how, durable=False)
            self.files.append(f)
        if f.fd is None and self.fs is not None:
            f.fd = self.fs.open(name, os.O_RDWR | os.O_CREAT)
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
        fs = self.fs
        if op.kind in ("write", "truncate", "fsync"):
            f = self.opened(op.name, how)
            if fs is not None:
                assert f.fd is not None
                self.call(fs, f.fd, op)
            if op.kind == "fsync":
                f.fsynced(how)
                return
            if op.kind == "write":
                data = data_of(op)
                if len(f.now) < op.offset:
                    f.now += bytes(op.offset - len(f.now))
                f.now[op.offset:op.offset + len(data)] = data
            else:
                f.now = (f.now + bytes(max(0, op.offset - len(f.now))))[:op.offset]
            f.changed(how)
        elif op.kind == "rename":
            moved = self.named(op.name)
            if moved is None or op.to == op.name:
                return                  # nothing of that name now: the op does nothing
            if fs is not None:
                fs.rename(op.name, op.to)
            replaced = self.named(op.to)
            if replaced is not None:
                replaced.name = None
                replaced.durable = False    # may be gone, if the rename reached the disk
            moved.name = op.to
            moved.names.append(op.to)       # found under the old name or the new
        elif op.kind == "cut":
            if not isinstance(fs, PowerCut):
                raise TypeError(f"{type(fs).__name__} has no power_cut()")
            fs.power_cut()
            self.after_cut(how)
            self.cuts += 1
        else:
            raise ValueError(f"a power-cut run has no {op.kind!r} operation")

    @staticmethod
    def call(fs: FileSystem, fd: int, op: FsOp) -> None:
        """The file system's side of a write, truncate or fsync."""
        if op.kind == "write":
            data = data_of(op)
            written = fs.pwrite(fd, data, op.offset)
            if written != len(data):
                raise OSError(0, f"short write: {written} of {len(data)} bytes")
        elif op.kind == "truncate":
            fs.ftruncate(fd, op.offset)
        else:
            fs.fsync(fd)

    def after_cut(self, how: str) -> None:
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
        which); else what is wrong."""
        problems: dict[tuple[str, int], str | None] = {}
        for name, data in found.items():
            for k, f in enumerate(self.files):
                if name in f.names:
                    problems[name, k] = f.check(data, self.unit)
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
                return (f"the directory holds {listing}: no file was named {name!r} since "
                        "its last fsync (a name invented)")
            if all(p is not None for p in mine.values()):
                ranked = sorted(mine.items(), key=lambda kp: self.files[kp[0]].name != name)
                text = f"file {name!r}: {ranked[0][1]}"
                for k, problem in ranked[1:]:     # another file once had the name
                    f = self.files[k]
                    text += (f"; or, as the file named {' then '.join(map(repr, f.names))} "
                             f"since {f.versions[0].how}: {problem}")
                return text
        for k in sorted(required):
            f = self.files[k]
            if not any(n in found for n in f.names):
                return (f"the directory holds {listing}: the file fsync'd as {f.names[0]!r} "
                        f"({f.versions[0].how}) is missing")
        return (f"the directory holds {listing}: no way to give each name one file whose "
                "state is allowed (one file under two names?)")


def read_files(fs: FileSystem) -> dict[str, bytes]:
    """Every file at the top of ``fs`` and its bytes: what a power cut left."""
    found: dict[str, bytes] = {}
    for name in sorted(fs.listdir("")):
        fd = fs.open(name, os.O_RDONLY)
        try:
            size = fs.fstat(fd).st_size
            found[name] = fs.pread(fd, size, 0) if size else b""
        finally:
            fs.close(fd)
    return found
