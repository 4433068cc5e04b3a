"""fsx's operations and its operation log, in the two text forms fsx uses.

An entry is what fsx's ``log4``/``log5`` record: the operation, its arguments (offset,
length, then the file size before the operation; copy-like operations have the
destination offset before the file size) and flags. ``dump_line`` renders the
``LOG DUMP`` line, ``fsxops_line``/``parse_fsxops`` the ``.fsxops`` form that
``fsx --record-ops`` writes and ``fsx --replay-ops`` reads::

    [skip] NAME 0xOFFSET 0xLENGTH [0xDEST] 0xFILE_SIZE [keep_size] [close_open] [unshare] [*]

Blank lines and lines starting with ``#`` are ignored, numbers are read as C's
``strtoul(s, 0)`` does (``0x1f``, ``017``, ``15``).

xfstests' fsx runs an ``fsync`` line only with ``-i LOGDEV`` (dm-log-writes), and stops a
replay at the first one otherwise. So our logs write an fsync as ``skip fsync ...``, which
fsx replays as a skipped operation, under a first comment line (:data:`FSYNC_NOTE`) that
tells our reader to run those as fsyncs again: a log of ours replays on the real fsx
unchanged, and on ours with every operation it recorded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pytest_folio.files import write_file
from pytest_folio.inputs import excerpt

# The operations this engine generates, in the order the random choice maps onto them.
OP_READ = 0
OP_WRITE = 1
OP_MAPREAD = 2
OP_MAPWRITE = 3
OP_TRUNCATE = 4
OP_FALLOCATE = 5
OP_PUNCH_HOLE = 6
OP_ZERO_RANGE = 7
OP_COLLAPSE_RANGE = 8
OP_INSERT_RANGE = 9
OP_COPY_RANGE = 10
OP_FSYNC = 11
NR_OPS = 12
# Operations newer fsx versions record that no FileSystem target has (reflink and
# exchange ioctls): a replayed log keeps them, skipped and counted as unsupported.
OP_CLONE_RANGE = 12
OP_DEDUPE_RANGE = 13
OP_EXCHANGE_RANGE = 14

OP_NAMES = ("read", "write", "mapread", "mapwrite", "truncate", "fallocate", "punch_hole",
            "zero_range", "collapse_range", "insert_range", "copy_range", "fsync",
            "clone_range", "dedupe_range", "exchange_range")
_OP_CODES = {name: code for code, name in enumerate(OP_NAMES)}
# fsx's page-cache-bypassing variants replay as the plain call.
_OP_CODES.update(read_dontcache=OP_READ, write_dontcache=OP_WRITE, write_atomic=OP_WRITE)
_FIVE_ARG_OPS = frozenset({OP_COPY_RANGE, OP_CLONE_RANGE, OP_DEDUPE_RANGE, OP_EXCHANGE_RANGE})

# enum opflags
FL_NONE = 0
FL_SKIPPED = 1
FL_CLOSE_OPEN = 2
FL_KEEP_SIZE = 4
FL_UNSHARE = 8
_FLAG_WORDS = {"keep_size": FL_KEEP_SIZE, "close_open": FL_CLOSE_OPEN, "unshare": FL_UNSHARE}


# The first line of every log we write: fsx ignores it as a comment; parse_fsxops reads
# "skip fsync" lines under it as fsyncs.
FSYNC_NOTE = ("# pytest-folio: 'skip fsync' lines are fsyncs (xfstests' fsx replays fsync "
              "only with -i)")
# A log of ours names, in a comment line, the test that recorded it and the fsx flags it
# ran with that change what a replayed operation does (fsx.config.replay_flags): a
# replay in a test of other flags would not do what the log did.
_RECORDED_RE = re.compile(r"^# pytest-folio: recorded by (?P<test>.+) with fsx options "
                          r"'(?P<flags>[^']*)'$")


def recorded_note(test: str, flags: str) -> str:
    """The comment line naming the test that recorded a log and its replay flags."""
    return f"# pytest-folio: recorded by {test} with fsx options '{flags}'"


def recorded_by(text: str) -> tuple[str, str] | None:
    """The test that recorded a log and its flags, from its :func:`recorded_note` line
    (None for a log without one: the real fsx's, or written by hand)."""
    for line in text.splitlines():
        match = _RECORDED_RE.match(line.strip())
        if match:
            return match.group("test"), match.group("flags")
    return None


# A replayed operation may reach at most this far into the file: the model holds the
# whole file (and fsx's data pattern) in memory, as fsx's good_buf does.
MAX_REPLAY_FILE_LEN = 1 << 30


class LogEntry(NamedTuple):
    """One logged operation: fsx's ``struct log_entry``."""

    op: int
    args: tuple[int, ...]
    flags: int = FL_NONE

    @property
    def name(self) -> str:
        return OP_NAMES[self.op]


class FsxopsError(ValueError):
    """A ``.fsxops`` file that cannot be read; the message is one line for the user."""


def op_name(op: int) -> str:
    return OP_NAMES[op]


def op_code(name: str) -> int:
    """The operation a log line's name stands for (fsx's dontcache and atomic variants
    are the plain call); KeyError for a name fsx does not have."""
    return _OP_CODES[name]


def op_args_count(op: int) -> int:
    return 4 if op in _FIVE_ARG_OPS else 3


def overlaps(entry: LogEntry, badoff: int) -> bool:
    """Whether the bad offset falls into what this entry touched (fsx's markers)."""
    if badoff < 0:
        return False
    op, args = entry.op, entry.args
    if op == OP_TRUNCATE:
        down = args[1] < args[2]
        lo, hi = (args[1], args[2]) if down else (args[2], args[1])
        return lo <= badoff < hi
    hit = args[0] <= badoff < args[0] + args[1]
    if op == OP_WRITE:  # a write also owns the hole it leaves between EOF and itself
        return (badoff >= args[0] or badoff >= args[2]) and badoff < args[0] + args[1]
    if op in _FIVE_ARG_OPS:
        return hit or args[2] <= badoff < args[2] + args[1]
    return hit


_RANGE_LABEL = {
    OP_READ: "READ    ", OP_MAPREAD: "MAPREAD ", OP_WRITE: "WRITE   ", OP_MAPWRITE: "MAPWRITE",
    OP_PUNCH_HOLE: "PUNCH   ", OP_ZERO_RANGE: "ZERO    ", OP_COLLAPSE_RANGE: "COLLAPSE",
    OP_INSERT_RANGE: "INSERT",
}
_RANGE_MARK = {
    OP_READ: "\t***RRRR***", OP_MAPREAD: "\t***RRRR***", OP_WRITE: "\t***WWWW",
    OP_MAPWRITE: "\t******WWWW", OP_PUNCH_HOLE: "\t******PPPP", OP_ZERO_RANGE: "\t******ZZZZ",
    OP_COLLAPSE_RANGE: "\t******CCCC", OP_INSERT_RANGE: "\t******IIII",
}
_PAIR = {OP_COPY_RANGE: ("COPY", "E"), OP_CLONE_RANGE: ("CLONE", "J"),
         OP_DEDUPE_RANGE: ("DEDUPE", "B"), OP_EXCHANGE_RANGE: ("XCHG", "X")}


def dump_line(opnum: int, entry: LogEntry, badoff: int = -1) -> str:
    """The ``LOG DUMP`` line of operation ``opnum`` (1-based), without the newline."""
    head = f"{opnum}({opnum % 256:3d} mod 256): "
    op, a, flags = entry.op, entry.args, entry.flags
    if flags & FL_SKIPPED:
        body = "SKIPPED (no operation)"
    elif op in _RANGE_LABEL:
        body = (f"{_RANGE_LABEL[op]} {a[0]:#x} thru {a[0] + a[1] - 1:#x}\t({a[1]:#x} bytes)")
        if op == OP_WRITE:
            if a[0] > a[2]:
                body += " HOLE"
            elif a[0] + a[1] > a[2]:
                body += " EXTEND"
        if overlaps(entry, badoff):
            body += _RANGE_MARK[op]
    elif op == OP_TRUNCATE:
        down = a[1] < a[2]
        body = f"TRUNCATE {'DOWN' if down else 'UP'}\tfrom {a[2]:#x} to {a[1]:#x}"
        if overlaps(entry, badoff):
            body += "\t******WWWW"
    elif op == OP_FALLOCATE:
        body = f"FALLOC   {a[0]:#x} thru {a[0] + a[1]:#x}\t({a[1]:#x} bytes) "
        if a[0] + a[1] <= a[2]:
            body += "INTERIOR"
        elif flags & FL_KEEP_SIZE:
            body += "PAST_EOF"
        else:
            body += "EXTENDING"
        if overlaps(entry, badoff):
            body += "\t******FFFF"
    elif op in _PAIR:
        label, ch = _PAIR[op]
        body = (f"{label} {a[0]:#x} thru {a[0] + a[1] - 1:#x}\t({a[1]:#x} bytes) "
                f"to {a[2]:#x} thru {a[2] + a[1] - 1:#x}")
        src = badoff >= 0 and a[0] <= badoff < a[0] + a[1]
        dst = badoff >= 0 and a[2] <= badoff < a[2] + a[1]
        if src and dst:
            body += f"\t{ch * 4}**{ch * 4}"
        elif src:
            body += f"\t{ch * 4}******"
        elif dst:
            body += f"\t******{ch * 4}"
    else:  # OP_FSYNC
        body = "FSYNC"
    if flags & FL_CLOSE_OPEN:
        body += "\n\t\tCLOSE/OPEN"
    return head + body


def fsxops_line(entry: LogEntry, badoff: int = -1) -> str:
    """The ``.fsxops`` line of one entry, without the newline (an fsync as ``skip
    fsync``, which xfstests' fsx replays without ``-i``)."""
    words = ["skip"] if entry.flags & FL_SKIPPED or entry.op == OP_FSYNC else []
    words.append(OP_NAMES[entry.op])
    words.extend(f"{arg:#x}" for arg in entry.args)
    words.extend(word for word, bit in _FLAG_WORDS.items() if entry.flags & bit)
    if overlaps(entry, badoff):
        words.append("*")
    return " ".join(words)


def format_fsxops(entries: Iterable[LogEntry], badoff: int = -1, note: str = "") -> str:
    """The ``.fsxops`` text; ``note``, a comment line, goes under the first."""
    head = FSYNC_NOTE + "\n" + (note + "\n" if note else "")
    return head + "".join(fsxops_line(entry, badoff) + "\n" for entry in entries)


def write_fsxops(path: str | os.PathLike[str], entries: Iterable[LogEntry],
                 badoff: int = -1, note: str = "") -> Path:
    """Write the log atomically (a reader never sees half a file, a planted symlink is
    replaced, not followed) and return its path."""
    return write_file(path, format_fsxops(entries, badoff, note))


_OCTAL = re.compile(r"^0[0-7]+$")
_DECIMAL = re.compile(r"^[0-9]+$")
_HEX = re.compile(r"^0[xX][0-9a-fA-F]+$")


def _strtoul(word: str) -> int | None:
    """The number C's ``strtoul(word, 0)`` reads, None for a word that is no number of
    64 bits' digits (a longer one is not parsed at all)."""
    if len(word) > 24:      # 0 and 22 octal digits: 2**64 in any form fits
        return None
    if _HEX.match(word):
        return int(word, 16)
    if _OCTAL.match(word):
        return int(word, 8)
    if _DECIMAL.match(word):
        return int(word, 10)
    return None


def extent(entry: LogEntry) -> int:
    """How long the file must be to hold what a performed entry touches (a skipped one
    touches nothing: fsx logs the raw random offsets of what it skipped)."""
    if entry.flags & FL_SKIPPED:
        return 0
    args = entry.args
    ends = [args[0] + args[1], args[-1]]
    if entry.op == OP_TRUNCATE:
        ends.append(args[1])
    if op_args_count(entry.op) == 4:
        ends.append(args[2] + args[1])
    return max(ends)


def parse_fsxops(text: str, source: str = "<fsxops>") -> list[LogEntry]:
    """Read a ``.fsxops`` log; raise FsxopsError naming the file and line on bad input
    (also an operation reaching past :data:`MAX_REPLAY_FILE_LEN`)."""
    entries: list[LogEntry] = []
    fsync_note = False
    for lineno, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if line.strip() == FSYNC_NOTE:
            fsync_note = True
        if not words or words[0].startswith("#"):
            continue

        def fail(why: str, lineno: int = lineno) -> FsxopsError:
            return FsxopsError(f"{source}:{lineno}: parse error: {why}")

        flags = FL_NONE
        if words[0] == "skip":
            flags |= FL_SKIPPED
            words = words[1:]
            if not words:
                raise fail("'skip' without an operation")
        op = _OP_CODES.get(words[0])
        if op is None:
            raise fail(f"unknown operation {excerpt(words[0])} (known: {', '.join(_OP_CODES)})")
        want = op_args_count(op)
        args: list[int] = []
        rest = words[1:]
        while rest and len(args) < want and (value := _strtoul(rest[0])) is not None:
            args.append(value)
            rest = rest[1:]
        # fsx before log5 wrote three numbers for every operation, copy_range included.
        if len(args) < want and not (op in _FIVE_ARG_OPS and len(args) == 3):
            raise fail(f"{words[0]} needs {want} numbers, found {len(args)}")
        if len(args) == 3 and op in _FIVE_ARG_OPS:
            args.append(0)
        for word in rest:
            if word in _FLAG_WORDS:
                flags |= _FLAG_WORDS[word]
            elif word != "*":
                raise fail(f"unexpected {excerpt(word)} after the numbers")
        if op == OP_FSYNC and fsync_note:
            flags &= ~FL_SKIPPED
        entry = LogEntry(op, tuple(args), flags)
        if extent(entry) > MAX_REPLAY_FILE_LEN:
            raise fail(f"{words[0]} reaches {extent(entry):#x}, past the "
                       f"{MAX_REPLAY_FILE_LEN >> 30} GiB a replayed file may have")
        entries.append(entry)
    if not entries:
        raise FsxopsError(f"{source}: holds no operations")
    return entries


def entries_to_data(entries: Iterable[LogEntry]) -> list[tuple[int, tuple[int, ...], int]]:
    """Primitive data (what xdist hands a worker): the entries without parsing them again."""
    return [(entry.op, tuple(entry.args), entry.flags) for entry in entries]


def entries_from_data(data: Iterable[Sequence[Any]]) -> list[LogEntry]:
    return [LogEntry(op, tuple(args), flags) for op, args, flags in data]


def read_fsxops(path: str | os.PathLike[str]) -> list[LogEntry]:
    """Read a ``.fsxops`` file; a missing or unreadable file is a one-line FsxopsError."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise FsxopsError(f"cannot read {os.fspath(path)}: {exc}") from None
    return parse_fsxops(text, os.fspath(path))
