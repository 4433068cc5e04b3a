"""What a run may do: fsx's operation toggles, less what the target turns out to lack.

fsx probes the file system before its loop (one byte of each fallocate mode and of
copy_file_range at EOF; EOPNOTSUPP or ENOSYS means no) and disables what fails, saying
so unless ``-q``. Here a target first declares what it has in ``features`` (a
AnyFileSystem object may have no mmap at all), the probe then checks what it declared,
and an operation that answers EOPNOTSUPP later is disabled from then on: all three end
in :meth:`EnabledOps.disable`, so a skipped operation is counted the same way
whichever found it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

from pytest_folio.fsx.config import FsxOptions
from pytest_folio.fsx.log import (
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
    OP_ZERO_RANGE,
)
from pytest_folio.linux.uapi import FALLOC_FEATURE_MODE, FALLOC_FL_KEEP_SIZE, falloc_mode_name
from pytest_folio.targets.capabilities import FS_FEATURES, features_of
from pytest_folio.targets.protocols import AnyFileSystem

UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.ENOTTY})
# The optional operations: those named as a feature of an optional call
# (capabilities.FS_FEATURES; mmap is no operation of its own), and the fallocate mode of
# the fallocate-like ones (KEEP_SIZE variants aside).
OPTIONAL = tuple(op for op, name in enumerate(OP_NAMES) if name in FS_FEATURES)
FALLOC_MODE_OF = {op: FALLOC_FEATURE_MODE[OP_NAMES[op]] for op in OPTIONAL
                  if op != OP_COPY_RANGE}
_TOGGLE_OF = {OP_FALLOCATE: "fallocate_calls", OP_PUNCH_HOLE: "punch_hole_calls",
              OP_ZERO_RANGE: "zero_range_calls", OP_COLLAPSE_RANGE: "collapse_range_calls",
              OP_INSERT_RANGE: "insert_range_calls", OP_COPY_RANGE: "copy_range_calls",
              OP_FSYNC: "fsync_calls"}
# What newer fsx versions record and no FileSystem target has (reflink and exchange).
NEVER = frozenset({OP_CLONE_RANGE, OP_DEDUPE_RANGE, OP_EXCHANGE_RANGE})


class EnabledOps:
    """Which operations run: ``enabled[op]``, the mapped and KEEP_SIZE variants, and
    which of the disabled ones the target lacks (``unsupported``) rather than the
    options turned off. ``say`` prints fsx's "disabling!" notes (None: quiet)."""

    def __init__(self, opts: FsxOptions, say: Callable[[str], None] | None) -> None:
        self.say = say
        self.enabled = [True] * len(OP_NAMES)
        for op, toggle in _TOGGLE_OF.items():
            self.enabled[op] = getattr(opts, toggle)
        for op in NEVER:
            self.enabled[op] = False
        self.unsupported: set[int] = set(NEVER)
        self.keep_size_calls = opts.keep_size_calls
        self.keep_size_unsupported = False
        self.mapped_reads = opts.mapped_reads
        self.mapped_writes = opts.mapped_writes

    def disable(self, op: int, why: str) -> None:
        """The target lacks ``op`` (fsx: "filesystem does not support ..., disabling!")."""
        if op in (OP_MAPREAD, OP_MAPWRITE):
            self.disable_mmap(why)
            return
        self.enabled[op] = False
        self.unsupported.add(op)
        if self.say is not None:
            what = ("copy range" if op == OP_COPY_RANGE
                    else f"fallocate mode {falloc_mode_name(FALLOC_MODE_OF[op])}")
            self.say(f"main: filesystem does not support {what}, disabling! ({why})")

    def disable_mmap(self, why: str) -> None:
        """Without mmap, mapped reads and writes become plain ones (fsx ``-R -W``)."""
        self.mapped_reads = self.mapped_writes = False
        self.unsupported.update((OP_MAPREAD, OP_MAPWRITE))
        if self.say is not None:
            self.say(f"main: filesystem does not support mmap ({why}): mapped reads and "
                     "writes become reads and writes")

    def disable_keep_size(self) -> None:
        self.keep_size_calls = False
        self.keep_size_unsupported = True
        if self.say is not None:
            self.say("main: filesystem does not support fallocate mode "
                     "FALLOC_FL_KEEP_SIZE, disabling!")


def truncate_extends(fs: AnyFileSystem, fd: int, size: int) -> bool:
    """fsx's check_trunc_hack(): whether ftruncate can extend the file (fsx refuses a
    file system where it cannot). The file is left at ``size``."""
    fs.ftruncate(fd, size + 100000)
    extended = fs.fstat(fd).st_size
    fs.ftruncate(fd, size)
    return extended == size + 100000


def probe(fs: AnyFileSystem, fd: int, size: int, caps: EnabledOps) -> None:
    """Disable what the target lacks: by its ``features``, then by trying each optional
    operation on one byte at EOF (``size``) as fsx does. The file is left at ``size``."""
    features = features_of(fs)
    if "mmap" not in features:
        caps.disable_mmap("it has no mmap")
    for op in OPTIONAL:
        feature = OP_NAMES[op]
        if not caps.enabled[op]:
            continue
        if feature not in features:
            caps.disable(op, f"it has no {feature}")
            continue
        try:
            if op == OP_COPY_RANGE:
                fs.copy_file_range(fd, fd, 1, 0, 1)
            else:
                fs.fallocate(fd, FALLOC_MODE_OF[op], size, 1)
                if op == OP_FALLOCATE and caps.keep_size_calls:
                    _probe_keep_size(fs, fd, size, caps)
        except OSError as exc:
            if exc.errno in UNSUPPORTED:
                caps.disable(op, os.strerror(exc.errno or 0))
        finally:
            fs.ftruncate(fd, size)


def _probe_keep_size(fs: AnyFileSystem, fd: int, size: int, caps: EnabledOps) -> None:
    try:
        fs.fallocate(fd, FALLOC_FL_KEEP_SIZE, size, 1)
    except OSError as exc:
        if exc.errno not in UNSUPPORTED:
            raise
        caps.disable_keep_size()
