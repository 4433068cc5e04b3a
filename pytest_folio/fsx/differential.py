"""Differential runs: one random operation sequence on two file systems, every outcome
compared (``--folio-fs-oracle``, on by default against a user's target, and the
project's own reference-against-kernel tests).

:func:`supported` decides, in one place, which operation families a target has (its
features, :func:`~pytest_folio.targets.capabilities.working_features`, and what only a
probe tells: which fallocate modes work, whether its directories work, how far its files
reach).
:func:`generate` makes a target-independent sequence from a seed over every call of the
FileSystem protocol (:data:`CALLS`: a test checks that none is missing) within those
families: every open-flag combination, several descriptors on one file, names with and
without a trailing slash, namespace calls while files are open, fsync and drop_caches
then reopen, and offsets in three regions: near 0 (folio and block boundaries, and
around EOF, :data:`Anchor`), sparse far offsets around 4 GiB and 16 TiB, and the last
pages below ``MAX_LFS_FILESIZE``. :func:`compare` applies each operation to both and
stops at the first difference in a return value, errno, the bytes read or a size, then
compares every file's size and bytes (near 0, around the far offsets and before EOF) and
every directory's names.

Where Linux leaves a choice, nothing depends on it (docs/fs.md lists them): a mapped
write is sent only where its bytes are defined (inside the file; entirely past the page
holding EOF, where both must fault), never as a zero-length call; an operation with two
bad arguments at once (a descriptor that cannot do it, and an offset out of range) may
fail with either errno. Not compared: st_blocks, modes, link counts, times, directory
sizes, the result of drop_caches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import json
import os
import random
import re
import stat
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from pytest_folio import coverage
from pytest_folio.bytescmp import first_difference as first_difference_at
from pytest_folio.errors import errno_of
from pytest_folio.inputs import excerpt, read_log
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.linux.uapi import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
    FALLOC_MODE_FEATURE,
)
from pytest_folio.model.vfs import MAX_LFS_FILESIZE, NAME_MAX, name_too_long
from pytest_folio.shrink import ddmin
from pytest_folio.targets.answers import FS_RULES, AnswerError, answering
from pytest_folio.targets.capabilities import working_features
from pytest_folio.targets.protocols import (
    AnyFileSystem,
    DropCaches,
)

Op = tuple[Any, ...]
Outcome = tuple[str, Any]
# An offset or length relative to the file's size when the operation runs:
# ("eof", align, delta) is the size rounded up to ``align``, plus ``delta`` (within 0 and
# MAX_LFS_FILESIZE: an off_t). Both sides resolve it from their own fstat, which the
# comparison keeps equal.
Anchor = tuple[str, int, int]

SLOTS = 4
MAXLEN = 12 * PAGE_SIZE
FILES = ["a", "b", "a", "b", "d/c", "d/e/f"]
DIRS = ["d", "d/e", "g"]
FLAT = ["a", "b", "c"]              # the names of a target without directories
# names from NAME_MAX - 1 to NAME_MAX + 1 bytes (ENAMETOOLONG), two of 241 bytes that
# differ only in their last (a name cache keyed by a prefix, or names cut short, mix
# them), one of 100 between the short names and those, and two of two-byte characters,
# NAME_MAX and NAME_MAX + 1 bytes in 128 characters (NAME_MAX counts bytes, not
# Python's characters)
LONG_NAMES = ["m" * (NAME_MAX - 1), "n" * NAME_MAX, "o" * (NAME_MAX + 1),
              "p" * 240 + "1", "p" * 240 + "2", "q" * 100,
              "\u00e9" * (NAME_MAX // 2) + "r", "\u00e9" * (NAME_MAX // 2 + 1)]
FAR = [1 << 32, 1 << 44]            # 4 GiB (32-bit offsets), 16 TiB (32-bit page indexes)
BIG = 1 << 20                       # a bulk transfer: files of several MiB pass any cache
NEAR = 8 << 20                      # the final comparison reads files up to here, and...
WINDOW = 64 << 10                   # ...this much around each far offset and before EOF
# the scales whose boundaries lengths and offsets land on, next to and between: the
# largest transfer, a large folio, the largest folio (PMD)
SCALES = [64 << 10, 1 << 20, 2 << 20]
# a pwrite or mapped write's data: an int tag is random bytes (:func:`pattern`); two hex
# digits are that byte repeated ("00", "ff"); "same TAG" rewrites an earlier write's
# bytes where they still are (the generator repeats that write)
Fill = int | str
SCENARIOS = .015                    # the share of draws that are a :meth:`_Gen.scenario`
MODE_FEATURE = FALLOC_MODE_FEATURE
# invalid combinations: vfs_fallocate refuses them before the file system is asked
BAD_MODES = [FALLOC_FL_PUNCH_HOLE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE
             | FALLOC_FL_KEEP_SIZE, 0x100]
# refused with EINVAL before Linux 6.13 and EOPNOTSUPP since: never generated
VERSION_DEPENDENT_MODES = [FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_KEEP_SIZE]
# every call of the FileSystem protocol, and the capability calls, with its weight in a
# sequence and the family a target must have for it to be sent (None: every target)
CALLS: dict[str, tuple[int, str | None]] = {
    "open": (10, None), "close": (2, None), "pread": (10, None), "pwrite": (14, None),
    "ftruncate": (5, None), "fstat": (2, None), "fsync": (2, None),
    "fallocate": (6, "fallocate"), "copy_file_range": (3, "copy_range"),
    "mmap_read": (6, "mmap"), "mmap_write": (5, "mmap"), "unlink": (2, None),
    "mkdir": (2, "directories"), "rmdir": (2, "directories"), "rename": (3, None),
    "listdir": (1, None), "stat": (2, None), "drop_caches": (2, "drop_caches"),
}
_PATTERN = random.Random(0x5EED).randbytes(65521)    # a prime period: shifts show
_PROBE = ".folio-oracle-probe"


@functools.cache
def _repeated() -> bytes:
    """The period repeated past a bulk transfer from any start: one slice of it is any
    write up to BIG and a little more (2 MiB, made on first use)."""
    return _PATTERN * (BIG // len(_PATTERN) + 17)


@functools.lru_cache(maxsize=2)
def pattern(n: int, tag: int) -> bytes:
    """``n`` bytes of the data written by the operation tagged ``tag`` (the last two
    kept: a differential run asks for each operation's on both sides)."""
    start = tag * 977 % len(_PATTERN)
    if start + n <= len(_PATTERN):
        return _PATTERN[start:start + n]
    repeated = _repeated()
    if start + n <= len(repeated):
        return repeated[start:start + n]
    return (_PATTERN * ((start + n) // len(_PATTERN) + 1))[start:start + n]


def data_of(n: int, fill: Fill) -> bytes:
    """The ``n`` bytes a write with ``fill`` (see :data:`Fill`) sends."""
    if isinstance(fill, int):
        return pattern(n, fill)
    if fill.startswith("same "):
        return pattern(n, int(fill[5:]))
    return bytes([int(fill, 16)]) * n


def fill_class(fill: Fill) -> str:
    """The class of data a write sends: random, zero, 0xff, one byte, same as there."""
    if isinstance(fill, int):
        return "random"
    if fill.startswith("same "):
        return "same as there"
    return {"00": "zero", "ff": "0xff"}.get(fill, "one byte")


def copy_all(fs: AnyFileSystem, src: int, dst: int, count: int, offset_src: int,
             offset_dst: int) -> int:
    """copy_file_range as cp calls it: again after a short copy, until all is copied
    or it copies nothing. Linux lets any copy be short (XFS copies whole blocks by
    sharing them, then stops), so the total is what both sides must agree on. An
    error after some progress ends the copy short, as a short count would."""
    done = 0
    while done < count:
        try:
            n = fs.copy_file_range(src, dst, count - done, offset_src + done,
                                   offset_dst + done)
        except OSError:
            if not done:
                raise
            break
        if n <= 0:
            break
        done += n
    return done


def supported(fs: AnyFileSystem) -> frozenset[str]:
    """The operation families ``fs`` has: its features (:func:`working_features`: the
    optional calls it has, ``drop_caches`` and ``directories`` among them, narrowed by
    its ``features`` or, without them, by the fallocate modes and copies it answers
    EOPNOTSUPP for), less ``directories`` when its mkdir says EOPNOTSUPP, with
    ``rename_directories`` unless a directory's rename does, and the far offsets its
    files reach (:func:`_file_sizes`), each probed on a scratch name removed again.
    The one place this is decided; nothing of a family ``fs`` lacks is ever sent to it."""
    have = set(working_features(fs))
    if "directories" in have:
        if errno_of(lambda: fs.mkdir(_PROBE)) == errno.EOPNOTSUPP:
            have.discard("directories")
        else:
            moved = _PROBE + "-moved"
            if errno_of(lambda: fs.rename(_PROBE, moved)) != errno.EOPNOTSUPP:
                have.add("rename_directories")
                errno_of(lambda: fs.rmdir(moved))
            errno_of(lambda: fs.rmdir(_PROBE))
    have.update(_file_sizes(fs))
    return frozenset(have)


def _file_sizes(fs: AnyFileSystem) -> set[str]:
    """``offsets_4g``, ``offsets_16t``, ``offsets_max``: the far regions a scratch file
    can be truncated up to (ext4 stops short of 16 TiB; a file system holding files in
    one piece of memory fails at once, which is an answer too)."""
    have: set[str] = set()
    try:
        fd = fs.open(_PROBE, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    except OSError:
        return have
    try:
        for family, size in (("offsets_4g", FAR[0] + BIG), ("offsets_16t", FAR[1] + BIG),
                             ("offsets_max", MAX_LFS_FILESIZE)):
            try:
                fs.ftruncate(fd, size)
            except (OSError, MemoryError, OverflowError):
                break
            have.add(family)
        with contextlib.suppress(OSError):
            fs.ftruncate(fd, 0)
    finally:
        with contextlib.suppress(OSError):
            fs.close(fd)
        with contextlib.suppress(OSError):
            fs.unlink(_PROBE)
    return have


def common(target: AnyFileSystem, oracle: AnyFileSystem) -> frozenset[str]:
    """The families both have (the oracle being the reference, what the target has),
    and drop_caches when the target has it (it changes no answer: each side that has it
    is asked); collapse and insert range only at equal block sizes (they are aligned)."""
    have = supported(target)
    both = have & supported(oracle) | have & {"drop_caches"}
    if target.blocksize != oracle.blocksize:
        both -= {"collapse_range", "insert_range"}
    return both


def fallocate_modes(families: frozenset[str]) -> list[int]:
    """The fallocate modes of those families, and the invalid ones every fallocate must
    refuse alike; none without fallocate."""
    modes = [m for m, f in MODE_FEATURE.items() if f in families]
    return modes + BAD_MODES if modes else []


class _Gen:
    """The arguments of each call, drawn from one seeded random source."""

    def __init__(self, seed: int, families: frozenset[str], maxlen: int, unit: int) -> None:
        self.rnd = random.Random(seed)
        self.families, self.maxlen, self.unit = families, maxlen, unit
        self.modes = fallocate_modes(families)
        self.dirs = "directories" in families
        self.far = [at for at, family in zip(FAR, ("offsets_4g", "offsets_16t"), strict=True)
                    if family in families]
        self.tag = 0
        self.last_write: Op | None = None   # what a write of the same bytes repeats
        self.live: dict[int, int] = {}      # slot -> open flags, as the sequence guesses
        self.made: set[str] = set()         # top-level files, as it guesses

    def slot(self, access: str = "") -> int:
        """A slot, most often one this sequence opened on a file with the ``access``
        (``r``, ``w``, ``rw``) the call needs, else any: closed and unfit slots get
        their share of calls for the errors, but most calls reach the data. The guess
        comes from the sequence alone, so it is the same for every target."""
        fit = [s for s, flags in sorted(self.live.items()) if _allows(flags, access)]
        if fit and self.rnd.random() < .85:
            return self.rnd.choice(fit)
        return self.rnd.randrange(SLOTS)

    def free_slot(self) -> int:
        """A slot for an open: mostly one not holding a file already."""
        free = [s for s in range(SLOTS) if s not in self.live]
        if free and self.rnd.random() < .7:
            return self.rnd.choice(free)
        return self.rnd.randrange(SLOTS)

    def opened(self, slot: int, name: str, flags: int) -> None:
        """Guess whether an open succeeds: a top-level file, created or made before."""
        if ("/" not in name and not flags & (os.O_EXCL | os.O_DIRECTORY)
                and not name_too_long(name)
                and (flags & os.O_CREAT or name in self.made)):
            self.live[slot] = flags
            self.made.add(name)
        else:
            self.live.pop(slot, None)

    def moved(self, kind: str, names: tuple[str, ...]) -> None:
        """Follow unlink and rename of the files the sequence made."""
        if kind in ("unlink", "rename") and names[0] in self.made:
            self.made.discard(names[0])
            if kind == "rename" and "/" not in names[1]:
                self.made.add(names[1])

    def name(self, dirs: bool = True, p_dir: float = .35) -> str:
        """A name, now and then with a trailing slash; a directory's with ``p_dir``."""
        rnd = self.rnd
        if rnd.random() < .06:
            base = rnd.choice(LONG_NAMES)
            if self.dirs and rnd.random() < .25:
                base = rnd.choice(DIRS) + "/" + base
        elif not self.dirs:
            base = rnd.choice(FLAT)
        elif dirs and rnd.random() < p_dir:
            base = rnd.choice(DIRS)
        else:
            base = rnd.choice(FILES)
        # no trailing slash on a name over NAME_MAX: open(O_CREAT) of one is EISDIR in
        # Linux (the slash is checked before the lookup), ENAMETOOLONG in the reference
        slash = rnd.random() < .07 and not name_too_long(base.rsplit("/", 1)[-1])
        return base + "/" if slash else base

    def flags(self) -> int:
        rnd = self.rnd
        flags = rnd.choices([os.O_RDWR, os.O_RDONLY, os.O_WRONLY], [5, 2, 1])[0]
        for bit, p in ((os.O_CREAT, .75), (os.O_APPEND, .12), (os.O_TRUNC, .08),
                       (os.O_EXCL, .05), (os.O_DIRECTORY, .04)):
            if rnd.random() < p:
                flags |= bit
        if flags & os.O_CREAT and flags & os.O_DIRECTORY:  # EINVAL only since Linux 6.4
            flags &= ~os.O_DIRECTORY
        return flags

    def length(self) -> int:
        rnd, unit = self.rnd, self.unit
        if rnd.random() < .05:
            return self.long_length()
        return rnd.choice([0, 1, 100, PAGE_SIZE, unit, unit + 904, PAGE_SIZE - 1,
                           PAGE_SIZE + 1, rnd.randrange(self.maxlen // 2)])

    def long_length(self) -> int:
        """A bulk transfer: a :data:`SCALES` size, one byte or a sector either side of
        it, an odd length or an odd number of sectors between it and twice it (a
        multiple of no power of two above 512), or a few MiB and some."""
        rnd = self.rnd
        scale = rnd.choice(SCALES)
        pick = rnd.randrange(6)
        if pick < 3:
            return scale + rnd.choice([-512, -1, 0, 1, 512, -1, 1])
        if pick == 3:
            return rnd.randrange(scale, 2 * scale) | 1
        if pick == 4:
            return rnd.randrange(scale // 512, 2 * scale // 512) * 512 | 512
        return rnd.randrange(3, 6) * BIG + rnd.randrange(1, PAGE_SIZE)

    def fill(self) -> Fill:
        """A write's data: mostly random, else zeroes, 0xff or one other byte."""
        pick = self.rnd.random()
        if pick < .8:
            return self.next_tag()
        if pick < .9:
            return "00"
        if pick < .95:
            return "ff"
        return f"{self.rnd.randrange(1, 255):02x}"

    def offset(self) -> int | Anchor:
        rnd, unit = self.rnd, self.unit
        region = rnd.random()
        if region < .2:
            return self.anchor()
        if region < .28 and self.far:
            return rnd.choice(self.far) + rnd.choice([0, 0, 1, -1, 100, -100, PAGE_SIZE,
                                                      -PAGE_SIZE, unit, -unit])
        if region < .31 and "offsets_max" in self.families:
            return MAX_LFS_FILESIZE - rnd.choice([0, 1, 4, 100, PAGE_SIZE - 1, PAGE_SIZE,
                                                  PAGE_SIZE + 1, 2 * PAGE_SIZE, unit,
                                                  unit + PAGE_SIZE])
        if region < .33:
            return rnd.choice(SCALES) * rnd.randrange(1, 4) + rnd.choice([-1, 0, 1, -512,
                                                                          512])
        return rnd.choice([0, unit, 3 * unit, unit - 1, unit + 1, PAGE_SIZE,
                           rnd.randrange(self.maxlen), rnd.randrange(16) * unit // 2])

    def anchor(self) -> Anchor:
        """Around EOF: the size itself, the end of its page, the end of its block."""
        rnd = self.rnd
        return ("eof", rnd.choice([1, PAGE_SIZE, self.unit]),
                rnd.choice([0, 0, 1, -1, 100, -100, PAGE_SIZE, -PAGE_SIZE, self.unit]))

    def next_tag(self) -> int:
        self.tag += 1
        return self.tag

    def scenario(self) -> list[Op]:
        """Calls in a row that random draws seldom line up, on one file through two
        descriptors: data written through one and fsynced through the other, evicted,
        read back, overwritten with zeroes or the same bytes, fsynced through the
        first, evicted and read back again."""
        rnd = self.rnd
        name = rnd.choice(FLAT[:2] + LONG_NAMES[1:2] + LONG_NAMES[3:])
        first, second = rnd.sample(range(SLOTS), 2)
        create = os.O_RDWR | os.O_CREAT
        length = rnd.choice([1, 100, PAGE_SIZE - 1, self.unit, self.unit + 904,
                             self.long_length()])
        offset = rnd.choice([0, 1, PAGE_SIZE, self.unit, rnd.randrange(self.maxlen)])
        tag = self.next_tag()
        evict: list[Op] = [("drop_caches", name)] if "drop_caches" in self.families else []
        self.opened(first, name, create)
        self.opened(second, name, os.O_RDWR)
        self.live.pop(first, None)
        return [("open", first, name, create), ("open", second, name, os.O_RDWR),
                ("pwrite", first, length, offset, tag), ("fsync", second), *evict,
                ("pread", second, length, offset),
                ("pwrite", second, length, offset, rnd.choice(["00", f"same {tag}"])),
                ("fsync", first), *evict, ("pread", second, length, offset),
                ("close", first)]

    def op(self, kind: str) -> Op:
        rnd, slot = self.rnd, self.slot
        if kind == "open":
            at, name, flags = self.free_slot(), self.name(p_dir=.08), self.flags()
            self.opened(at, name, flags)
            return (kind, at, name, flags)
        if kind == "close":
            at = slot()
            self.live.pop(at, None)
            return (kind, at)
        if kind in ("fstat", "fsync"):
            return (kind, slot())
        if kind == "pread":
            return (kind, slot("r"), self.length(), self.offset())
        if kind == "pwrite":
            last = self.last_write
            if last is not None and rnd.random() < .04:
                return (*last[:4], f"same {last[4]}")
            op = (kind, slot("w"), self.length(), self.offset(), self.fill())
            if isinstance(op[3], int) and isinstance(op[4], int):
                self.last_write = op
            return op
        if kind == "ftruncate":
            return (kind, slot("w"), rnd.choice([0, 100, self.unit + 904,
                                                 rnd.randrange(self.maxlen), self.offset()]))
        if kind == "mmap_read":
            return (kind, slot("r"), self.offset(),
                    rnd.choice([1, 100, PAGE_SIZE, 9000, self.unit]))
        if kind == "mmap_write":
            return (kind, slot("rw"), self.offset(), rnd.choice([1, 100, 5000, self.unit]),
                    self.fill())
        if kind == "copy_file_range":
            if rnd.random() < .4:       # whole blocks, as a reflink-capable one shares them
                return (kind, slot("r"), slot("w"), rnd.randrange(1, 4) * self.unit,
                        rnd.randrange(4) * self.unit, rnd.randrange(4) * self.unit)
            return (kind, slot("r"), slot("w"), self.length(), self.offset(), self.offset())
        if kind == "fallocate":
            mode = rnd.choice(self.modes)
            if mode in (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE) and rnd.random() < .8:
                return (kind, slot("w"), mode, rnd.randrange(8) * self.unit,
                        rnd.randrange(1, 3) * self.unit)
            return (kind, slot("w"), mode, self.offset(), self.length())
        names: tuple[str, ...]
        if kind == "rename":
            dirs = "rename_directories" in self.families
            names = (self.name(dirs), self.name(dirs))
        elif kind == "mkdir":
            names = (rnd.choice(DIRS) + rnd.choice(["", "", "", "/"]),)
        else:
            names = (self.name(),)
        self.moved(kind, names)
        return (kind, *names)


def _allows(flags: int, access: str) -> bool:
    """Whether a descriptor opened with ``flags`` can do a call needing ``access``:
    ``r`` reads, ``w`` writes (not appending: positioned writes and copies into an
    O_APPEND file are refused), ``rw`` a shared writable mapping."""
    mode = flags & os.O_ACCMODE
    if "r" in access and mode == os.O_WRONLY:
        return False
    if "w" in access and (mode == os.O_RDONLY or (flags & os.O_APPEND and access == "w")):
        return False
    return access != "rw" or mode == os.O_RDWR


def generate(seed: int, families: frozenset[str], count: int = 600, maxlen: int = MAXLEN,
             unit: int = PAGE_SIZE) -> list[Op]:
    """``count`` operations from ``seed`` within ``families`` (see :func:`supported`);
    near offsets and lengths gather on multiples of ``unit`` (collapse and insert ranges
    are made of them) within ``maxlen``."""
    gen = _Gen(seed, families, maxlen, unit)
    kinds = [k for k, (_, family) in CALLS.items() if family is None or family in families]
    if not gen.modes and "fallocate" in kinds:
        kinds.remove("fallocate")
    weights = [CALLS[k][0] for k in kinds]
    ops: list[Op] = []
    for kind in gen.rnd.choices(kinds, weights, k=count):
        if gen.rnd.random() < SCENARIOS:
            ops += gen.scenario()
        else:
            ops.append(gen.op(kind))
    return ops[:count]


# -- the log: a failing sequence, saved and replayed ----------------------------------------
LOG_HEADER = "# pytest-folio differential log 1: one operation a line, as JSON"


def dump_ops(ops: list[Op]) -> str:
    """The ``.fsdiff`` text of ``ops`` (``--folio-fs-oracle-replay`` reads it back)."""
    return "\n".join([LOG_HEADER, *(json.dumps(op) for op in ops)]) + "\n"


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


# What a replayed operation may hold: its data is built in memory (a pwrite's pattern, a
# pread's buffer), so a length is bounded well above any generated one (BIG, a few
# blocks); offsets are a loff_t's, anchors as :data:`Anchor` says.
MAX_REPLAY_LENGTH = 64 << 20
PATH_MAX = 4096
_LOFF_T = (-(1 << 63), (1 << 63) - 1)
# Each call's arguments after its name, as generate() makes them.
_ARGS: dict[str, tuple[str, ...]] = {
    "open": ("slot", "name", "flags"), "close": ("slot",), "fstat": ("slot",),
    "fsync": ("slot",), "pread": ("slot", "length", "offset"),
    "pwrite": ("slot", "length", "offset", "tag"), "ftruncate": ("slot", "offset"),
    "mmap_read": ("slot", "offset", "length"), "mmap_write": ("slot", "offset", "length", "tag"),
    "copy_file_range": ("slot", "slot", "length", "offset", "offset"),
    "fallocate": ("slot", "flags", "offset", "length"), "rename": ("name", "name"),
    **{kind: ("name",) for kind in ("unlink", "mkdir", "rmdir", "listdir", "stat",
                                    "drop_caches")},
}


def _integer(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _bad_argument(kind: str, value: Any) -> str | None:
    """Why ``value`` cannot be an argument of that kind (None when it can)."""
    if kind == "slot":
        return None if _integer(value, 0, SLOTS - 1) else f"a slot from 0 to {SLOTS - 1}"
    if kind == "length":
        return None if _integer(value, 0, MAX_REPLAY_LENGTH) else (
            f"a length from 0 to {MAX_REPLAY_LENGTH >> 20} MiB")
    if kind == "tag" and isinstance(value, str):
        byte, same, tag = value.partition("same ")
        if (not same and re.fullmatch(r"[0-9a-f]{2}", value)) or (
                same and not byte and tag.isdigit() and int(tag) < 1 << 32):
            return None
        return 'data: a tag, two hex digits ("00") or "same TAG"'
    if kind in ("flags", "tag"):
        return None if _integer(value, 0, (1 << 32) - 1) else f"{kind}: an integer of 32 bits"
    if kind == "offset":
        if _integer(value, *_LOFF_T):
            return None
        if (isinstance(value, tuple) and len(value) == 3 and value[0] == "eof"
                and _integer(value[1], 1, 1 << 32) and _integer(value[2], *_LOFF_T)):
            return None
        return "an offset (a 64-bit integer or [\"eof\", ALIGN >= 1, DELTA])"
    parts = value.rstrip("/").split("/") if isinstance(value, str) else []
    # a part may pass NAME_MAX: the generator makes such names, for ENAMETOOLONG
    if (not parts or value.startswith("/") or "\0" in value or len(value) > PATH_MAX
            or any(part in ("", ".", "..") for part in parts)):
        return "a relative name without '.' or '..' (like d/c)"
    return None


def load_ops(text: str, where: str = "log") -> list[Op]:
    """Operations from ``.fsdiff`` text; ValueError naming the line when one is not an
    operation generate() could have made (the call's arguments, each in its range)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != LOG_HEADER:
        raise ValueError(f"{where}: not a differential log (the first line is not "
                         f"{LOG_HEADER!r})")
    ops: list[Op] = []
    for number, line in enumerate(lines[1:], 2):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            op = _tuples(json.loads(line))
        except (ValueError, RecursionError) as exc:     # ValueError: JSONDecodeError too
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
            raise ValueError(f"{where}:{number}: not JSON ({reason}): {excerpt(line)}") from None
        if not isinstance(op, tuple) or not op or not isinstance(op[0], str) \
                or op[0] not in _ARGS:
            raise ValueError(f"{where}:{number}: not an operation: {excerpt(line.strip())}")
        kinds = _ARGS[op[0]]
        if len(op) != len(kinds) + 1:
            raise ValueError(f"{where}:{number}: {op[0]} takes {len(kinds)} arguments "
                             f"({', '.join(kinds)}), not {len(op) - 1}")
        for at, (kind, value) in enumerate(zip(kinds, op[1:], strict=True), 1):
            why = _bad_argument(kind, value)
            if why is not None:
                raise ValueError(f"{where}:{number}: {op[0]} argument {at} must be {why}, "
                                 f"not {excerpt(json.dumps(value))}")
        ops.append(op)
    return ops


def read_fsdiff(path: str | os.PathLike[str]) -> list[Op]:
    """The operations of a ``.fsdiff`` file, read as every log is (:func:`read_log`:
    a regular file, bounded); ValueError of one line otherwise."""
    return load_ops(read_log(path, ValueError), os.fspath(path))


# -- running and comparing --------------------------------------------------------------------
def describe(op: Op) -> str:
    """An operation as a call, with the arguments actually passed:
    ``pwrite(slot 1, 100 bytes, at 4096)``."""
    kind, *args = op
    if kind == "pwrite":
        return f"pwrite(slot {args[0]}, {args[1]} bytes{_of(args[3])}, at {args[2]})"
    if kind == "mmap_write":
        return f"mmap_write(slot {args[0]}, at {args[1]}, {args[2]} bytes{_of(args[3])})"
    if kind == "open":
        return f"open(slot {args[0]}, {args[1]!r}, {_flags(args[2])})"
    if kind == "copy_file_range":
        return (f"copy_file_range(slot {args[0]} -> slot {args[1]}, {args[2]} bytes, "
                f"{args[3]} -> {args[4]})")
    if kind == "fallocate":
        return f"fallocate(slot {args[0]}, mode {args[1]:#x}, {args[2]}, {args[3]})"
    if kind in ("close", "fstat", "fsync", "pread", "ftruncate", "mmap_read"):
        return f"{kind}(slot {args[0]}{''.join(f', {a}' for a in args[1:])})"
    return f"{kind}({', '.join(map(repr, args))})"


def _of(fill: Fill) -> str:
    """How :func:`describe` names a write's data when it is not random bytes."""
    kind = fill_class(fill)
    return "" if kind == "random" else f" of {kind}" if kind != "one byte" else (
        f" of 0x{fill}")


def _flags(flags: int) -> str:
    words = [{os.O_RDONLY: "O_RDONLY", os.O_WRONLY: "O_WRONLY",
              os.O_RDWR: "O_RDWR"}.get(flags & os.O_ACCMODE, hex(flags & os.O_ACCMODE))]
    words += [name for name in ("O_CREAT", "O_EXCL", "O_TRUNC", "O_APPEND", "O_DIRECTORY")
              if flags & getattr(os, name)]
    return "|".join(words)


def short(outcome: Outcome) -> str:
    """An outcome in a few words: ``ok 100``, ``err EBADF``, ``ok 4096 bytes 5a5a...``."""
    kind, value = outcome
    if isinstance(value, bytes):
        if len(value) <= 16:
            return f"{kind} {value!r}"
        return f"{kind} {len(value)} bytes {value[:8].hex()}...{value[-8:].hex()}"
    return f"{kind} {value!r}" if value is not None else kind


def _range(op: Op) -> tuple[int, int] | None:
    """The file range a resolved operation touches (fsx marks those with ``*``)."""
    kind, *args = op
    if kind in ("pwrite", "pread"):
        return args[2], args[2] + args[1]
    if kind in ("mmap_read", "mmap_write"):
        return args[1], args[1] + args[2]
    if kind == "ftruncate":
        return min(args[1], MAX_LFS_FILESIZE), MAX_LFS_FILESIZE
    if kind == "fallocate":
        return args[2], args[2] + args[3]
    if kind == "copy_file_range":
        return args[4], args[4] + args[2]
    return None


@dataclasses.dataclass
class _Slot:
    fd: int = -1
    flags: int = 0
    is_dir: bool = False
    name: str = ""


class Runner:
    """Applies operations to one file system, remembering what each slot holds.

    ``clip_mapped_writes``: a mapped write is sent only where Linux defines its bytes
    (see :meth:`mapped_length`); off, it is sent as generated (the reference against
    ramfs and tmpfs, which keep what a mapping stores past EOF in the EOF page). The
    file system is put behind the answer rules (:mod:`pytest_folio.targets.answers`), so
    outcomes hold what storage promises in one shape (None from a call with nothing to
    say, bytes from a read, the count from a write, names sorted)."""

    def __init__(self, fs: AnyFileSystem, *, clip_mapped_writes: bool = True,
                 drop_caches: bool = True) -> None:
        self.fs = answering(fs, FS_RULES)
        self.slots = [_Slot() for _ in range(SLOTS)]
        self.clip_mapped_writes = clip_mapped_writes
        self.drop = drop_caches and isinstance(fs, DropCaches)

    def size(self, slot: int) -> int:
        """The size of the slot's file; 0 for a directory (whose size is not compared)
        or a closed slot."""
        try:
            st = self.fs.fstat(self.slots[slot].fd)
        except OSError:
            return 0
        return st.st_size if stat.S_ISREG(st.st_mode) else 0

    def resolve(self, op: Op) -> Op:
        """``op`` with every :data:`Anchor` turned into a number, from this side's size
        of the file the slot holds, and a mapped write's length as it is sent."""
        kind = op[0]
        if not any(isinstance(a, tuple) for a in op) and kind != "mmap_write":
            return op
        size: int | None = None
        out = []
        for arg in op:
            if isinstance(arg, tuple):
                if size is None:
                    size = self.size(op[1])
                _, align, delta = arg
                arg = min(max(0, -(-size // align) * align + delta), MAX_LFS_FILESIZE)
            out.append(arg)
        if kind == "mmap_write" and self.clip_mapped_writes:
            out[3] = self.mapped_length(out[1], out[2], out[3])
        return tuple(out)

    def mapped_length(self, slot: int, offset: int, length: int) -> int:
        """What of a mapped write Linux defines: the part inside the file; all of it
        when it lies entirely past the page holding EOF (both sides must fault); nothing
        (the write is not sent) when it starts past EOF inside that page, where a disk
        file system's writeback zeroes what ramfs and tmpfs keep."""
        size = self.size(slot)
        if offset >= -(-size // PAGE_SIZE) * PAGE_SIZE:
            return length
        return max(0, min(length, size - offset))

    def apply(self, op: Op) -> Outcome:
        """Apply a resolved operation: ``ok`` and its result, ``err`` and the errno's
        name, or ``not sent`` (a mapped write of no bytes: no call at all)."""
        try:
            return ("ok", self._apply(op))
        except OSError as exc:
            return ("err", errno.errorcode.get(exc.errno or 0, exc.errno))

    def _apply(self, op: Op) -> Any:
        fs, slots = self.fs, self.slots
        kind, *args = op
        if kind == "open":
            slot = slots[args[0]]
            if slot.fd >= 0:
                fs.close(slot.fd)
                slot.fd = -1
            fd = fs.open(args[1], args[2], 0o644)
            slots[args[0]] = _Slot(fd, args[2], stat.S_ISDIR(fs.fstat(fd).st_mode), args[1])
            return None
        if kind == "close":
            slot = slots[args[0]]
            fd, slot.fd = slot.fd, -1
            return fs.close(fd)
        if kind == "fstat":
            st = fs.fstat(slots[args[0]].fd)
            return st.st_size if stat.S_ISREG(st.st_mode) else "dir"
        if kind == "stat":
            st = fs.stat(args[0])
            return st.st_size if stat.S_ISREG(st.st_mode) else "dir"
        if kind == "drop_caches":
            if self.drop:
                assert isinstance(fs, DropCaches)
                with contextlib.suppress(OSError):   # a name that is gone: nothing to drop
                    fs.drop_caches(args[0])
            return None
        if kind == "copy_file_range":
            return copy_all(fs, slots[args[0]].fd, slots[args[1]].fd, *args[2:])
        if kind in ("unlink", "mkdir", "rmdir", "rename", "listdir"):
            return getattr(fs, kind)(*args)
        fd = slots[args[0]].fd
        if kind == "pread":
            return fs.pread(fd, args[1], args[2])
        if kind == "pwrite":
            return fs.pwrite(fd, data_of(args[1], args[3]), args[2])
        if kind == "mmap_write":
            if not args[2]:
                return "not sent"
            return fs.mmap_write(fd, args[1], data_of(args[2], args[3]))
        if kind == "mmap_read":
            return fs.mmap_read(fd, args[1], args[2])
        return getattr(fs, kind)(fd, *args[1:])

    def two_bad_arguments(self, op: Op) -> bool:
        """Whether ``op`` has a descriptor that cannot do it and an offset out of range
        at once, or is a rename between a directory and its own descendant with a
        trailing slash on a name, or a rename with a name over NAME_MAX: Linux checks
        those in an order no other implementation has to share (and 7.2 checks a
        rename's ancestry before its trailing slash, where 6.1 did the other way
        round)."""
        kind, *args = op
        if kind == "rename":
            old, new = (name.rstrip("/") for name in args)
            nested = old.startswith(new + "/") or new.startswith(old + "/")
            # Linux looks a name's length up with the name (simple_lookup): the source's
            # ENOENT comes before the target's ENAMETOOLONG; the reference walks both first
            too_long = any(name_too_long(part) for name in args for part in name.split("/"))
            return too_long or (nested and any(name.endswith("/") for name in args))
        rng = _range(op)
        if rng is None or kind == "ftruncate":
            return False
        slot = self.slots[args[0]]
        write = kind in ("pwrite", "mmap_write", "fallocate", "copy_file_range")
        wrong = (slot.fd < 0 or slot.is_dir
                 or slot.flags & os.O_ACCMODE == (os.O_RDONLY if write else os.O_WRONLY))
        return wrong and (rng[0] < 0 or rng[1] > MAX_LFS_FILESIZE)

    def read_back(self, op: Op) -> Outcome | None:
        """After ``op`` failed: the size of the file it was aimed at and the bytes of
        the range it could have touched (up to :data:`BIG` of them), read through the
        slot's descriptor or, when that cannot read, a new one on the name it was opened
        by; None when there is no file (a closed slot, a directory)."""
        rng = _range(op)
        if rng is None:
            return None
        at = op[2] if op[0] == "copy_file_range" else op[1]
        slot = self.slots[at]
        if slot.fd < 0 or slot.is_dir:
            return None
        size = self.size(at)
        lo = max(0, rng[0])
        n = max(0, min(rng[1], lo + BIG, size) - lo)
        if slot.flags & os.O_ACCMODE != os.O_WRONLY:
            got = self.apply(("pread", at, n, lo))
        else:
            try:
                fd = self.fs.open(slot.name, os.O_RDONLY)
            except OSError as exc:
                return ("err", errno.errorcode.get(exc.errno or 0, exc.errno))
            try:
                got = ("ok", self.fs.pread(fd, n, lo))
            except OSError as exc:
                got = ("err", errno.errorcode.get(exc.errno or 0, exc.errno))
            finally:
                self.fs.close(fd)
        return ("ok", (size, got))

    def close_all(self) -> None:
        for slot, each in enumerate(self.slots):
            if each.fd >= 0:
                self.apply(("close", slot))

    def snapshot(self) -> dict[str, Any]:
        """Every directory's names, and every file's size and bytes: all of them up to
        :data:`NEAR`, :data:`WINDOW` around each far offset and before EOF."""
        out: dict[str, Any] = {}

        def walk(path: str) -> None:
            for name in sorted(self.fs.listdir(path)):
                full = f"{path}/{name}" if path else name
                st = self.fs.stat(full)
                if stat.S_ISDIR(st.st_mode):
                    out[full] = "dir"
                    walk(full)
                else:
                    fd = self.fs.open(full, os.O_RDONLY)
                    out[full] = (st.st_size, self.read_windows(fd, st.st_size))
                    self.fs.close(fd)

        walk("")
        return out

    def read_windows(self, fd: int, size: int) -> bytes:
        spans = [(0, NEAR), (size - WINDOW, size)]
        spans += [(a - WINDOW, a + WINDOW) for a in [*FAR, MAX_LFS_FILESIZE - WINDOW]]
        merged: list[list[int]] = []
        for lo, hi in sorted((max(0, lo), min(size, hi)) for lo, hi in spans):
            if lo >= hi:
                continue
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        return b"".join(self.fs.pread(fd, hi - lo, lo) for lo, hi in merged)


@dataclasses.dataclass(eq=False)
class Mismatch(AssertionError):
    """The first difference: ``index`` is the operation's number (None for the final
    comparison of the trees); ``log`` the operations up to it, as sent, with the
    oracle's outcomes; ``detail`` where two byte strings first differ."""

    index: int | None
    what: str
    target: str
    oracle: str
    log: list[str]
    detail: str = ""

    def __str__(self) -> str:
        where = f"op {self.index}: {self.what}" if self.index is not None else self.what
        return f"{where}: target {self.target}, oracle {self.oracle}"


def first_difference(ours: bytes, theirs: bytes, base: int, sent: list[Op]) -> str:
    """Where two reads first differ: the file offset, 16 bytes of each side there, and
    the operations sent whose range covers it marked ``*`` (as fsx marks its log)."""
    at = first_difference_at(ours, theirs)
    offset = base + at
    lines = [f"first difference at file offset {offset} ({offset:#x}): "
             f"target {ours[at:at + 16].hex(' ')}, oracle {theirs[at:at + 16].hex(' ')}"
             f" (lengths {len(ours)} and {len(theirs)})",
             "operations whose range covers it (*):"]
    touching = [(n, op) for n, op in enumerate(sent)
                if (rng := _range(op)) is not None and rng[0] <= offset < rng[1]]
    lines += [f"* {n}: {describe(op)}" for n, op in touching[-8:]]
    return "\n".join(lines)


# errnos POSIX leaves to the file system: a directory renamed over a non-empty one is
# ENOTEMPTY or EEXIST (XFS answers EEXIST, tmpfs and ext4 ENOTEMPTY), and so is rmdir of
# a non-empty directory (rmdir(2): "POSIX.1 also allows EEXIST"); unlink of a directory
# is EISDIR on Linux and EPERM by POSIX (unlink(2))
_EITHER = {"rename": {"ENOTEMPTY", "EEXIST"}, "rmdir": {"ENOTEMPTY", "EEXIST"},
           "unlink": {"EISDIR", "EPERM"}}


def _same_choice(op: Op, a: Outcome, b: Outcome) -> bool:
    """Whether two errors are one answer where POSIX lets the file system choose. Also
    ftruncate of a descriptor not open for writing (or of a directory, which never is):
    EINVAL on Linux, EBADF or EINVAL by POSIX (truncate(2)); a negative length is
    EINVAL only, and a descriptor that is not open EBADF only. A length past the largest
    file size is EFBIG or EINVAL (truncate(2) lists both)."""
    if op[0] == "ftruncate":
        if op[2] > MAX_LFS_FILESIZE:
            return {a[1], b[1]} <= {"EFBIG", "EINVAL"}
        return (b[1], a[1]) == ("EINVAL", "EBADF") and op[2] >= 0
    either = _EITHER.get(op[0], set())
    return a[1] in either and b[1] in either


def compare(target: AnyFileSystem, oracle: AnyFileSystem, ops: list[Op], *,
            clip_mapped_writes: bool = True, any_errno: bool = False) -> None:
    """Apply ``ops`` to both; raise :class:`Mismatch` at the first difference.
    ``any_errno``: two errors match whatever their errnos (``reference:errors=any``)."""
    ours, theirs = (Runner(fs, clip_mapped_writes=clip_mapped_writes)
                    for fs in (target, oracle))
    sent: list[Op] = []
    outcomes: list[Outcome] = []

    def log() -> list[str]:     # written out only for a difference
        return [f"{n}: {describe(op)} -> {short(out)}"
                for n, (op, out) in enumerate(zip(sent, outcomes, strict=True))]

    for n, op in enumerate(ops):
        a_op, b_op = ours.resolve(op), theirs.resolve(op)
        b = theirs.apply(b_op)
        sent.append(b_op)
        outcomes.append(b)
        try:
            a = ours.apply(a_op)
        except AnswerError as exc:
            raise Mismatch(n, describe(a_op), f"broke the answer rules: {exc}", short(b),
                           log()) from None
        if coverage.on():
            _record(a_op, a)
        if a != b and not (a[0] == b[0] == "err" and (any_errno
                                                      or theirs.two_bad_arguments(b_op)
                                                      or _same_choice(b_op, a, b))):
            detail = ""
            if isinstance(a[1], bytes) and isinstance(b[1], bytes):
                rng = _range(b_op)
                detail = first_difference(a[1], b[1], rng[0] if rng else 0, sent)
            raise Mismatch(n, describe(a_op), short(a), short(b), log(), detail)
        if b[0] == "err":
            _compare_read_back(ours, theirs, b_op, n, sent, log)
        if b[0] == "ok" and _range(b_op) is not None:
            for slot in {op[1], op[2]} if op[0] == "copy_file_range" else {op[1]}:
                sb = theirs.apply(("fstat", slot))
                try:
                    sa = ours.apply(("fstat", slot))
                except AnswerError as exc:
                    raise Mismatch(n, f"{describe(b_op)}, then fstat(slot {slot})",
                                   f"broke the answer rules: {exc}", short(sb),
                                   log()) from None
                if sa != sb:
                    raise Mismatch(n, f"{describe(b_op)}, then fstat(slot {slot})",
                                   short(sa), short(sb), log())
    theirs.close_all()
    good = theirs.snapshot()
    try:
        ours.close_all()
        mine = ours.snapshot()
    except OSError as exc:
        raise Mismatch(None, f"after {len(ops)} ops, reading every file back",
                       short(("err", errno.errorcode.get(exc.errno or 0, exc.errno))), "ok",
                       log()) from None
    except AnswerError as exc:
        raise Mismatch(None, f"after {len(ops)} ops, reading every file back",
                       f"broke the answer rules: {exc}", "ok", log()) from None
    if mine != good:
        name = next(n for n in sorted(set(mine) | set(good)) if mine.get(n) != good.get(n))
        x: Any = mine.get(name, "missing")
        y: Any = good.get(name, "missing")
        detail = ""
        if isinstance(x, tuple) and isinstance(y, tuple):
            if x[0] != y[0]:
                x, y = f"size {x[0]}", f"size {y[0]}"
            else:
                detail = first_difference(x[1], y[1], 0, sent)
                x, y = x[1], y[1]
        raise Mismatch(None, f"after {len(ops)} ops, {name!r}", short(("ok", x)),
                       short(("ok", y)), log(), detail)


def _record(op: Op, outcome: Outcome) -> None:
    """Tell --folio-coverage what a call sent to the target was given."""
    kind, *args = op
    error = outcome[1] if outcome[0] == "err" else None
    if kind in ("pwrite", "pread"):
        coverage.record(kind, length=args[1], offset=args[2], error=error,
                        data=fill_class(args[3]) if kind == "pwrite" else None)
    elif kind in ("mmap_write", "mmap_read"):
        coverage.record(kind, offset=args[1], length=args[2], error=error,
                        data=fill_class(args[3]) if kind == "mmap_write" else None)
    elif kind == "fallocate":
        coverage.record(f"fallocate {args[1]:#x}", offset=args[2], length=args[3], error=error)
    elif kind == "ftruncate":
        coverage.record(kind, length=args[1], error=error)
    elif kind == "copy_file_range":
        coverage.record(kind, length=args[2], offset=args[4], error=error)
    elif kind in ("open", "unlink", "mkdir", "rmdir", "rename", "listdir", "stat",
                  "drop_caches"):
        coverage.record(kind, name=args[1] if kind in ("open", "rename") else args[0],
                        error=error)
    else:
        coverage.record(kind, error=error)


def _compare_read_back(ours: Runner, theirs: Runner, op: Op, n: int, sent: list[Op],
                       log: Callable[[], list[str]]) -> None:
    """A failed call must leave its file as the oracle's: the size, and the bytes of
    the range it could have touched (a write that fails after storing part of it)."""
    sa, sb = ours.read_back(op), theirs.read_back(op)
    if sa == sb or sb is None or sa is None:
        return
    what = f"{describe(op)} failed, then reading back what it could touch"
    (_, (size_a, got_a)), (_, (size_b, got_b)) = sa, sb
    if size_a != size_b:
        raise Mismatch(n, what, f"size {size_a}", f"size {size_b}", log())
    detail = ""
    if isinstance(got_a[1], bytes) and isinstance(got_b[1], bytes):
        rng = _range(op)
        detail = first_difference(got_a[1], got_b[1], max(0, rng[0]) if rng else 0, sent)
    raise Mismatch(n, what, short(got_a), short(got_b), log(), detail)


Pair = Callable[[], AbstractContextManager[tuple[AnyFileSystem, AnyFileSystem]]]


def shrink(ops: list[Op], first: Mismatch, pair: Pair, *, seconds: float = 10.0,
           max_tries: int = 300, **options: Any) -> tuple[list[Op], Mismatch]:
    """The shortest sequence still showing a difference that ddmin finds within the
    budget (each try on a fresh target and oracle from ``pair``), and its difference.
    ``first`` is the difference ``ops`` showed: what follows its operation is dropped."""
    if first.index is not None:
        ops = ops[:first.index + 1]
    def run(candidate: list[Op]) -> Mismatch | None:
        with pair() as (target, oracle):
            try:
                compare(target, oracle, candidate, **options)
            except Mismatch as exc:
                return exc
        return None

    short_ops = ddmin(ops, lambda c: run(c) is not None, seconds=seconds,
                      max_tries=max_tries)
    found = run(short_ops)
    assert found is not None
    return short_ops, found

