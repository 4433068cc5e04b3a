"""``python -m pytest_folio`` (also ``pytest-folio``): subcommands around saved runs.

Each subcommand lives in a module with a ``register(subparsers)`` function that adds its
parser and sets ``run`` (``run(args) -> exit code``); adding one is one line in
:data:`COMMANDS`. A user's mistake is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from pytest_folio.errors import CommandError
from pytest_folio.inputs import printable
from pytest_folio.timing.meta import package_version

# "module:function" of each subcommand's register(subparsers), imported when needed.
COMMANDS = [
    "pytest_folio.timing.commands:register_show",
    "pytest_folio.timing.commands:register_compare",
    "pytest_folio.timing.commands:register_list",
    "pytest_folio.timing.commands:register_bandwidth",
    "pytest_folio.vm.runner:register",
    "pytest_folio.commands.check:register",
    "pytest_folio.commands.shrink:register",
]

USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (not the usage block) and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {printable(message, keep='')}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m pytest_folio",
                     description="pytest-folio's tools: list, show and compare saved runs, "
                                 "print bandwidth tables, run the suites inside a VM.")
    parser.add_argument("--version", action="version",
                        version=f"pytest-folio {package_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                       parser_class=_Parser)
    for entry in COMMANDS:
        module, _, function = entry.partition(":")
        getattr(importlib.import_module(module), function)(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except CommandError as exc:
        print(f"python -m pytest_folio {args.command}: error: {printable(str(exc), keep='')}",
              file=sys.stderr)
        return USAGE_ERROR
