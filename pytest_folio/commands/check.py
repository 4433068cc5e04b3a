"""``python -m pytest_folio check SPEC``: make one target, check it, say what it offers.

The spec is what ``--folio-mtd`` or ``--folio-fs`` takes (``reference``, a path,
``package.module:factory``, an entry-point name). The target is made as the plugin makes
it (a factory is called with the same keywords) and checked by the plugin's own checks
(members, types, geometry, what ``read`` answers: :meth:`.Target.check_first`), and the
optional calls it offers are printed with what each unlocks. A spec that can be either
kind (``reference``, a factory that returns a file system) is tried as an MTD device
first; ``--mtd``/``--fs`` choose.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import AbstractContextManager, ExitStack
from typing import Any

from pytest_folio.errors import CommandError
from pytest_folio.options import option_default
from pytest_folio.sizes import format_size, parse_size
from pytest_folio.targets.capabilities import offered, table
from pytest_folio.targets.fs import FsTarget, resolve_fs_target
from pytest_folio.targets.mtd import MTDTarget, resolve_mtd_target
from pytest_folio.targets.spec import TargetError
from pytest_folio.terminal.textwidth import wrap


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "check", help="make one target, check it against its protocol, and print the "
                      "optional calls it offers",
        description="SPEC is what --folio-mtd or --folio-fs takes (reference, a path, "
                    "package.module:factory, an entry-point name). The target is made as "
                    "the plugin makes it (a factory is called with the same keywords), "
                    "checked by the plugin's own checks (members, call signatures, "
                    "types, geometry, what read answers), and the optional calls it "
                    "offers are printed with what each unlocks. A spec that can be "
                    "either kind is tried as an MTD device first; --mtd or --fs "
                    "chooses.")
    parser.add_argument("spec", help="what --folio-mtd or --folio-fs takes")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--mtd", dest="kind", action="store_const", const="mtd",
                       help="check it as an MTD device")
    which.add_argument("--fs", dest="kind", action="store_const", const="fs",
                       help="check it as a file system")
    parser.add_argument("--size", default=option_default("--folio-mtd-size"),
                        help="an MTD device's size (default: %(default)s)")
    parser.add_argument("--erasesize", default=option_default("--folio-erasesize"),
                        help="an MTD device's eraseblock size (default: %(default)s)")
    parser.add_argument("--folio-order", type=int, default=0,
                        help="the folio order an MTD factory is asked for (default 0)")
    parser.add_argument("--blocksize", default="4K",
                        help="a file system's block size (default: %(default)s)")
    parser.set_defaults(run=run)


def _open_mtd(target: MTDTarget, args: argparse.Namespace) -> AbstractContextManager[Any]:
    return target.open(size=parse_size(args.size), erasesize=parse_size(args.erasesize),
                       folio_order=args.folio_order)


def _describe(obj: Any, kind: str) -> str:
    if kind == "mtd":
        return (f"an MTD device ({type(obj).__name__} {obj.name!r}): size "
                f"{format_size(obj.size)}, erasesize {format_size(obj.erasesize)}, "
                f"writesize {obj.writesize}, oobsize {obj.oobsize}")
    return f"a file system ({type(obj).__name__}): block size {format_size(obj.blocksize)}"


def _check(spec: str, kind: str, args: argparse.Namespace, stack: ExitStack) -> str:
    if kind == "mtd":
        mtd = resolve_mtd_target(spec)
        dev = stack.enter_context(_open_mtd(mtd, args))
        mtd.check_first(dev)
        return "\n".join([*wrap(f"--folio-mtd={spec}: {_describe(dev, kind)}"),
                          table(offered(dev, kind, mtd.spec.factory))])
    fs_target: FsTarget = resolve_fs_target(spec, "--folio-fs")
    root = stack.enter_context(tempfile.TemporaryDirectory(prefix="pytest-folio-check-"))
    fs = stack.enter_context(fs_target.open(parse_size(args.blocksize), os.fspath(root)))
    fs_target.check_first(fs)
    return "\n".join([*wrap(f"--folio-fs={spec}: {_describe(fs, kind)}"),
                      table(offered(fs, kind))])


def run(args: argparse.Namespace) -> int:
    kinds = [args.kind] if args.kind else ["mtd", "fs"]
    errors: list[str] = []
    reports: list[str] = []
    for kind in kinds:
        with ExitStack() as stack:
            try:
                reports.append(_check(args.spec, kind, args, stack))
            except (TargetError, ValueError, OSError) as exc:
                errors.append(str(exc))
        if reports and args.spec.strip().split(":")[0] != "reference":
            break          # one kind fits: a factory is the one or the other
    if not reports:
        # the same problem under both options (an import error) is said once
        unique = {error.partition(": ")[2]: error for error in errors}
        raise CommandError(" / ".join(unique.values()))
    print("\n\n".join(reports))
    sys.stdout.flush()
    return 0
