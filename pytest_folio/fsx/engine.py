"""The fsx engine: random file operations applied to a FileSystem and to a model of the file.

It follows xfstests' ltp/fsx: each ``test()`` call (:meth:`FsxEngine.step`) picks an
operation with fsx's distribution (one random number chooses the operation and the
close/open decision, the next ones the offset and length), trims it to the file and the
limits, and hands it to the operation (:mod:`.ops`), which applies it to the model and
the target and compares what it read; the size is checked after every operation and a
whole-file compare ends the run (after a close and reopen). Operations the target cannot
do are skipped and counted (:mod:`.probe`), as fsx disables what its probes find
missing.

A failure prints fsx's report (:mod:`.report`) into :attr:`FsxEngine.lines`, writes the
``.fsxops``/``.fsxgood``/``.fsxlog`` files (:mod:`.artifacts`) when given a place for
them, and raises :class:`FsxFailure`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from pytest_folio.fsx.artifacts import record_fsxops
from pytest_folio.fsx.log import (
    FL_CLOSE_OPEN,
    FL_KEEP_SIZE,
    FL_SKIPPED,
    NR_OPS,
    OP_COLLAPSE_RANGE,
    OP_COPY_RANGE,
    OP_FALLOCATE,
    OP_INSERT_RANGE,
    OP_MAPREAD,
    OP_MAPWRITE,
    OP_PUNCH_HOLE,
    OP_READ,
    OP_TRUNCATE,
    OP_WRITE,
    OP_ZERO_RANGE,
    LogEntry,
    extent,
    op_args_count,
)
from pytest_folio.fsx.ops import FsxOperations
from pytest_folio.fsx.probe import probe, truncate_extends
from pytest_folio.fsx.report import LOGSIZE, FsxFailure, FsxResult, summary_line

__all__ = ["LOGSIZE", "FsxEngine", "FsxFailure", "FsxResult", "summary_line"]


def _trim_off_len(offset: int, size: int, limit: int) -> tuple[int, int]:
    """fsx's TRIM_OFF_LEN: wrap the offset into [0, limit), clip the length at limit."""
    if limit <= 0:
        return 0, 0
    offset %= limit
    if offset + size > limit:
        size = limit - offset
    return offset, size


class FsxEngine(FsxOperations):
    """One fsx run against ``fs``, on the file ``path`` (created, truncated)."""

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
        try:
            extends = truncate_extends(self.fs, self.fd, self.model.size)
        except OSError as exc:
            self._prterr("check_trunc_hack: ftruncate", exc)
            self._fail(131, dump=False)
        if not extends:
            self.prt("no extend on truncate! not posix!")
            self._fail(130, dump=False)
        probe(self.fs, self.fd, self.model.size, self.caps)

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
                if size and self.caps.enabled[op] and self.caps.keep_size_calls:
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
        if not self.log[-1].flags & FL_SKIPPED:
            if opts.flush:
                self.flush()
            if opts.check_file:
                self.check_contents()
        if self.closeopen:
            self.reopen()
        if opts.sizechecks:
            self.check_size()

    def _do(self, op: int, offset: int, size: int, offset2: int, keep_size: bool) -> None:
        """fsx's test() after the choice: toggles, trimming, then the operation."""
        model_size = self.model.size
        maxfilelen = self.maxfilelen
        caps = self.caps
        if op == OP_MAPREAD and not caps.mapped_reads:
            op = OP_READ
            self._n_converted[OP_MAPREAD] += 1
        elif op == OP_MAPWRITE and not caps.mapped_writes:
            op = OP_WRITE
            self._n_converted[OP_MAPWRITE] += 1
        elif not caps.enabled[op]:
            args = (offset, size, offset2, model_size) if op_args_count(op) == 4 else (
                offset, size, model_size)
            self._log_disabled(op, args, unsupported=op in caps.unsupported)
            return
        elif keep_size and not caps.keep_size_calls:  # only a replayed log gets here
            self._log_disabled(op, (offset, size, model_size), FL_KEEP_SIZE,
                               unsupported=caps.keep_size_unsupported)
            return
        if op in (OP_READ, OP_MAPREAD):
            self._doread(*_trim_off_len(offset, size, model_size), op)
        elif op in (OP_WRITE, OP_MAPWRITE):
            self._dowrite(*_trim_off_len(offset, size, maxfilelen), op)
        elif op == OP_TRUNCATE:
            self._dotruncate(size)
        elif op == OP_FALLOCATE:
            self._do_preallocate(*_trim_off_len(offset, size, maxfilelen), keep_size)
        elif op == OP_PUNCH_HOLE:
            self._do_in_file(op, *_trim_off_len(offset, size, model_size))
        elif op == OP_ZERO_RANGE:
            self._do_preallocate(*_trim_off_len(offset, size, maxfilelen), keep_size, op)
        elif op == OP_COLLAPSE_RANGE:
            offset, size = _trim_off_len(offset, size, model_size - 1)
            offset -= offset % self.block_size
            size -= size % self.block_size
            if size == 0:
                self._skip(op, (offset, size, model_size), "skipping zero length collapse range")
                return
            self._do_in_file(op, offset, size)
        elif op == OP_INSERT_RANGE:
            offset = offset % model_size if model_size else 0
            if model_size + size > maxfilelen:
                size = maxfilelen - model_size
            offset -= offset % self.block_size
            size -= size % self.block_size
            if size == 0 or model_size + size > maxfilelen:
                self._skip(op, (offset, size, model_size), "skipping zero length insert range")
                return
            self._do_in_file(op, offset, size)
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
            self.prt(record_fsxops(self.artifacts, self.log, self.note))
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
                self._n_skipped_noop[entry.op] += 1
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
        self._syscall(160, "replay: ftruncate", self.fs.ftruncate, self.fd, size)
        self.model.truncate(size)
        if self.opts.sizechecks:
            self.check_size()
