"""``python -m pytest_folio shrink LOG``: the shortest operation log that still fails.

``LOG`` is a failing ``.fsxops`` (ours, or one recorded by xfstests' fsx with
``--record-ops``) replayed against ``--folio-fs``, or a failing ``.mtdops`` replayed
against ``--folio-mtd``. Each candidate runs on a fresh file system or device from the
target, as a test's replay does; :func:`~pytest_folio.shrink.ddmin` drops operations
while the replay still fails the same way (the same fsx exit status; for fsx for flash,
any check), and the shortest log is written beside ``LOG`` as ``NAME.min.fsxops`` /
``NAME.min.mtdops`` (or to ``-o FILE``), ready for ``--folio-fsx-replay`` /
``--folio-mtd-replay``.

Bounded like every input: ``LOG`` is read as a replayed log is (a regular file of at
most 16 MiB, :func:`~pytest_folio.inputs.read_log`), and ``--seconds`` bounds the whole
search, each replay included: a replay runs in this process (the target may be any
importable factory, which a child process would have to import and build again) under a
``SIGALRM`` timer (:func:`~pytest_folio.timeout.deadline`) set to the time left, so a
target that hangs in Python or in a system call is interrupted and the shortest log so
far is kept; one that never returns to Python gets every thread's stack dumped instead.
SIGINT or SIGTERM writes the shortest failing log found so far beside ``LOG`` as
``NAME.partial.fsxops`` / ``NAME.partial.mtdops`` (each replay's temporary directory is
removed as it unwinds) and exits 130 / 143. ``-o`` never names ``LOG`` itself unless
``--in-place`` says so.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from pytest_folio.errors import CommandError
from pytest_folio.files import write_file
from pytest_folio.fsx.config import FsxOptions, parse_fsx_args
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from pytest_folio.fsx.log import (
    FsxopsError,
    LogEntry,
    parse_fsxops,
    recorded_by,
    recorded_note,
    write_fsxops,
)
from pytest_folio.inputs import read_log
from pytest_folio.mtdtests.engine import MTDFsx, MTDFsxFailure
from pytest_folio.mtdtests.log import MTDOpsError, Op, format_mtdops, parse_mtdops
from pytest_folio.options import option_default
from pytest_folio.shrink import ddmin
from pytest_folio.sizes import parse_size
from pytest_folio.targets.fs import resolve_fs_target
from pytest_folio.targets.mtd import resolve_mtd_target
from pytest_folio.targets.spec import TargetError
from pytest_folio.timeout import MAX_SECONDS, TimedOut, deadline

T = TypeVar("T")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "shrink", help="delta-debug a failing .fsxops or .mtdops log against a target",
        description="LOG is a failing .fsxops (ours, or one recorded by xfstests' fsx with "
                    "--record-ops) replayed against --folio-fs, or a failing .mtdops "
                    "replayed against --folio-mtd. Each candidate runs on a fresh file "
                    "system or device from the target, as a test's replay does; operations "
                    "are dropped while the replay still fails the same way (the same fsx "
                    "exit status; for fsx for flash, any check), and the shortest log is "
                    "written beside LOG as NAME.min.fsxops or NAME.min.mtdops (or to -o "
                    "FILE), ready for --folio-fsx-replay or --folio-mtd-replay.")
    parser.add_argument("log", type=Path, help="the failing .fsxops or .mtdops file")
    parser.add_argument("--folio-fs", default="reference",
                        help="the file system an .fsxops log replays on (default reference)")
    parser.add_argument("--folio-mtd", default="reference",
                        help="the device an .mtdops log replays on (default reference)")
    parser.add_argument("--block-size", default="4K",
                        help="the file system's block size (default 4K)")
    parser.add_argument("--fsx-args", default="",
                        help="fsx flags the log was recorded with (-l, -o, alignment)")
    parser.add_argument("--folio-order", type=int, default=0,
                        help="the device's folio order (default 0)")
    parser.add_argument("--seconds", type=_seconds, default=300,
                        help="stop shrinking after this long, a replay that hangs "
                             "included, keeping the shortest so far (default 300)")
    parser.add_argument("-o", "--output", type=Path, help="where to write the shortest log")
    parser.add_argument("--in-place", action="store_true",
                        help="allow -o to name LOG itself (replaced by the shortest log)")
    parser.set_defaults(run=run)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most "
                                         f"{MAX_SECONDS:.0f}: {text!r}")
    return value


class _Terminated(BaseException):
    """SIGTERM, raised where the search is, so it unwinds as SIGINT does."""


def _output(args: argparse.Namespace, suffix: str) -> Path:
    """``-o`` (never ``LOG`` itself without ``--in-place``), else ``NAME.min.SUFFIX``."""
    out: Path = args.output or args.log.with_suffix(f".min{suffix}")
    same = out.resolve() == args.log.resolve() or (out.exists()
                                                  and os.path.samefile(out, args.log))
    if same and not args.in_place:
        raise CommandError(f"-o {out} is the log being shrunk: give another file, or "
                           "--in-place to replace the log")
    return out


def _minimal(items: Sequence[T], fails: Callable[[list[T]], bool], args: argparse.Namespace,
             what: str, write: Callable[[Path, list[T]], object], suffix: str) -> list[T]:
    """The shortest failing subsequence found within ``--seconds``, each replay bounded
    by the time left; on SIGINT/SIGTERM the shortest so far is written next to the log
    (``write``) before the interruption goes on."""
    end = time.monotonic() + args.seconds
    best = list(items)

    def bounded(candidate: list[T]) -> bool:
        left = end - time.monotonic()
        if left <= 0:
            raise TimedOut("the end of --seconds")
        with deadline(left, TimedOut.raise_at):
            return fails(candidate)

    def keep(shorter: list[T]) -> None:
        best[:] = shorter

    try:
        try:
            if not bounded(list(items)):
                raise CommandError(f"the log does not fail on {what}: nothing to shrink")
        except TimedOut as exc:
            raise CommandError(f"replaying the whole log on {what} took longer than "
                               f"--seconds {args.seconds:g} (it was at {exc}): nothing "
                               "to shrink") from None
        # a replay interrupted when the budget runs out: the shortest so far is kept
        with contextlib.suppress(TimedOut):
            ddmin(items, bounded, seconds=end - time.monotonic(), progress=keep)
    except (KeyboardInterrupt, _Terminated):
        if len(best) < len(items):
            partial = args.log.with_suffix(f".partial{suffix}")
            write(partial, best)
            print(f"{args.log}: interrupted; {len(best)} of {len(items)} operations still "
                  f"fail: {partial}", file=sys.stderr)
        else:
            print(f"{args.log}: interrupted before any operation could be dropped; "
                  "nothing written", file=sys.stderr)
        raise
    return best


def _shrink_fsxops(args: argparse.Namespace, text: str) -> tuple[str, int, int]:
    entries = parse_fsxops(text, str(args.log))
    target = resolve_fs_target(args.folio_fs)
    blocksize = parse_size(args.block_size)
    options = parse_fsx_args(args.fsx_args, FsxOptions()) if args.fsx_args else FsxOptions()
    statuses: list[int] = []

    def status(candidate: list[LogEntry]) -> int | None:
        with tempfile.TemporaryDirectory(prefix="pytest-folio-shrink-") as root, \
                target.open(blocksize, os.fspath(root)) as fs:
            try:
                FsxEngine(fs, options).run(replay=candidate)
            except FsxFailure as failure:
                return failure.status
        return None

    def fails(candidate: list[LogEntry]) -> bool:
        found = status(candidate)
        if not statuses:
            statuses.append(found or 0)
        return found is not None and found == statuses[0]

    origin = recorded_by(text)     # the shrunk log replays in the test the log names

    def write(path: Path, shortest: list[LogEntry]) -> None:
        write_fsxops(path, shortest, note=recorded_note(*origin) if origin else "")

    out = _output(args, ".fsxops")
    shortest = _minimal(entries, fails, args, f"--folio-fs={args.folio_fs}", write,
                        ".fsxops")
    write(out, shortest)
    return str(out), len(entries), len(shortest)


def _shrink_mtdops(args: argparse.Namespace, text: str) -> tuple[str, int, int]:
    log = parse_mtdops(text)
    target = resolve_mtd_target(args.folio_mtd)
    size = log.size or parse_size(str(option_default("--folio-mtd-size")))
    erasesize = log.erasesize or parse_size(str(option_default("--folio-erasesize")))
    geometry: list[Any] = []

    def fails(candidate: list[Op]) -> bool:
        with target.open(size=size, erasesize=erasesize,
                         folio_order=args.folio_order) as dev:
            geometry[:] = [dev]
            try:
                MTDFsx(dev, folio=4096 << args.folio_order).run(candidate)
            except MTDFsxFailure:
                return True
        return False

    def write(path: Path, shortest: list[Op]) -> None:
        write_file(path, format_mtdops(shortest, _Geometry(geometry[0]),
                                      f"shrunk from {args.log} ({len(log.ops)} operations)"))

    out = _output(args, ".mtdops")
    shortest = _minimal(log.ops, fails, args, f"--folio-mtd={args.folio_mtd}", write,
                        ".mtdops")
    write(out, shortest)
    return str(out), len(log.ops), len(shortest)


class _Geometry:
    """The device's geometry, kept after it is closed, for the log's header."""

    def __init__(self, dev: Any) -> None:
        self.name, self.size = dev.name, dev.size
        self.erasesize, self.writesize = dev.erasesize, dev.writesize


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise _Terminated


def run(args: argparse.Namespace) -> int:
    text = read_log(args.log, CommandError)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        if args.log.suffix == ".mtdops":
            out, before, after = _shrink_mtdops(args, text)
        else:
            out, before, after = _shrink_fsxops(args, text)
    except (FsxopsError, MTDOpsError, TargetError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except _Terminated:
        return 128 + signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(f"{args.log}: {before} operations, {after} still fail: {out}")
    return 0
