"""fsx's operations, each as fsx's do*() function: log it, apply it to the target and the
model, check what it read.

Each takes an operation already trimmed to the file and the limits (:mod:`.engine` does
that) and aligns it to the options' boundaries. An operation with nothing to do is logged
as skipped, as fsx logs it; a target that answers EOPNOTSUPP to an operation it listed
has it disabled from then on; any other error is fsx's failure status for that call.
"""

from __future__ import annotations

import errno
import os

from pytest_folio.fsx.log import (
    FL_KEEP_SIZE,
    FL_NONE,
    OP_COLLAPSE_RANGE,
    OP_COPY_RANGE,
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
)
from pytest_folio.fsx.probe import FALLOC_MODE_OF, UNSUPPORTED
from pytest_folio.fsx.state import PAGE_MASK, PAGE_SIZE, FsxState
from pytest_folio.linux.uapi import FALLOC_FL_KEEP_SIZE

# The words fsx uses for the two: in "skipping zero length ...", "... to largest ever",
# and its do_*() function's name.
_EXTENDING = {OP_FALLOCATE: ("fallocate", "fallocating", "preallocate"),
              OP_ZERO_RANGE: ("zero range", "zero_range", "zero_range")}

_BEHIND_EOF = {OP_PUNCH_HOLE: "skipping hole punch off the end of the file",
               OP_COLLAPSE_RANGE: "skipping collapse range behind EOF",
               OP_INSERT_RANGE: "skipping insert range behind EOF"}


class FsxOperations(FsxState):
    """The twelve operations and close/open on top of a run's state."""

    def _doread(self, offset: int, size: int, op: int = OP_READ) -> None:
        """A read or (``op`` OP_MAPREAD) a mapped read, compared with the model."""
        offset -= offset % self.opts.readbdy
        file_size = self.model.size
        if size == 0:
            return self._skip(op, (offset, size, file_size), "skipping zero size read")
        if offset + size > file_size:
            return self._skip(op, (offset, size, file_size),
                              "skipping seek/read past end of file")
        self._log(op, (offset, size, file_size))
        if op == OP_MAPREAD:
            assert self.fd is not None
            return self._mapread(self.fd, offset, size)
        self._read_and_check(offset, size, "doread: read", "short read")

    def _mapread(self, fd: int, offset: int, size: int) -> None:
        """A mapped read; one that reaches the last page also checks the zeroes past EOF
        there. fsx checks them in the mapping it read through, and so does this: it maps
        on to the end of that page in the same call (and only if the target refuses
        that, reads and checks in two calls)."""
        file_size = self.model.size
        tail = file_size & PAGE_MASK
        if self.eofpage_checks and tail and offset + size > file_size - tail:
            try:
                got = self.fs.mmap_read(fd, offset, file_size + PAGE_SIZE - tail - offset)
            except OSError:
                got = b""  # perhaps only past EOF: the two calls below tell
            if len(got) >= size:
                self._check_past_eof("Read", file_size, memoryview(got)[file_size - offset:])
                return self._check_buffers(memoryview(got)[:size], offset)
        try:
            data = self.fs.mmap_read(fd, offset, size)
        except OSError as exc:
            if exc.errno in UNSUPPORTED:
                return self._unsupported_now(OP_MAPREAD, exc)
            self._prterr("domapread: mmap", exc)
            self._fail(190)
        if len(data) != size:
            self.prt(f"short mapped read: {len(data):#x} bytes instead of {size:#x}")
            self._fail(190)
        self._check_eofpage("Read", offset, size)
        self._check_buffers(data, offset)

    def _dowrite(self, offset: int, size: int, op: int = OP_WRITE) -> None:
        """A write or (``op`` OP_MAPWRITE) a mapped write of fsx's data for this
        operation; a mapped write first extends the file as fsx does (a mapping cannot)
        and then checks the zeroes past EOF."""
        offset -= offset % self.opts.writebdy
        if size == 0:
            return self._skip(op, (offset, size, self.model.size), "skipping zero size write")
        self._log(op, (offset, size, self.model.size))
        data = self.pattern.get(self.testcalls, offset, size)
        fd = self.fd
        assert fd is not None
        if self.opts.pollute_eof and offset + size > self.model.size:
            self.pollute_eofpage(offset + size)
        if op == OP_MAPWRITE:
            return self._mapwrite(fd, offset, data)
        try:
            n = self.fs.pwrite(fd, data, offset)
        except OSError as exc:
            self._prterr("dowrite: write", exc)
            self._fail(151)
        self.model.write(offset, data)
        if n != size:
            self.prt(f"short write: {n:#x} bytes instead of {size:#x}")
            self._fail(151)
        if self.opts.do_fsync:
            try:
                self.fs.fsync(fd)
            except OSError as exc:
                self.prt(f"fsync() failed: {os.strerror(exc.errno or 0)}")
                self._fail(152)

    def _mapwrite(self, fd: int, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if end > self.model.size:
            self._syscall(201, "domapwrite: ftruncate", self.fs.ftruncate, fd, end)
            self.model.truncate(end)
        try:
            self.fs.mmap_write(fd, offset, data)
        except OSError as exc:
            if exc.errno in UNSUPPORTED:
                return self._unsupported_now(OP_MAPWRITE, exc)
            self._prterr("domapwrite: mmap", exc)
            self._fail(202)
        self.model.write(offset, data)
        self._check_eofpage("Write", offset, len(data))

    def _dotruncate(self, size: int) -> None:
        size -= size % self.opts.truncbdy
        self._largest(size, "truncating")
        self._log(OP_TRUNCATE, (0, size, self.model.size))
        assert self.fd is not None
        if self.opts.pollute_eof and size != self.model.size:
            self.pollute_eofpage(size)
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

    def _fallocate(self, op: int, offset: int, length: int, what: str,
                   keep_size: bool = False) -> bool:
        """The fallocate call of ``op``; False when the target turned out not to
        support it."""
        mode = FALLOC_MODE_OF[op] | (FALLOC_FL_KEEP_SIZE if keep_size else 0)
        assert self.fd is not None
        try:
            self.fs.fallocate(self.fd, mode, offset, length)
        except OSError as exc:
            if exc.errno in UNSUPPORTED:
                self._unsupported_now(op, exc)
                return False
            self.prt(f"{what.replace('_', ' ')}: {offset:#x} to {offset + length:#x}")
            self._prterr(f"do_{what}: fallocate", exc)
            self._fail(161)
        return True

    def _do_preallocate(self, offset: int, length: int, keep_size: bool,
                        op: int = OP_FALLOCATE) -> None:
        """fallocate, or (``op`` OP_ZERO_RANGE) zero range: the two that extend the
        file unless KEEP_SIZE."""
        skip_word, largest_word, what = _EXTENDING[op]
        flags = FL_KEEP_SIZE if keep_size else FL_NONE
        if length == 0:
            return self._skip(op, (offset, length, self.model.size),
                              f"skipping zero length {skip_word}", flags)
        self._largest(0 if keep_size else offset + length, largest_word)
        self._log(op, (offset, length, self.model.size), flags)
        if self.opts.pollute_eof and not keep_size and offset + length > self.model.size:
            self.pollute_eofpage(offset + length)
        if self._fallocate(op, offset, length, what, keep_size):
            model = self.model
            (model.fallocate if op == OP_FALLOCATE else model.zero_range)(
                offset, length, keep_size)

    def _do_in_file(self, op: int, offset: int, length: int) -> None:
        """Punch hole, collapse range or insert range: operations on data inside the
        file, skipped where it ends (fsx's do_punch_hole(), do_collapse_range(),
        do_insert_range())."""
        size = self.model.size
        if length == 0:  # collapse and insert ranges of none are skipped before this
            return self._skip(op, (offset, length, size), "skipping zero length punch hole")
        if (offset + length if op == OP_COLLAPSE_RANGE else offset) >= size:
            return self._skip(op, (offset, length, size), _BEHIND_EOF[op])
        self._log(op, (offset, length, size))
        if self.opts.pollute_eof and op != OP_PUNCH_HOLE:    # collapse and insert resize
            self.pollute_eofpage(size + length if op == OP_INSERT_RANGE else size - length)
        name = OP_NAMES[op]
        if self._fallocate(op, offset, length, name):
            getattr(self.model, name)(offset, length)  # FileModel names them as fsx does

    def _do_copy_range(self, offset: int, length: int, dest: int) -> None:
        size = self.model.size
        if offset >= size:
            return self._skip(OP_COPY_RANGE, (offset, length, dest, size),
                              "skipping copy range behind EOF")
        self._largest(dest + length, "copying")
        self._log(OP_COPY_RANGE, (offset, length, dest, size))
        fd = self.fd
        assert fd is not None
        if self.opts.pollute_eof and dest + length > size:
            self.pollute_eofpage(dest + length)
        src, dst, left, tries = offset, dest, length, 0
        while left > 0:
            try:
                nr = self.fs.copy_file_range(fd, fd, left, src, dst)
            except OSError as exc:
                if exc.errno == errno.EAGAIN and tries < 300:
                    tries += 1
                    continue
                if exc.errno in UNSUPPORTED and left == length:
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
        self._syscall(210, "dofsync", self.fs.fsync, self.fd)

    def reopen(self) -> None:
        """fsx's docloseopen(): close the file, drop its cached pages where the target
        can (a :class:`DropCaches`; fsx writes 3 to drop_caches), and open
        it again."""
        self._syscall(180, "docloseopen: close", self.fs.close, self.fd)
        self.fd = None
        if self.dropper is not None:
            self._syscall(181, "docloseopen: drop_caches", self.dropper.drop_caches,
                          self.path)
        self.fd = self._syscall(182, "docloseopen: open", self.fs.open, self.path, os.O_RDWR, 0)
