"""``python -m pytest_folio shrink LOG``: the shortest operation log that still fails.

``LOG`` is a failing ``.fsxops`` (ours, or one recorded by xfstests' fsx with
``--record-ops``) replayed against ``--folio-fs``, or a failing ``.mtdops`` replayed
against ``--folio-mtd``. Each candidate runs on a fresh file system or device from the
target, as a test's replay does; :func:`~pytest_folio.shrink.ddmin` drops operations
while the replay still fails the same way (the same fsx exit status; for fsx for flash,
any check), and the shortest log is written beside ``LOG`` as ``NAME.min.fsxops`` /
``NAME.min.mtdops`` (or to ``-o FILE``), ready for ``--folio-fsx-replay`` /
``--folio-mtd-replay``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
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
from pytest_folio.mtdtests.mtdops import MTDOpsError, Op, format_mtdops, parse_mtdops
from pytest_folio.mtdtests.ops import MTDFsx, MTDFsxFailure
from pytest_folio.options import option_default
from pytest_folio.shrink import ddmin
from pytest_folio.sizes import parse_size
from pytest_folio.targets.fs import resolve_fs_target
from pytest_folio.targets.mtd import resolve_mtd_target
from pytest_folio.targets.spec import TargetError

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
    parser.add_argument("--seconds", type=float, default=300,
                        help="stop shrinking after this long, keeping the shortest so far")
    parser.add_argument("-o", "--output", type=Path, help="where to write the shortest log")
    parser.set_defaults(run=run)


def _read(path: Path) -> str:
    if not path.is_file():
        raise CommandError(f"{path}: not a regular file")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read {path}: {exc}") from None


def _minimal(items: Sequence[T], fails: Callable[[list[T]], bool], seconds: float,
             what: str) -> list[T]:
    if not fails(list(items)):
        raise CommandError(f"the log does not fail on {what}: nothing to shrink")
    return ddmin(items, fails, seconds=seconds)


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

    shortest = _minimal(entries, fails, args.seconds, f"--folio-fs={args.folio_fs}")
    out = args.output or args.log.with_suffix(".min.fsxops")
    origin = recorded_by(text)     # the shrunk log replays in the test the log names
    write_fsxops(out, shortest, note=recorded_note(*origin) if origin else "")
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

    shortest = _minimal(log.ops, fails, args.seconds, f"--folio-mtd={args.folio_mtd}")
    out = args.output or args.log.with_suffix(".min.mtdops")
    write_file(out, format_mtdops(shortest, _Geometry(geometry[0]),
                                 f"shrunk from {args.log} ({len(log.ops)} operations)"))
    return str(out), len(log.ops), len(shortest)


class _Geometry:
    """The device's geometry, kept after it is closed, for the log's header."""

    def __init__(self, dev: Any) -> None:
        self.name, self.size = dev.name, dev.size
        self.erasesize, self.writesize = dev.erasesize, dev.writesize


def run(args: argparse.Namespace) -> int:
    text = _read(args.log)
    try:
        if args.log.suffix == ".mtdops":
            out, before, after = _shrink_mtdops(args, text)
        else:
            out, before, after = _shrink_fsxops(args, text)
    except (FsxopsError, MTDOpsError, TargetError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    print(f"{args.log}: {before} operations, {after} still fail: {out}")
    return 0
