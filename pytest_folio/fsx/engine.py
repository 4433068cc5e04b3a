"""The fsx engine: random file operations applied to a FileSystem and to a model of the file.

It follows xfstests' ltp/fsx: each ``test()`` call picks an operation with fsx's
distribution (one random number chooses the operation and the close/open decision, the
next ones the offset and length), trims it to the file and the limits, applies it to the
model and the target, compares every read and mapped read with the model, checks the size
after every operation and the zeroes past EOF in the mapped last page, and a whole-file
compare ends the run (after a close and reopen). Operations the target cannot do
(missing from ``features``, or answered with EOPNOTSUPP) are skipped and counted, as fsx
disables what its probes find missing.

A failure prints fsx's report (``READ BAD DATA``, the ``OFFSET GOOD BAD RANGE`` table,
``LOG DUMP``) into :attr:`FsxEngine.lines`, writes the ``.fsxops``/``.fsxgood``/
``.fsxlog`` files when given a place for them, and raises :class:`FsxFailure`.
"""

from __future__ import annotations

import dataclasses
import errno
import itertools
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from pytest_folio.fsx.config import FsxOptions
from pytest_folio.fsx.log import (
    FL_CLOSE_OPEN,
    FL_KEEP_SIZE,
    FL_NONE,
    FL_SKIPPED,
    NR_OPS,
    OP_CLONE_RANGE,
    OP_COLLAPSE_RANGE,
    OP_COPY_RANGE,
    OP_DEDUPE_RANGE,
    OP_EXCHANGE_RANGE,
    OP_FALLOCATE,
    OP_FSYNC,
    OP_INSERT_RANGE,
    OP_MAPREAD,
    OP_MAPWRITE,
    OP_NAMES,
    OP_PUNCH_HOLE,
    OP_READ,
    OP_TRUNCATE,
    OP_WRITE,
    OP_ZERO_RANGE,
    LogEntry,
    dump_line,
    extent,
    op_args_count,
    write_fsxops,
)
from pytest_folio.fsx.model import DataPattern, FileModel
from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.targets.protocols import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
    FileSystem,
)

PAGE_MASK = PAGE_SIZE - 1
LOGSIZE = 10000  # fsx dumps the last LOGSIZE operations; the .fsxops file gets them all
_UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.ENOTTY})
_ZERO_PAGE = memoryview(bytes(PAGE_SIZE))

# The optional operations: the feature a target must list, and what fsx says when its
# probe fails ("main: filesystem does not support fallocate mode X, disabling!").
_FEATURE_OF = {OP_FALLOCATE: "fallocate", OP_PUNCH_HOLE: "punch_hole",
               OP_ZERO_RANGE: "zero_range", OP_COLLAPSE_RANGE: "collapse_range",
               OP_INSERT_RANGE: "insert_range", OP_COPY_RANGE: "copy_range"}
_FALLOC_MODE = {OP_FALLOCATE: (0, "0"),
                OP_PUNCH_HOLE: (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                "FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE"),
                OP_ZERO_RANGE: (FALLOC_FL_ZERO_RANGE, "FALLOC_FL_ZERO_RANGE"),
                OP_COLLAPSE_RANGE: (FALLOC_FL_COLLAPSE_RANGE, "FALLOC_FL_COLLAPSE_RANGE"),
                OP_INSERT_RANGE: (FALLOC_FL_INSERT_RANGE, "FALLOC_FL_INSERT_RANGE")}
_TOGGLE_OF = {OP_FALLOCATE: "fallocate_calls", OP_PUNCH_HOLE: "punch_hole_calls",
              OP_ZERO_RANGE: "zero_range_calls", OP_COLLAPSE_RANGE: "collapse_range_calls",
              OP_INSERT_RANGE: "insert_range_calls", OP_COPY_RANGE: "copy_range_calls",
              OP_FSYNC: "fsync_calls"}
_NEVER = (OP_CLONE_RANGE, OP_DEDUPE_RANGE, OP_EXCHANGE_RANGE)


class FsxFailure(AssertionError):
    """fsx found a problem. ``str()`` is one line; :attr:`report` is fsx's full output."""

    def __init__(self, summary: str, *, status: int, badoff: int, report: str,
                 artifacts: dict[str, Path] | None = None) -> None:
        super().__init__(summary)
        self.summary = summary
        self.status = status            # fsx's exit status (110 bad data, 120 size, ...)
        self.badoff = badoff            # first bad offset, -1 when there is none
        self.report = report
        self.artifacts = artifacts or {}  # "fsxops", "fsxgood", "fsxlog" -> path

    @property
    def fsxops(self) -> Path | None:
        return self.artifacts.get("fsxops")


@dataclasses.dataclass
class FsxResult:
    """What a finished run did: operations done and skipped by reason, and its speed."""

    testcalls: int
    logcount: int
    done: Counter[str]
    skipped_unsupported: Counter[str]
    skipped_disabled: Counter[str]
    skipped_noop: Counter[str]
    converted: Counter[str]
    seconds: float        # wall-clock time of the operations
    cpu_seconds: float    # this process's CPU time (user + system) for them
    lines: list[str]

    @property
    def ops_per_second(self) -> float:
        return self.testcalls / self.seconds if self.seconds > 0 else float("inf")

    @property
    def ops_per_cpu_second(self) -> float:
        """The rate on a machine with a core to itself (a busy machine lowers the
        wall-clock rate, not this one)."""
        return self.testcalls / self.cpu_seconds if self.cpu_seconds > 0 else float("inf")

    @property
    def skipped(self) -> int:
        return sum((self.skipped_unsupported + self.skipped_disabled
                    + self.skipped_noop).values())


def _trim_off_len(offset: int, size: int, limit: int) -> tuple[int, int]:
    """fsx's TRIM_OFF_LEN: wrap the offset into [0, limit), clip the length at limit."""
    if limit <= 0:
        return 0, 0
    offset %= limit
    if offset + size > limit:
        size = limit - offset
    return offset, size


def _bad_bytes(buf: bytes, good: bytearray, offset: int, *,
               reverse: bool = False) -> Iterator[int]:
    """Indexes into ``buf`` where it differs from ``good[offset:]``, in order (or in
    reverse), comparing page-sized slices first so a large read is cheap to scan."""
    size = len(buf)
    starts = range(0, size, PAGE_SIZE)
    for start in reversed(starts) if reverse else starts:
        end = min(start + PAGE_SIZE, size)
        if buf[start:end] == good[offset + start:offset + end]:
            continue
        span = range(start, end)
        for i in reversed(span) if reverse else span:
            if buf[i] != good[offset + i]:
                yield i


def _short_at(buf: bytes | bytearray | memoryview, i: int) -> int:
    """fsx's short_at(): two bytes, big-endian, for the report columns."""
    return (buf[i] << 8) | (buf[i + 1] if i + 1 < len(buf) else 0)


class FsxEngine:
    """One fsx run against ``fs``, on the file ``path`` (created, truncated)."""

    def __init__(self, fs: FileSystem, options: FsxOptions | None = None, *,
                 path: str = "fsx.dat", fname: str | None = None,
                 artifacts: str | os.PathLike[str] | None = None, record: bool = False,
                 echo: Callable[[str], None] | None = None) -> None:
        self.fs = fs
        self.opts = options or FsxOptions()
        self.path = path
        self.fname = fname or path
        self.artifacts = Path(artifacts) if artifacts is not None else None
        self.record = record
        self.echo = echo
        self.lines: list[str] = []
        self.log: list[LogEntry] = []
        self.testcalls = 0
        self.badoff = -1
        self.fd: int | None = None
        self.done: Counter[str] = Counter()
        self.skipped_unsupported: Counter[str] = Counter()
        self.skipped_disabled: Counter[str] = Counter()
        self.skipped_noop: Counter[str] = Counter()
        self.converted: Counter[str] = Counter()
        self.unsupported: set[int] = set()
        self.eofpage_checks = True
        self.closeopen = False
        self._elapsed = 0.0
        self._cpu = 0.0
        self._setup(self.opts.maxfilelen)

    # -- setup -----------------------------------------------------------------------
    def _setup(self, maxfilelen: int) -> None:
        opts = self.opts
        self.maxfilelen = maxfilelen
        rng = random.Random(opts.seed)
        self._getrandbits = rng.getrandbits  # fsx's random(): 31 bits
        self.pattern = DataPattern(rng.randbytes(maxfilelen))
        self.model = FileModel(maxfilelen)
        self.biggest = 0
        self._closeprob_limit = (1 << 28) // opts.closeprob if opts.closeprob else -1
        self.enabled = [True] * len(OP_NAMES)
        for op, toggle in _TOGGLE_OF.items():
            self.enabled[op] = getattr(opts, toggle)
        for op in _NEVER:
            self.enabled[op] = False
        self.keep_size_calls = opts.keep_size_calls
        self.keep_size_unsupported = False
        self.mapped_reads = opts.mapped_reads
        self.mapped_writes = opts.mapped_writes

    def prt(self, line: str) -> None:
        self.lines.append(line)
        if self.echo is not None:
            self.echo(line)

    def start(self) -> None:
        """Open the file and find what the target supports (fsx's main() before the loop)."""
        if not self.opts.quiet:
            self.prt(f"Seed set to {self.opts.seed}")
        try:
            self.fd = self.fs.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666)
        except OSError as exc:
            self._prterr(self.fname, exc)
            self._fail(91, dump=False)
        self.block_size = int(getattr(self.fs, "blocksize", 0)) or self._fstat().st_blksize
        self._check_trunc_hack()
        self._probe()

    def _fstat(self) -> os.stat_result:
        assert self.fd is not None
        return self.fs.fstat(self.fd)

    def _check_trunc_hack(self) -> None:
        """fsx refuses a file system whose ftruncate cannot extend a file."""
        fd, size = self.fd, self.model.size
        assert fd is not None
        try:
            self.fs.ftruncate(fd, size + 100000)
            extended = self._fstat().st_size
            self.fs.ftruncate(fd, size)
        except OSError as exc:
            self._prterr("check_trunc_hack: ftruncate", exc)
            self._fail(131, dump=False)
        if extended != size + 100000:
            self.prt("no extend on truncate! not posix!")
            self._fail(130, dump=False)

    def _probe(self) -> None:
        """Disable what the target lacks: by its ``features``, then by trying it as fsx
        does (one byte at EOF, EOPNOTSUPP or ENOSYS means no)."""
        features = frozenset(getattr(self.fs, "features", frozenset()))
        fd = self.fd
        assert fd is not None
        if "mmap" not in features:
            self._disable_mmap("no mmap in its features")
        for op, feature in _FEATURE_OF.items():
            if not self.enabled[op]:
                continue
            if feature not in features:
                self._disable(op, f"no {feature} in its features")
                continue
            try:
                if op == OP_COPY_RANGE:
                    self.fs.copy_file_range(fd, fd, 1, 0, 1)
                else:
                    mode = _FALLOC_MODE[op][0]
                    self.fs.fallocate(fd, mode, self.model.size, 1)
                    if op == OP_FALLOCATE and self.keep_size_calls:
                        self._probe_keep_size()
            except OSError as exc:
                if exc.errno in _UNSUPPORTED:
                    self._disable(op, os.strerror(exc.errno or 0))
            finally:
                self.fs.ftruncate(fd, self.model.size)

    def _probe_keep_size(self) -> None:
        assert self.fd is not None
        try:
            self.fs.fallocate(self.fd, FALLOC_FL_KEEP_SIZE, self.model.size, 1)
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
            self.keep_size_calls = False
            self.keep_size_unsupported = True
            if not self.opts.quiet:
                self.prt("main: filesystem does not support fallocate mode "
                         "FALLOC_FL_KEEP_SIZE, disabling!")

    def _disable(self, op: int, why: str) -> None:
        self.enabled[op] = False
        self.unsupported.add(op)
        if not self.opts.quiet:
            if op == OP_COPY_RANGE:
                self.prt(f"main: filesystem does not support copy range, disabling! ({why})")
            else:
                self.prt(f"main: filesystem does not support fallocate mode "
                         f"{_FALLOC_MODE[op][1]}, disabling! ({why})")

    def _disable_mmap(self, why: str) -> None:
        self.mapped_reads = self.mapped_writes = False
        self.unsupported.update((OP_MAPREAD, OP_MAPWRITE))
        if not self.opts.quiet:
            self.prt(f"main: filesystem does not support mmap ({why}): mapped reads and "
                     "writes become reads and writes")

    # -- the log ---------------------------------------------------------------------
    def _log(self, op: int, args: tuple[int, ...], flags: int = FL_NONE) -> None:
        if self.closeopen:
            flags |= FL_CLOSE_OPEN
        self.log.append(LogEntry(op, args, flags))
        if flags & FL_SKIPPED:
            self.skipped_noop[OP_NAMES[op]] += 1
        else:
            self.done[OP_NAMES[op]] += 1

    def _log_disabled(self, op: int, args: tuple[int, ...], flags: int = FL_NONE, *,
                      unsupported: bool) -> None:
        """An operation turned off by the options or missing from the target."""
        flags |= FL_SKIPPED | (FL_CLOSE_OPEN if self.closeopen else 0)
        self.log.append(LogEntry(op, args, flags))
        counter = self.skipped_unsupported if unsupported else self.skipped_disabled
        counter[OP_NAMES[op]] += 1

    def _skip(self, op: int, args: tuple[int, ...], why: str, flags: int = FL_NONE) -> None:
        """An operation with nothing to do (zero length, past EOF, ...), as fsx logs it."""
        if not self.opts.quiet:
            self.prt(why)
        self._log(op, args, flags | FL_SKIPPED)

    def _unsupported_now(self, op: int, exc: OSError) -> None:
        """The target said EOPNOTSUPP to an operation it listed: skip it from now on."""
        last = self.log[-1]
        self.log[-1] = last._replace(flags=last.flags | FL_SKIPPED)
        name = OP_NAMES[op]
        self.done[name] -= 1
        self.skipped_unsupported[name] += 1
        if op in (OP_MAPREAD, OP_MAPWRITE):
            self._disable_mmap(os.strerror(exc.errno or 0))
        else:
            self._disable(op, os.strerror(exc.errno or 0))

    # -- one operation ---------------------------------------------------------------
    def step(self, entry: LogEntry | None = None) -> None:
        """One fsx test(): a random operation, or ``entry`` from a replayed log."""
        opts = self.opts
        self.testcalls += 1
        keep_size = False
        offset2 = 0
        if entry is None:
            rand = self._getrandbits
            rv = rand(31)
            self.closeopen = (rv >> 3) < self._closeprob_limit
            offset = rand(31)
            size = rand(31) % (opts.maxoplen + 1) if opts.randomoplen else opts.maxoplen
            op = rv % NR_OPS
            if op == OP_TRUNCATE:
                if not opts.style:
                    size = rand(31) % self.maxfilelen
            elif op in (OP_FALLOCATE, OP_ZERO_RANGE):
                if self.enabled[op] and size and self.keep_size_calls:
                    keep_size = bool(rand(31) % 2)
            elif op == OP_COPY_RANGE:
                offset, size, offset2 = self._generate_dest_range(offset, size)
        else:
            op = entry.op
            offset, size = entry.args[0], entry.args[1]
            if op_args_count(op) == 4:
                offset2 = entry.args[2]
            self.closeopen = bool(entry.flags & FL_CLOSE_OPEN)
            keep_size = bool(entry.flags & FL_KEEP_SIZE)
        self._do(op, offset, size, offset2, keep_size)
        if opts.check_file and not self.log[-1].flags & FL_SKIPPED:
            self.check_contents()
        if self.closeopen:
            self.reopen()
        if opts.sizechecks:
            self.check_size()

    def _do(self, op: int, offset: int, size: int, offset2: int, keep_size: bool) -> None:
        model_size = self.model.size
        maxfilelen = self.maxfilelen
        if op == OP_MAPREAD and not self.mapped_reads:
            op = OP_READ
            self.converted["mapread"] += 1
        elif op == OP_MAPWRITE and not self.mapped_writes:
            op = OP_WRITE
            self.converted["mapwrite"] += 1
        elif not self.enabled[op]:
            args = (offset, size, offset2, model_size) if op_args_count(op) == 4 else (
                offset, size, model_size)
            self._log_disabled(op, args, unsupported=op in self.unsupported or op in _NEVER)
            return
        elif keep_size and not self.keep_size_calls:  # only a replayed log gets here
            self._log_disabled(op, (offset, size, model_size), FL_KEEP_SIZE,
                               unsupported=self.keep_size_unsupported)
            return
        if op == OP_READ:
            self._doread(*_trim_off_len(offset, size, model_size))
        elif op == OP_WRITE:
            self._dowrite(*_trim_off_len(offset, size, maxfilelen))
        elif op == OP_MAPREAD:
            self._domapread(*_trim_off_len(offset, size, model_size))
        elif op == OP_MAPWRITE:
            self._domapwrite(*_trim_off_len(offset, size, maxfilelen))
        elif op == OP_TRUNCATE:
            self._dotruncate(size)
        elif op == OP_FALLOCATE:
            self._do_preallocate(*_trim_off_len(offset, size, maxfilelen), keep_size)
        elif op == OP_PUNCH_HOLE:
            self._do_punch_hole(*_trim_off_len(offset, size, model_size))
        elif op == OP_ZERO_RANGE:
            self._do_zero_range(*_trim_off_len(offset, size, maxfilelen), keep_size)
        elif op == OP_COLLAPSE_RANGE:
            offset, size = _trim_off_len(offset, size, model_size - 1)
            offset -= offset % self.block_size
            size -= size % self.block_size
            if size == 0:
                self._skip(op, (offset, size, model_size), "skipping zero length collapse range")
                return
            self._do_collapse_range(offset, size)
        elif op == OP_INSERT_RANGE:
            offset = offset % model_size if model_size else 0
            if model_size + size > maxfilelen:
                size = maxfilelen - model_size
            offset -= offset % self.block_size
            size -= size % self.block_size
            if size == 0 or model_size + size > maxfilelen:
                self._skip(op, (offset, size, model_size), "skipping zero length insert range")
                return
            self._do_insert_range(offset, size)
        elif op == OP_COPY_RANGE:
            if size == 0 or offset2 + size > maxfilelen:
                self._skip(op, (offset, size, offset2, model_size),
                           "skipping zero length copy range")
                return
            self._do_copy_range(offset, size, offset2)
        else:
            self._dofsync()

    def _generate_dest_range(self, offset: int, size: int) -> tuple[int, int, int]:
        """fsx's generate_dest_range() for copy_range: a source inside the file aligned to
        -r, a destination aligned to -w that does not overlap it, 30 tries at most."""
        opts = self.opts
        offset, size = _trim_off_len(offset, size, self.model.size)
        offset -= offset % opts.readbdy
        dest = 0
        for _ in range(30):
            dest = self._getrandbits(31) % self.maxfilelen
            dest -= dest % opts.writebdy
            if abs(dest - offset) >= size and dest + size <= self.maxfilelen:
                return offset, size, dest
        return offset, 0, dest

    # -- the operations, each as fsx's do*() -------------------------------------------
    def _doread(self, offset: int, size: int) -> None:
        offset -= offset % self.opts.readbdy
        if size == 0:
            return self._skip(OP_READ, (offset, size, self.model.size),
                              "skipping zero size read")
        if offset + size > self.model.size:
            return self._skip(OP_READ, (offset, size, self.model.size),
                              "skipping seek/read past end of file")
        self._log(OP_READ, (offset, size, self.model.size))
        assert self.fd is not None
        try:
            data = self.fs.pread(self.fd, size, offset)
        except OSError as exc:
            self._prterr("doread: read", exc)
            self._fail(141)
        if len(data) != size:
            self.prt(f"short read: {len(data):#x} bytes instead of {size:#x}")
            self._fail(141)
        self._check_buffers(data, offset)

    def _domapread(self, offset: int, size: int) -> None:
        offset -= offset % self.opts.readbdy
        if size == 0:
            return self._skip(OP_MAPREAD, (offset, size, self.model.size),
                              "skipping zero size read")
        if offset + size > self.model.size:
            return self._skip(OP_MAPREAD, (offset, size, self.model.size),
                              "skipping seek/read past end of file")
        self._log(OP_MAPREAD, (offset, size, self.model.size))
        assert self.fd is not None
        try:
            data = self.fs.mmap_read(self.fd, offset, size)
        except OSError as exc:
            if exc.errno in _UNSUPPORTED:
                return self._unsupported_now(OP_MAPREAD, exc)
            self._prterr("domapread: mmap", exc)
            self._fail(190)
        if len(data) != size:
            self.prt(f"short mapped read: {len(data):#x} bytes instead of {size:#x}")
            self._fail(190)
        self._check_eofpage("Read", offset, size)
        self._check_buffers(data, offset)

    def _dowrite(self, offset: int, size: int) -> None:
        offset -= offset % self.opts.writebdy
        if size == 0:
            return self._skip(OP_WRITE, (offset, size, self.model.size),
                              "skipping zero size write")
        self._log(OP_WRITE, (offset, size, self.model.size))
        data = self.pattern.get(self.testcalls, offset, size)
        assert self.fd is not None
        try:
            n = self.fs.pwrite(self.fd, data, offset)
        except OSError as exc:
            self._prterr("dowrite: write", exc)
            self._fail(151)
        self.model.write(offset, data)
        if n != size:
            self.prt(f"short write: {n:#x} bytes instead of {size:#x}")
            self._fail(151)
        if self.opts.do_fsync:
            try:
                self.fs.fsync(self.fd)
            except OSError as exc:
                self.prt(f"fsync() failed: {os.strerror(exc.errno or 0)}")
                self._fail(152)

    def _domapwrite(self, offset: int, size: int) -> None:
        offset -= offset % self.opts.writebdy
        if size == 0:
            return self._skip(OP_MAPWRITE, (offset, size, self.model.size),
                              "skipping zero size write")
        self._log(OP_MAPWRITE, (offset, size, self.model.size))
        data = self.pattern.get(self.testcalls, offset, size)
        fd = self.fd
        assert fd is not None
        end = offset + size
        if end > self.model.size:  # a mapping cannot extend the file: fsx truncates up first
            try:
                self.fs.ftruncate(fd, end)
            except OSError as exc:
                self._prterr("domapwrite: ftruncate", exc)
                self._fail(201)
            self.model.truncate(end)
        try:
            self.fs.mmap_write(fd, offset, data)
        except OSError as exc:
            if exc.errno in _UNSUPPORTED:
                return self._unsupported_now(OP_MAPWRITE, exc)
            self._prterr("domapwrite: mmap", exc)
            self._fail(202)
        self.model.write(offset, data)
        self._check_eofpage("Write", offset, size)

    def _dotruncate(self, size: int) -> None:
        size -= size % self.opts.truncbdy
        self._largest(size, "truncating")
        self._log(OP_TRUNCATE, (0, size, self.model.size))
        assert self.fd is not None
        try:
            self.fs.ftruncate(self.fd, size)
        except OSError as exc:
            self.prt(f"ftruncate1: {size:x}")
            self._prterr("dotruncate: ftruncate", exc)
            self._fail(160)
        self.model.truncate(size)

    def _largest(self, end: int, what: str) -> None:
        """fsx's "truncating to largest ever: 0x..." notes (not with -q)."""
        if end > self.biggest:
            self.biggest = end
            if not self.opts.quiet:
                self.prt(f"{what} to largest ever: {end:#x}")

    def _fallocate(self, op: int, mode: int, offset: int, length: int, what: str) -> bool:
        """One fallocate call; False when the target turned out not to support it."""
        assert self.fd is not None
        try:
            self.fs.fallocate(self.fd, mode, offset, length)
        except OSError as exc:
            if exc.errno in _UNSUPPORTED:
                self._unsupported_now(op, exc)
                return False
            self.prt(f"{what.replace('_', ' ')}: {offset:#x} to {offset + length:#x}")
            self._prterr(f"do_{what}: fallocate", exc)
            self._fail(161)
        return True

    def _do_preallocate(self, offset: int, length: int, keep_size: bool) -> None:
        flags = FL_KEEP_SIZE if keep_size else FL_NONE
        if length == 0:
            return self._skip(OP_FALLOCATE, (offset, length, self.model.size),
                              "skipping zero length fallocate", flags)
        end = 0 if keep_size else offset + length
        self._largest(end, "fallocating")
        self._log(OP_FALLOCATE, (offset, length, self.model.size), flags)
        mode = FALLOC_FL_KEEP_SIZE if keep_size else 0
        if self._fallocate(OP_FALLOCATE, mode, offset, length, "preallocate"):
            self.model.fallocate(offset, length, keep_size)

    def _do_punch_hole(self, offset: int, length: int) -> None:
        size = self.model.size
        if length == 0:
            return self._skip(OP_PUNCH_HOLE, (offset, length, size),
                              "skipping zero length punch hole")
        if size <= offset:
            return self._skip(OP_PUNCH_HOLE, (offset, length, size),
                              "skipping hole punch off the end of the file")
        self._log(OP_PUNCH_HOLE, (offset, length, size))
        if self._fallocate(OP_PUNCH_HOLE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                           offset, length, "punch_hole"):
            self.model.punch_hole(offset, length)

    def _do_zero_range(self, offset: int, length: int, keep_size: bool) -> None:
        flags = FL_KEEP_SIZE if keep_size else FL_NONE
        if length == 0:
            return self._skip(OP_ZERO_RANGE, (offset, length, self.model.size),
                              "skipping zero length zero range", flags)
        end = 0 if keep_size else offset + length
        self._largest(end, "zero_range")
        self._log(OP_ZERO_RANGE, (offset, length, self.model.size), flags)
        mode = FALLOC_FL_ZERO_RANGE | (FALLOC_FL_KEEP_SIZE if keep_size else 0)
        if self._fallocate(OP_ZERO_RANGE, mode, offset, length, "zero_range"):
            self.model.zero_range(offset, length, keep_size)

    def _do_collapse_range(self, offset: int, length: int) -> None:
        size = self.model.size
        if offset + length >= size:
            return self._skip(OP_COLLAPSE_RANGE, (offset, length, size),
                              "skipping collapse range behind EOF")
        self._log(OP_COLLAPSE_RANGE, (offset, length, size))
        if self._fallocate(OP_COLLAPSE_RANGE, FALLOC_FL_COLLAPSE_RANGE, offset, length,
                           "collapse_range"):
            self.model.collapse_range(offset, length)

    def _do_insert_range(self, offset: int, length: int) -> None:
        size = self.model.size
        if offset >= size:
            return self._skip(OP_INSERT_RANGE, (offset, length, size),
                              "skipping insert range behind EOF")
        self._log(OP_INSERT_RANGE, (offset, length, size))
        if self._fallocate(OP_INSERT_RANGE, FALLOC_FL_INSERT_RANGE, offset, length,
                           "insert_range"):
            self.model.insert_range(offset, length)

    def _do_copy_range(self, offset: int, length: int, dest: int) -> None:
        size = self.model.size
        if offset >= size:
            return self._skip(OP_COPY_RANGE, (offset, length, dest, size),
                              "skipping copy range behind EOF")
        self._largest(dest + length, "copying")
        self._log(OP_COPY_RANGE, (offset, length, dest, size))
        fd = self.fd
        assert fd is not None
        src, dst, left, tries = offset, dest, length, 0
        while left > 0:
            try:
                nr = self.fs.copy_file_range(fd, fd, left, src, dst)
            except OSError as exc:
                if exc.errno == errno.EAGAIN and tries < 300:
                    tries += 1
                    continue
                if exc.errno in _UNSUPPORTED and left == length:
                    return self._unsupported_now(OP_COPY_RANGE, exc)
                self.prt(f"copy range: {offset:#x} to {offset + length:#x} at {dest:#x}")
                self._prterr("do_copy_range:", exc)
                self._fail(161)
            if nr > left or nr <= 0:
                self.prt(f"copy range: {offset:#x} to {offset + length:#x} at {dest:#x}")
                self.prt(f"do_copy_range: asked {left}, copied {nr}??")
                self._fail(161)
            src += nr
            dst += nr
            left -= nr
        self.model.copy_range(offset, length, dest)

    def _dofsync(self) -> None:
        self._log(OP_FSYNC, (0, 0, self.model.size))
        assert self.fd is not None
        try:
            self.fs.fsync(self.fd)
        except OSError as exc:
            self._prterr("dofsync", exc)
            self._fail(210)

    def reopen(self) -> None:
        """fsx's docloseopen(): close the file, drop its cached pages where the target
        can (its optional ``drop_caches(path)``; fsx writes 3 to drop_caches), and open
        it again."""
        assert self.fd is not None
        try:
            self.fs.close(self.fd)
        except OSError as exc:
            self._prterr("docloseopen: close", exc)
            self._fail(180)
        self.fd = None
        drop_caches = getattr(self.fs, "drop_caches", None)
        if callable(drop_caches):
            try:
                drop_caches(self.path)
            except OSError as exc:
                self._prterr("docloseopen: drop_caches", exc)
                self._fail(181)
        try:
            self.fd = self.fs.open(self.path, os.O_RDWR, 0)
        except OSError as exc:
            self._prterr("docloseopen: open", exc)
            self._fail(182)

    # -- checks ----------------------------------------------------------------------
    def check_size(self) -> None:
        """The target's size must be the model's after every operation."""
        assert self.fd is not None
        try:
            size = self.fs.fstat(self.fd).st_size
        except OSError as exc:
            self._prterr("check_size: fstat", exc)
            size = -1
        if size != self.model.size:
            # Targets have no lseek, so fsx's "seek" column repeats what fstat said.
            self.prt(f"Size error: expected {self.model.size:#x} stat {size:#x} "
                     f"seek {size:#x}")
            self.badoff = min(size, self.model.size) if size >= 0 else 0
            self._fail(120, badoff=self.badoff)

    def _check_buffers(self, buf: bytes, offset: int) -> None:
        good = self.model.buf
        size = len(buf)
        if buf == good[offset:offset + size]:
            return
        self.prt(f"READ BAD DATA: offset = {offset:#x}, size = {size:#x}, "
                 f"fname = {self.fname}")
        # the table in current fsx's layout: columns of 10, 6 and 6, two spaces apart
        self.prt(f"{'OFFSET':<10}  {'GOOD':<6}  {'BAD':<6}  RANGE")
        bad = _bad_bytes(buf, good, offset)
        for n, i in enumerate(itertools.islice(bad, 16)):
            off = offset + i
            self.prt(f"{f'0x{off:x}':<10}  0x{_short_at(good, off):04x}  "
                     f"0x{_short_at(buf, i):04x}  0x{n:x}")
            j = i + 1 if off & 1 else i
            opnum = buf[j] if j < size else 0
            if opnum:
                self.prt(f"operation# (mod 256) for the bad data may be {opnum}")
            else:
                self.prt("operation# (mod 256) for the bad data unknown, check HOLE "
                         "and EXTEND ops")
        first = offset + next(_bad_bytes(buf, good, offset))
        self.badoff = offset + next(_bad_bytes(buf, good, offset, reverse=True))
        self._fail(110, badoff=first)

    def _check_eofpage(self, what: str, offset: int, size: int) -> None:
        """The mapped last page must read as zeroes past EOF (POSIX mmap, fsx's
        check_eofpage())."""
        file_size = self.model.size
        tail = file_size & PAGE_MASK
        if not self.eofpage_checks or not tail or offset + size <= file_size & ~PAGE_MASK:
            return
        assert self.fd is not None
        try:
            past = self.fs.mmap_read(self.fd, file_size, PAGE_SIZE - tail)
        except OSError as exc:
            self.eofpage_checks = False
            self.prt(f"fsx: cannot map past EOF on this target ({exc}): "
                     "end-of-file page checks disabled")
            return
        if past == _ZERO_PAGE[:len(past)]:
            return
        i = next(k for k, byte in enumerate(past) if byte)
        self.prt(f"Mapped {what}: non-zero data past EOF ({file_size - 1:#x}) page offset "
                 f"{tail + i:#x} is {_short_at(past, i):#06x}")
        self._fail(205, badoff=file_size + i)

    def check_contents(self) -> None:
        """Read the whole file and the mapped EOF page and compare with the model."""
        size = self.model.size
        if size == 0:
            return
        assert self.fd is not None
        try:
            data = self.fs.pread(self.fd, size, 0)
        except OSError as exc:
            self._prterr("check_contents: read", exc)
            self._fail(141)
        if len(data) != size:
            self.prt(f"short check read: {len(data):#x} bytes instead of {size:#x}")
            self._fail(141)
        self._check_buffers(data, 0)
        if self.mapped_reads:
            self._check_eofpage("check_contents", size - 1, 1)

    # -- failure ---------------------------------------------------------------------
    def _prterr(self, prefix: str, exc: OSError) -> None:
        self.prt(f"{prefix}: {os.strerror(exc.errno) if exc.errno else exc}")

    def logdump(self) -> None:
        self.prt(f"LOG DUMP ({len(self.log)} total operations):")
        start = max(0, len(self.log) - LOGSIZE)
        for i in range(start, len(self.log)):
            for line in dump_line(i + 1, self.log[i], self.badoff).split("\n"):
                self.prt(line)

    def _fail(self, status: int, *, badoff: int = -1, dump: bool = True) -> NoReturn:
        """fsx's report_failure(): dump the log, save the files, raise FsxFailure."""
        problem = self.lines[-1] if self.lines else f"fsx failure {status}"
        for line in self.lines:
            if line.startswith(("READ BAD DATA", "Size error", "Mapped ")):
                problem = line
                break
        artifacts: dict[str, Path] = {}
        if dump:
            self.logdump()
            if self.artifacts is not None:
                artifacts = self._save(self.badoff)
        where = f" (operation {len(self.log)}: {OP_NAMES[self.log[-1].op]})" if (
            dump and self.log) else ""
        if badoff >= 0:
            where += f"; first bad offset {badoff:#x}"
        raise FsxFailure(problem + where, status=status, badoff=badoff,
                         report="\n".join(self.lines), artifacts=artifacts)

    def _save(self, badoff: int) -> dict[str, Path]:
        assert self.artifacts is not None
        base = self.artifacts
        base.parent.mkdir(parents=True, exist_ok=True)
        ops = write_fsxops(f"{base}.fsxops", self.log, badoff)
        self.prt(f'Log of operations saved to "{ops}"; replay with --replay-ops')
        good = Path(f"{base}.fsxgood")
        good.write_bytes(self.model.contents())
        self.prt("Correct content saved for comparison")
        saved = {"fsxops": ops, "fsxgood": good}
        kept = Path(f"{base}.dat")
        if self._keep_target_file(kept):
            saved["dat"] = kept
            self.prt(f'(maybe hexdump "{kept}" vs "{good}"; {kept.name} is what '
                     f'{self.fname} held)')
        else:
            self.prt(f'(maybe hexdump "{self.fname}" vs "{good}")')
        log = Path(f"{base}.fsxlog")
        log.write_text("\n".join(self.lines) + "\n")
        return {**saved, "fsxlog": log}

    def _keep_target_file(self, path: Path) -> bool:
        """Copy what the target's file holds beside the other files, for the hexdump
        fsx suggests: a directory target's scratch directory, and a model's file, are
        gone once the test ends. False when the target cannot be read any more."""
        try:
            fd = self.fs.open(self.path, os.O_RDONLY)
            try:
                size = self.fs.fstat(fd).st_size
                data = self.fs.pread(fd, size, 0) if size else b""
            finally:
                self.fs.close(fd)
        except Exception:  # a target that already failed may fail here too: keep the report
            return False
        path.write_bytes(data)
        return True

    # -- whole runs ------------------------------------------------------------------
    def finish(self) -> FsxResult:
        """Close, reopen and compare the whole file; print fsx's A-OK line."""
        self.reopen()
        self.check_size()
        self.check_contents()
        self.close()
        self.prt(f"All {self.testcalls} operations completed A-OK!")
        self.prt(summary_line(self.result(), self.fs))
        return self.result()

    def _record(self) -> None:
        """fsx --record-ops: keep the log of a passing run too."""
        assert self.artifacts is not None
        self.artifacts.parent.mkdir(parents=True, exist_ok=True)
        ops = write_fsxops(f"{self.artifacts}.fsxops", self.log)
        self.prt(f'Log of operations saved to "{ops}"; replay with --replay-ops')

    def close(self) -> None:
        """Close the file if it is open (also after a failure)."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                self.fs.close(fd)
            except OSError as exc:
                self._prterr("close", exc)

    def result(self) -> FsxResult:
        return FsxResult(self.testcalls, len(self.log), +self.done,
                         +self.skipped_unsupported, +self.skipped_disabled,
                         +self.skipped_noop, +self.converted, self._elapsed, self._cpu,
                         list(self.lines))

    def run(self, replay: Sequence[LogEntry] | None = None) -> FsxResult:
        """``numops`` random operations, or every operation of a replayed log."""
        if replay is not None:
            needed = max((extent(entry) + 1 for entry in replay), default=0)
            if needed > self.maxfilelen:
                self._setup(needed)
        self.start()
        began, began_cpu = time.perf_counter(), time.process_time()
        try:
            if replay is None:
                step = self.step
                for _ in range(self.opts.numops):
                    step()
            else:
                self._replay(replay)
            self._elapsed = time.perf_counter() - began
            self._cpu = time.process_time() - began_cpu
            self.finish()
        except FsxFailure:
            raise
        except Exception as exc:  # the target crashed: report it with the log
            self.prt(f"{type(exc).__name__} from the target: {exc}")
            try:
                self._fail(99)
            except FsxFailure as failure:
                raise failure from exc
        finally:
            self._elapsed = self._elapsed or time.perf_counter() - began
            self._cpu = self._cpu or time.process_time() - began_cpu
            self.close()
        if self.record and self.artifacts is not None:
            self._record()
        return self.result()

    def _replay(self, entries: Sequence[LogEntry]) -> None:
        """fsx --replay-ops: skipped entries are logged again without running.

        Each entry records the file size before it, so after an operation the log ran and
        this target cannot (a clone, a fallocate mode it lacks), the file is truncated to
        the size the log's next operation saw, on the target and in the model alike:
        the rest of the log then does what it did when it was recorded, instead of
        failing on a file of another size."""
        diverged = False
        for i, entry in enumerate(entries):
            if entry.flags & FL_SKIPPED:
                args = (*entry.args[:-1], self.model.size)
                self.log.append(LogEntry(entry.op, args, entry.flags))
                self.skipped_noop[OP_NAMES[entry.op]] += 1
                continue
            self.step(entry)
            if i + 1 == len(entries) or self.model.size == entries[i + 1].args[-1]:
                continue
            recorded = entries[i + 1].args[-1]
            if self.log[-1].flags & FL_SKIPPED:
                self._follow_log_size(i + 1, entry, recorded)
            elif not diverged:
                diverged = True
                self.prt(f"fsx: the replay leaves the log's file sizes after operation "
                         f"{i + 1} ({entry.name}): {self.model.size:#x} here, "
                         f"{recorded:#x} when recorded (replay with the fsx options and "
                         "block size the log was recorded with)")

    def _follow_log_size(self, opnum: int, entry: LogEntry, size: int) -> None:
        self.prt(f"fsx: operation {opnum} ({entry.name}) ran when the log was recorded, not "
                 f"here: truncating {self.model.size:#x} to {size:#x}, the size the log "
                 "had next")
        self.closeopen = False
        self._log(OP_TRUNCATE, (0, size, self.model.size))
        assert self.fd is not None
        try:
            self.fs.ftruncate(self.fd, size)
        except OSError as exc:
            self._prterr("replay: ftruncate", exc)
            self._fail(160)
        self.model.truncate(size)
        if self.opts.sizechecks:
            self.check_size()


def summary_line(result: FsxResult, fs: object) -> str:
    """One line: what ran, and what was skipped and why."""

    def counts(counter: Counter[str]) -> str:
        return ", ".join(f"{name} {n}" for name, n in sorted(counter.items()))

    parts = [f"fsx: {result.testcalls} operations in {result.seconds:.2f} s "
             f"({result.ops_per_second:,.0f} ops/s, {result.ops_per_cpu_second:,.0f} per "
             f"CPU second), {result.skipped} skipped"]
    if result.skipped_unsupported:
        parts.append(f"unsupported by {type(fs).__name__}: "
                     f"{counts(result.skipped_unsupported)}")
    if result.converted:
        parts.append(f"done without mmap: {counts(result.converted)}")
    if result.skipped_disabled:
        parts.append(f"turned off: {counts(result.skipped_disabled)}")
    if result.skipped_noop:
        parts.append(f"nothing to do: {counts(result.skipped_noop)}")
    return "; ".join(parts)
