"""Every command-line option and ini key of the plugin, declared and validated in one place.

Each ``--folio-x-y`` option is also an ini key ``x_y``. Values are parsed once, on the
controller, into :class:`FolioSettings`; a bad value is a pytest usage error (exit code 4)
with a one-line message.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest

from pytest_folio.constants import MAX_PAGECACHE_ORDER, PAGE_SIZE
from pytest_folio.model.ramfs import parse_block_size
from pytest_folio.sizes import format_size, parse_list, parse_size

# (option, help, default, kind). The ini key is the option's name without the dashes:
# --folio-orders is folio_orders, --folio-mtd-size is folio_mtd_size.
_OPTIONS: list[tuple[str, str, str | None, str]] = [
    ("--folio-orders", "folio orders the order-parametrized fixtures run at", "0,2,4", "string"),
    ("--folio-block-sizes", "ramfs block sizes the size-parametrized fixtures run at",
     "4k,16k,64k", "string"),
    ("--folio-mtd", "MTD target: reference[:knob=value,...], /dev/mtdN, "
     "package.module:factory or an entry-point name", "reference", "string"),
    ("--folio-fs", "file-system target: reference[:knob=value,...], a directory, "
     "package.module:factory or an entry-point name", "reference", "string"),
    ("--folio-mtd-size", "size of a reference MTD device", "16M", "string"),
    ("--folio-erasesize", "eraseblock size of a reference MTD device", "128K", "string"),
    ("--folio-allow-destructive",
     "allow suites to erase or write a real device or a non-empty directory", None, "bool"),
    ("--folio-fsx-ops", "number of fsx operations per run", "10000", "string"),
    ("--folio-fsx-seed", "alias of --folio-seed", None, "string"),
    ("--folio-fsx-replay", "replay this .fsxops file (fsx's --replay-ops format) in the fsx "
     "suite instead of a random run", None, "string"),
    ("--folio-fsx-dir", "keep the fsx suite's .fsxops/.fsxgood/.fsxlog files in this "
     "directory (default: each test's tmp_path)", None, "string"),
    ("--folio-save", "write this run's timings to a JSON file", None, "string"),
    ("--folio-compare", "print this run against a saved run", None, "string"),
    ("--folio-compare-fail",
     "fail the run when a timing regresses significantly by more than PCT percent", None,
     "string"),
    ("--folio-seed", "the run's seed for every random suite (default: chosen once per run "
     "and printed in the header)", None, "string"),
]


def _dest(option: str) -> str:
    return option[2:].replace("-", "_")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("folio", "pytest-folio: page cache, block2mtd and ramfs testing")
    for option, help_text, default, kind in _OPTIONS:
        if kind == "bool":
            group.addoption(option, action="store_true", default=None, dest=_dest(option),
                            help=help_text)
            parser.addini(_dest(option), help_text, type="bool", default=False)
        else:
            shown = f" (default: {default})" if default is not None else ""
            group.addoption(option, action="store", default=None, dest=_dest(option),
                            metavar=option[8:].upper().replace("-", "_"),
                            help=help_text + shown)
            parser.addini(_dest(option), help_text + shown, default=default)


def _raw(config: pytest.Config, option: str) -> Any:
    """The command-line value, else the ini value, else the default."""
    value = config.getoption(_dest(option))
    if value is None:
        value = config.getini(_dest(option))
    return value


@dataclasses.dataclass(frozen=True)
class FolioSettings:
    """The plugin's options, parsed and checked."""

    orders: tuple[int, ...]
    block_sizes: tuple[int, ...]
    mtd: str
    fs: str
    mtd_size: int
    erasesize: int
    allow_destructive: bool
    fsx_ops: int
    seed: int
    fsx_replay: Path | None
    fsx_dir: Path | None
    save: Path | None
    compare: Path | None
    compare_fail: float | None

    @property
    def fsx_seed(self) -> int:
        """The fsx suite's seed: the run's :attr:`seed` (``--folio-fsx-seed`` is its alias)."""
        return self.seed


def _seed(config: pytest.Config, chosen: int | None) -> int:
    """``--folio-seed`` or its alias ``--folio-fsx-seed`` (both only if they agree), else
    the controller's ``chosen`` seed, else a new random one."""
    given = {option: _positive_int(text, option)
             for option in ("--folio-seed", "--folio-fsx-seed")
             if (text := _raw(config, option)) not in (None, "")}
    if len(set(given.values())) > 1:
        raise ValueError("--folio-seed and its alias --folio-fsx-seed disagree: "
                         f"{given['--folio-seed']} and {given['--folio-fsx-seed']}")
    if given:
        return next(iter(given.values()))
    if chosen is not None:
        return chosen
    return random.SystemRandom().randrange(1, 1 << 31)


def check_order(order: int) -> int:
    if not 0 <= order <= MAX_PAGECACHE_ORDER:
        raise ValueError(
            f"folio order {order} is out of range 0..{MAX_PAGECACHE_ORDER} "
            f"(MAX_PAGECACHE_ORDER, {format_size(PAGE_SIZE << MAX_PAGECACHE_ORDER)} folios)")
    return order


def parse_order(text: str | int) -> int:
    try:
        order = int(text)
    except ValueError:
        raise ValueError(f"not a folio order: {text!r} (use 0..{MAX_PAGECACHE_ORDER})") from None
    return check_order(order)


def _positive_int(text: str, what: str) -> int:
    try:
        value = int(str(text), 0)
    except ValueError:
        raise ValueError(f"{what} must be a whole number, not {text!r}") from None
    if value <= 0:
        raise ValueError(f"{what} must be positive, not {value}")
    return value


def check_mtd_geometry(size: int, erasesize: int) -> None:
    """The reference device's geometry rules (block2mtd's own checks)."""
    if size < PAGE_SIZE or size % PAGE_SIZE:
        raise ValueError(f"MTD size {size} must be a positive multiple of {PAGE_SIZE}")
    if erasesize < PAGE_SIZE or erasesize % PAGE_SIZE:
        raise ValueError(f"erasesize {erasesize} must be a positive multiple of {PAGE_SIZE}")
    if size % erasesize:
        raise ValueError(
            f"erasesize {format_size(erasesize)} does not divide the device size "
            f"{format_size(size)}")


def read_settings(config: pytest.Config, seed: int | None = None) -> FolioSettings:
    """Parse and check every option; raise pytest.UsageError with one line on bad input.

    ``seed`` is the controller's choice, handed to xdist workers so every process uses
    the same one.
    """
    try:
        orders = tuple(parse_order(o) for o in parse_list(str(_raw(config, "--folio-orders"))))
        if not orders:
            raise ValueError("--folio-orders needs at least one order")
        sizes_text = str(_raw(config, "--folio-block-sizes"))
        block_sizes = tuple(parse_block_size(s) for s in parse_list(sizes_text))
        if not block_sizes:
            raise ValueError("--folio-block-sizes needs at least one block size")
        mtd_size = parse_size(str(_raw(config, "--folio-mtd-size")))
        erasesize = parse_size(str(_raw(config, "--folio-erasesize")))
        check_mtd_geometry(mtd_size, erasesize)
        fsx_ops = _positive_int(_raw(config, "--folio-fsx-ops"), "--folio-fsx-ops")
        seed = _seed(config, seed)
        fail_text = _raw(config, "--folio-compare-fail")
        compare_fail = None
        if fail_text not in (None, ""):
            try:
                compare_fail = float(str(fail_text).rstrip("%"))
            except ValueError:
                raise ValueError(
                    f"--folio-compare-fail takes a percentage, not {fail_text!r}") from None
            if compare_fail < 0:
                raise ValueError("--folio-compare-fail must not be negative")
        fsx_replay = _raw(config, "--folio-fsx-replay")
        fsx_dir = _raw(config, "--folio-fsx-dir")
        if fsx_dir and Path(fsx_dir).exists() and not Path(fsx_dir).is_dir():
            raise ValueError(f"--folio-fsx-dir: {fsx_dir} is not a directory")
        save = _raw(config, "--folio-save")
        compare = _raw(config, "--folio-compare")
        destructive = _raw(config, "--folio-allow-destructive")
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    return FolioSettings(
        orders=orders,
        block_sizes=block_sizes,
        mtd=str(_raw(config, "--folio-mtd")),
        fs=str(_raw(config, "--folio-fs")),
        mtd_size=mtd_size,
        erasesize=erasesize,
        allow_destructive=bool(destructive),
        fsx_ops=fsx_ops,
        seed=seed,
        fsx_replay=Path(fsx_replay) if fsx_replay else None,
        fsx_dir=Path(fsx_dir) if fsx_dir else None,
        save=Path(save) if save else None,
        compare=Path(compare) if compare else None,
        compare_fail=compare_fail,
    )
