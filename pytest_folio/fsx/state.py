"""One fsx run's state, its operation log, the checks after each operation, and the
failure path everything else ends in.

The operations (:mod:`.ops`) and the loop (:mod:`.engine`) build on this class: they
change the target and the model, then call the checks here; a check that fails prints
fsx's report (formatted by :mod:`.report`), saves the files (:mod:`.artifacts`) and
raises :class:`~pytest_folio.fsx.report.FsxFailure`, as fsx's report_failure() does.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from pytest_folio import coverage
from pytest_folio.fsx.artifacts import read_target_file, save_failure
from pytest_folio.fsx.config import FsxOptions
from pytest_folio.fsx.expected import DataPattern, FileModel
from pytest_folio.fsx.log import (
    FL_CLOSE_OPEN,
    FL_NONE,
    FL_SKIPPED,
    OP_FSYNC,
    OP_MAPWRITE,
    OP_NAMES,
    OP_TRUNCATE,
    OP_WRITE,
    LogEntry,
)
from pytest_folio.fsx.probe import EnabledOps
from pytest_folio.fsx.report import (
    FsxFailure,
    FsxResult,
    bad_bytes,
    bad_data_lines,
    eofpage_line,
    error_line,
    failure_summary,
    logdump_lines,
    size_error_line,
)
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.targets.protocols import AnyFileSystem, DropCaches

PAGE_MASK = PAGE_SIZE - 1
_ZERO_PAGE = bytes(PAGE_SIZE)
_T = TypeVar("_T")
_new_entry = tuple.__new__  # LogEntry's own __new__ is a Python function: one per operation
# random.randbytes(n) asks getrandbits() for 8n bits, a C int: 256 MiB or more overflows.
RANDBYTES_CHUNK = 16 << 20


def randbytes(rng: random.Random, n: int) -> bytes | bytearray:
    """``rng.randbytes(n)`` for any ``n``: the same bytes, made in chunks (getrandbits()
    fills 32-bit words in order, so chunks of whole words join into what one call makes)."""
    if n <= RANDBYTES_CHUNK:
        return rng.randbytes(n)
    data = bytearray()
    for at in range(0, n, RANDBYTES_CHUNK):
        data += rng.randbytes(min(RANDBYTES_CHUNK, n - at))
    return data


class _CountsByName:
    """A count per operation, kept as a list the hot path increments by operation
    number, read as a Counter of operation names (what FsxResult and callers see)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.counts = f"_n_{name}"

    def __get__(self, state: object, owner: type | None = None) -> Counter[str]:
        counts: list[int] = getattr(state, self.counts)
        return Counter({OP_NAMES[op]: n for op, n in enumerate(counts) if n})


def _record(op: int, args: tuple[int, ...]) -> None:
    """Tell --folio-coverage what an fsx operation was given: ``args`` are its offset
    and length (a truncate's: 0 and the new size), then the size before it."""
    name = f"fsx {OP_NAMES[op]}"
    if op == OP_FSYNC:
        coverage.record(name)
    elif op == OP_TRUNCATE:
        coverage.record(name, length=args[1])
    else:
        coverage.record(name, offset=args[0], length=args[1],
                        data="random" if op in (OP_WRITE, OP_MAPWRITE) else None)


class FsxState:
    """One fsx run against ``fs``, on the file ``path``: what every part of it shares."""

    def __init__(self, fs: AnyFileSystem, options: FsxOptions | None = None, *,
                 path: str = "fsx.dat", fname: str | None = None,
                 artifacts: str | os.PathLike[str] | None = None, record: bool = False,
                 echo: Callable[[str], None] | None = None, note: str = "") -> None:
        self.fs = fs
        # asked once: isinstance against a runtime-checkable Protocol walks its members
        self.dropper: DropCaches | None = fs if isinstance(fs, DropCaches) else None
        self.opts = options or FsxOptions()
        self.path = path
        self.fname = fname or path
        self.artifacts = Path(artifacts) if artifacts is not None else None
        self.record = record
        self.note = note    # a comment line for the .fsxops files (log.recorded_note)
        self.echo = echo
        self.lines: list[str] = []
        self.log: list[LogEntry] = []
        self.testcalls = 0
        self.badoff = -1
        self.fd: int | None = None
        # the counts behind done, skipped_noop, ...: one per operation
        self._n_done = [0] * len(OP_NAMES)
        self._n_skipped_noop = [0] * len(OP_NAMES)
        self._n_skipped_unsupported = [0] * len(OP_NAMES)
        self._n_skipped_disabled = [0] * len(OP_NAMES)
        self._n_converted = [0] * len(OP_NAMES)
        self.eofpage_checks = True
        self.pollute_ok = True      # -e: False once the target refused a mapped write
        self.closeopen = False
        self.block_size = 0
        self._elapsed = 0.0
        self._cpu = 0.0
        self._setup(self.opts.maxfilelen)

    def _setup(self, maxfilelen: int) -> None:
        """The model, the data and the random numbers for a file of ``maxfilelen``."""
        opts = self.opts
        self.maxfilelen = maxfilelen
        rng = random.Random(opts.seed)
        self._getrandbits = rng.getrandbits  # fsx's random(): 31 bits
        self.pattern = DataPattern(randbytes(rng, maxfilelen))
        self.model = FileModel(maxfilelen)
        self.biggest = 0
        self._closeprob_limit = (1 << 28) // opts.closeprob if opts.closeprob else -1
        self.caps = EnabledOps(opts, None if opts.quiet else self.prt)

    def prt(self, line: str) -> None:
        self.lines.append(line)
        if self.echo is not None:
            self.echo(line)

    def _prterr(self, prefix: str, exc: OSError) -> None:
        self.prt(error_line(prefix, exc))

    def _syscall(self, status: int, what: str, call: Callable[..., _T], *args: Any) -> _T:
        """``call(*args)``; an OSError from it is fsx's failure ``status``, reported as
        ``what: strerror``."""
        try:
            return call(*args)
        except OSError as exc:
            self._prterr(what, exc)
            self._fail(status)

    def _fstat(self) -> os.stat_result:
        assert self.fd is not None
        return self.fs.fstat(self.fd)

    # -- the log and its counts -------------------------------------------------------
    done = _CountsByName()
    skipped_noop = _CountsByName()         # nothing to do: zero length, past EOF...
    skipped_unsupported = _CountsByName()  # the target lacks them
    skipped_disabled = _CountsByName()     # the options turn them off
    converted = _CountsByName()            # mapped ones done as plain calls, for want of mmap

    def _log(self, op: int, args: tuple[int, ...], flags: int = FL_NONE) -> None:
        if self.closeopen:
            flags |= FL_CLOSE_OPEN
        self.log.append(_new_entry(LogEntry, (op, args, flags)))
        if flags & FL_SKIPPED:
            self._n_skipped_noop[op] += 1
        else:
            self._n_done[op] += 1
            if coverage.on():
                _record(op, args)

    def _log_disabled(self, op: int, args: tuple[int, ...], flags: int = FL_NONE, *,
                      unsupported: bool) -> None:
        """An operation turned off by the options or missing from the target."""
        flags |= FL_SKIPPED | (FL_CLOSE_OPEN if self.closeopen else 0)
        self.log.append(_new_entry(LogEntry, (op, args, flags)))
        (self._n_skipped_unsupported if unsupported else self._n_skipped_disabled)[op] += 1

    def _skip(self, op: int, args: tuple[int, ...], why: str, flags: int = FL_NONE) -> None:
        """An operation with nothing to do (zero length, past EOF, ...), as fsx logs it."""
        if not self.opts.quiet:
            self.prt(why)
        self._log(op, args, flags | FL_SKIPPED)

    def _unsupported_now(self, op: int, exc: OSError) -> None:
        """The target said EOPNOTSUPP to an operation it listed: skip it from now on."""
        last = self.log[-1]
        self.log[-1] = last._replace(flags=last.flags | FL_SKIPPED)
        self._n_done[op] -= 1
        self._n_skipped_unsupported[op] += 1
        self.caps.disable(op, os.strerror(exc.errno or 0))

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
            self.prt(size_error_line(self.model.size, size))
            self.badoff = min(size, self.model.size) if size >= 0 else 0
            self._fail(120, badoff=self.badoff)

    def _check_buffers(self, buf: bytes | memoryview, offset: int) -> None:
        good = self.model.buf
        if good.startswith(buf, offset):  # a memcmp in place: no copy of the good bytes
            return
        for line in bad_data_lines(buf, good, offset, self.fname):
            self.prt(line)
        first = offset + next(bad_bytes(buf, good, offset))
        self.badoff = offset + next(bad_bytes(buf, good, offset, reverse=True))
        self._fail(110, badoff=first)

    def _read_and_check(self, offset: int, size: int, what: str, short: str) -> None:
        """Read ``size`` bytes at ``offset`` and compare them with the model; an error
        (``what: strerror``) or a short read (``short: ...``) is fsx's status 141."""
        assert self.fd is not None
        try:
            data = self.fs.pread(self.fd, size, offset)
        except OSError as exc:
            self._prterr(what, exc)
            self._fail(141)
        if len(data) != size:
            self.prt(f"{short}: {len(data):#x} bytes instead of {size:#x}")
            self._fail(141)
        self._check_buffers(data, offset)

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
        self._check_past_eof(what, file_size, past)

    def _check_past_eof(self, what: str, file_size: int, past: bytes | memoryview) -> None:
        """``past``, what a mapping shows from EOF to the end of its page, is zeroes."""
        if _ZERO_PAGE.startswith(past):  # a memcmp (comparing memoryviews is per byte)
            return
        i = next(k for k, byte in enumerate(past) if byte)
        self.prt(eofpage_line(what, file_size, past, i))
        self._fail(205, badoff=file_size + i)

    def pollute_eofpage(self, new_size: int) -> None:
        """fsx's ``-e 1``, before an operation that changes the size to ``new_size``:
        write junk through a mapping past EOF into the EOF page (up to the new size when
        it grows, to the page's end when it shrinks), where the model holds zeroes, so a
        size change that does not zero what it exposes shows stale data. Targets that
        cannot write there turn it off with a note."""
        size = self.model.size
        tail = size & PAGE_MASK
        length = min(PAGE_SIZE - tail, self.maxfilelen - size)
        if new_size > size:
            length = min(length, new_size - size)
        if not tail or length <= 0 or not self.pollute_ok or not self.caps.mapped_writes:
            return
        assert self.fd is not None
        try:
            self.fs.mmap_write(self.fd, size, self.pattern.get(self.testcalls, size, length))
        except OSError as exc:
            self.pollute_ok = False
            self.prt(f"fsx: cannot write past EOF through a mapping on this target ({exc}): "
                     "EOF pollution (-e) disabled")

    def flush(self) -> None:
        """fsx's ``-f``: after an operation, write the file back and drop its cached
        pages where the target can (its ``drop_caches(path)``), so the next operation
        reads what reached the file system."""
        assert self.fd is not None
        if OP_FSYNC not in self.caps.unsupported:
            self._syscall(212, "doflush: fsync", self.fs.fsync, self.fd)
        if self.dropper is not None:
            self._syscall(213, "doflush: drop_caches", self.dropper.drop_caches, self.path)

    def check_contents(self) -> None:
        """Read the whole file and the mapped EOF page and compare with the model."""
        size = self.model.size
        if size == 0:
            return
        self._read_and_check(0, size, "check_contents: read", "short check read")
        if self.caps.mapped_reads:
            self._check_eofpage("check_contents", size - 1, 1)

    # -- failure ---------------------------------------------------------------------
    def logdump(self) -> None:
        for line in logdump_lines(self.log, self.badoff):
            self.prt(line)

    def _fail(self, status: int, *, badoff: int = -1, dump: bool = True) -> NoReturn:
        """fsx's report_failure(): dump the log, save the files, raise FsxFailure."""
        summary = failure_summary(self.lines, status, self.log, badoff, dumped=dump)
        artifacts: dict[str, Path] = {}
        if dump:
            self.logdump()
            if self.artifacts is not None:
                artifacts = save_failure(
                    self.artifacts, self.log, self.badoff, self.model.contents(),
                    read_target_file(self.fs, self.path), self.fname, self.prt, self.lines,
                    self.note)
        raise FsxFailure(summary, status=status, badoff=badoff,
                         report="\n".join(self.lines), artifacts=artifacts)

    def close(self) -> None:
        """Close the file if it is open (also after a failure)."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                self.fs.close(fd)
            except OSError as exc:
                self._prterr("close", exc)

    def result(self) -> FsxResult:
        return FsxResult(self.testcalls, len(self.log), self.done,
                         self.skipped_unsupported, self.skipped_disabled,
                         self.skipped_noop, self.converted, self._elapsed, self._cpu,
                         list(self.lines))
