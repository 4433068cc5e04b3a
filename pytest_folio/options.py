"""Every command-line option and ini key of the plugin, declared and validated in one place.

Each ``--folio-x-y`` option is also an ini key ``x_y``. Values are parsed once, on the
controller, into :class:`FolioSettings`; a bad value is a pytest usage error (exit code 4)
with a one-line message.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_folio.hypothesis_budget import DEFAULT_LEVEL, parse_level
from pytest_folio.linux.constants import MAX_PAGECACHE_ORDER, PAGE_SIZE
from pytest_folio.sizes import format_size, parse_block_size, parse_list, parse_size
from pytest_folio.timeout import MAX_SECONDS

T = TypeVar("T")

# what a timing table's cell may show: where the samples lie, how far apart, how many
TABLE_FIGURES = ("min", "median", "mean", "max", "iqr", "mad", "stdev", "n")

# (option, help, default, kind). The ini key is the option's name without the dashes:
# --folio-orders is folio_orders, --folio-mtd-size is folio_mtd_size.
_OPTIONS: list[tuple[str, str, str | None, str]] = [
    ("--folio-orders", "folio orders the order-parametrized fixtures run at", "0,2,4", "string"),
    ("--folio-block-sizes", "ramfs block sizes the size-parametrized fixtures run at",
     "4k,64k,2M", "string"),
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
    ("--folio-fs-oracle", "differential mode: run the same random operations on the "
     "--folio-fs target and on this oracle (reference[:errors=any], a directory, or none; "
     "default: reference unless --folio-fs is the reference), compare everything",
     None, "string"),
    ("--folio-ktap", "turn this KTAP log (a kernel's KUnit or kselftest output, from "
     "this or another machine) into the session's items, one per test", None, "string"),
    ("--folio-shrink-seconds", "the shrinking budget of every failure, in seconds of CPU "
     "time (0: report each failure unshrunk; default: each suite's own, 10-20 s, and "
     "--folio-hypothesis's for the state machines)", None, "string"),
    ("--folio-fs-oracle-replay", "replay this differential log (.fsdiff, saved by a "
     "failing differential test) instead of a random sequence", None, "string"),
    ("--folio-save", "write this run's timings to a JSON file", None, "string"),
    ("--folio-compare", "print this run against a saved run", None, "string"),
    ("--folio-compare-fail",
     "fail the run when a timing regresses significantly by more than PCT percent", None,
     "string"),
    ("--folio-seed", "the run's seed for every random suite (default: chosen once per run "
     "and printed in the header)", None, "string"),
    ("--folio-autosave", "save this run's timings, numbered, under .folio/ in the rootdir",
     None, "bool"),
    ("--folio-erasesizes", "erasesizes the MTD suites that check data run at, per folio "
     "order (default: smaller than, equal to and larger than the folio)", None, "string"),
    ("--folio-mtd-replay", "replay this MTD operation log (.mtdops) in the MTD fsx suite "
     "instead of a random run", None, "string"),
    ("--folio-columns", "what each cell of the timing tables shows, comma-separated from "
     + ", ".join(TABLE_FIGURES), "median,iqr", "string"),
    ("--folio-race-seconds", "how long the invalidate race suite writes while other "
     "threads drop the page cache, per test", "2", "string"),
    ("--folio-mtd-oracle", "differential mode: run the MTD fsx suite's operations on the "
     "target and on this oracle (reference[:knob=value,...]) and compare every result; "
     "none turns it off (default: reference when --folio-mtd is not the reference)",
     None, "string"),
    ("--folio-hypothesis", "the Hypothesis state machines' budget: off (skip them), quick "
     "or thorough (more and longer examples, longer shrinking)", DEFAULT_LEVEL, "string"),
    ("--folio-failures", "keep every failure's logs (.fsxops, .mtdops, .fsxgood, shrunk "
     "logs) under DIR/<test id>/, relative to the rootdir (off: only in tmp_path); the "
     "newest 50 are kept",
     ".folio/failures", "string"),
    ("--folio-timeout", "fail a test that runs longer than SECONDS, printing where it hung, "
     "and go on with the run; also bounds the factory checks before the tests (0: no "
     "limit)", "0", "string"),
    ("--folio-coverage", "print at the end, per call, the classes of input the random "
     "suites gave it (lengths, offsets, data, name lengths, errors) and those they did not",
     None, "bool"),
    ("--folio-power-cut-rules", "what the file-system power-cut suites require after a "
     "cut: fsync (what fsync promises; the default for a factory) or ordered (that, and "
     "an extension's data before its size; the default for the kernel's ext4 and XFS)",
     None, "string"),
]


def _dest(option: str) -> str:
    return option[2:].replace("-", "_")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("folio", "pytest-folio: page cache, block2mtd and ramfs testing")
    for option, help_text, default, kind in _OPTIONS:
        shown = f" (default: {default})" if default is not None else ""
        if kind == "bool":
            group.addoption(option, action="store_true", default=None, dest=_dest(option),
                            help=help_text)
        else:
            group.addoption(option, action="store", default=None, dest=_dest(option),
                            metavar=option[8:].upper().replace("-", "_"),
                            help=help_text + shown)
        # Registered without a default, and as a string even for flags, so an unset key
        # reads as None and every value is parsed (and its errors worded) by us.
        parser.addini(_dest(option), help_text + shown, default=None)


_DEFAULTS = {option: default for option, _, default, _ in _OPTIONS}
_LISTS = frozenset({"--folio-orders", "--folio-block-sizes", "--folio-erasesizes"})
_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE = frozenset({"0", "false", "no", "off", "n", "f"})


class GivenValues:
    """What the user gave for each option, and where: the command line first, then the
    ini key (``folio_orders``, also ``-o folio_orders=...``), else the declared default.

    ``source(option)`` is how error messages name it: the option as typed, or
    ``ini key folio_x`` when the value came from the ini file.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.sources: dict[str, str] = {}

    def raw(self, option: str) -> Any:
        """The given value (str, bool, or whatever a TOML ini holds), or None."""
        dest = _dest(option)
        value = self.config.getoption(dest)
        if value is not None:
            self.sources[option] = option
            return value
        value = self.config.getini(dest)
        if value is not None:
            self.sources[option] = f"ini key {dest}"
            return value
        self.sources[option] = option
        return None

    def text(self, option: str) -> str | None:
        """The given value as text, else the default; an empty given value is an error
        (an empty --folio-fs must not quietly mean the current directory). A TOML array
        (``folio_orders = [0, 2]``) is a list for the options that take one."""
        value = self.raw(option)
        if value is None:
            return _DEFAULTS.get(option)
        if isinstance(value, list):
            if option not in _LISTS:
                raise self.error(option, "takes one value, not a list (write it as a string)")
            value = ",".join(str(v) for v in value)
        text = str(value).strip()
        if not text:
            raise self.error(option, "needs a value, not an empty string")
        return text

    def flag(self, option: str) -> bool:
        """An on/off option: true on the command line, or a truth value in the ini."""
        value = self.raw(option)
        if value is None or isinstance(value, bool):
            return bool(value)
        text = str(value).strip().lower()
        if text in _TRUE | _FALSE:
            return text in _TRUE
        raise self.error(option, f"{value!r} is not a truth value (use true or false)")

    def source(self, option: str) -> str:
        return self.sources.get(option, option)

    def error(self, option: str, message: str) -> pytest.UsageError:
        return pytest.UsageError(f"{self.source(option)}: {message}")

    def parse(self, option: str, parser: Callable[[str], T]) -> T | None:
        """``parser(text)`` of the option's value (None when unset without a default);
        a ValueError becomes a usage error naming where the value came from."""
        text = self.text(option)
        if text is None:
            return None
        try:
            return parser(text)
        except ValueError as exc:
            raise self.error(option, str(exc)) from None


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
    # option -> how messages name it ("--folio-mtd", or "ini key folio_mtd")
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    fs_oracle: str | None = None

    def source(self, option: str) -> str:
        """The option as the user gave it: its name, or ``ini key folio_x``."""
        return self.sources.get(option, option)
    autosave: bool = False
    erasesizes: tuple[int, ...] = ()     # empty: chosen per folio order
    mtd_replay: Path | None = None
    mtd_oracle: str | None = None
    columns: tuple[str, ...] = ("median", "iqr")  # the timing tables' figures per cell
    hypothesis: str = DEFAULT_LEVEL
    failures: Path | None = None         # relative paths are under the rootdir
    timeout: float = 0.0                 # 0: no limit
    fs_oracle_replay: Path | None = None
    race_seconds: float = 2.0
    shrink_seconds: float | None = None
    ktap: Path | None = None
    power_cut_rules: str | None = None   # None: each suite's own default

    def shrink_budget(self, default: float) -> float:
        """A suite's shrinking budget: ``--folio-shrink-seconds`` when given, else the
        suite's own ``default``."""
        return default if self.shrink_seconds is None else self.shrink_seconds
    coverage: bool = False               # --folio-coverage

    @property
    def fsx_seed(self) -> int:
        """The fsx suite's seed: the run's :attr:`seed` (``--folio-fsx-seed`` is its alias)."""
        return self.seed


def parse_figures(text: str) -> tuple[str, ...]:
    """``min,median,iqr`` as figure names (:data:`TABLE_FIGURES`), each once."""
    names = tuple(part.strip().lower() for part in text.split(",") if part.strip())
    unknown = [n for n in names if n not in TABLE_FIGURES]
    if not names or unknown:
        raise ValueError(f"{text!r}: choose from {', '.join(TABLE_FIGURES)} "
                         "(comma-separated, e.g. min,median,iqr)")
    return tuple(dict.fromkeys(names))


def _save_path(text: str) -> Path:
    """A file to save timings to; ``DIR/`` names a directory (Path would drop the slash)."""
    if text.endswith(("/", os.sep)):
        raise ValueError(f"{text}: names a directory; give a file name ({text}run.json)")
    return Path(text)


def _seed(given: GivenValues, chosen: int | None) -> int:
    """``--folio-seed`` or its alias ``--folio-fsx-seed`` (both only if they agree), else
    the controller's ``chosen`` seed, else a new random one."""
    seeds = {option: seed for option in ("--folio-seed", "--folio-fsx-seed")
             if (seed := given.parse(option, _positive_int)) is not None}
    if len(set(seeds.values())) > 1:
        raise pytest.UsageError(
            f"{given.source('--folio-seed')} and its alias {given.source('--folio-fsx-seed')} "
            f"disagree: {seeds['--folio-seed']} and {seeds['--folio-fsx-seed']}")
    if seeds:
        return next(iter(seeds.values()))
    if chosen is not None:
        return chosen
    return random.SystemRandom().randrange(1, 1 << 31)


def _ktap_log(text: str) -> Path:
    """A KTAP log that reads as one (checked now: a bad log is a usage error)."""
    from pytest_folio.ktap.log import KtapError, read

    try:
        read(text)
    except KtapError as exc:
        raise ValueError(str(exc)) from None
    return Path(text)


def _fsdiff_log(text: str) -> Path:
    """A differential log that reads as one (checked now: a bad log is a usage error)."""
    from pytest_folio.fsx.differential import read_fsdiff

    read_fsdiff(text)
    return Path(text)


def check_order(order: int) -> int:
    if not 0 <= order <= MAX_PAGECACHE_ORDER:
        raise ValueError(
            f"folio order {order} is out of range 0..{MAX_PAGECACHE_ORDER} "
            f"(MAX_PAGECACHE_ORDER, {format_size(PAGE_SIZE << MAX_PAGECACHE_ORDER)} folios)")
    return order


def parse_order(text: object) -> int:
    """A folio order from text or an int (not a bool, a float or a list)."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise ValueError(f"not a folio order: {text!r} (use 0..{MAX_PAGECACHE_ORDER})")
    try:
        order = int(text)
    except ValueError:
        raise ValueError(f"not a folio order: {text!r} (use 0..{MAX_PAGECACHE_ORDER})") from None
    return check_order(order)


def parse_block_size_value(value: object) -> int:
    """A ramfs block size from text or an int (not a bool, a float or a list)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"not a block size: {value!r} (use e.g. 4096, '16k', '2M')")
    return parse_block_size(value)


def parse_unique(values: Sequence[object], parse: Callable[[object], int],
                 show: Callable[[int], str]) -> tuple[int, ...]:
    """Parse each value; a value given twice (``0,0``, ``4k,4096``) is an error, since
    it would run every test twice under two ids."""
    parsed = tuple(parse(v) for v in values)
    for i, value in enumerate(parsed):
        if value in parsed[:i]:
            raise ValueError(f"{show(value)} is given twice ({values[parsed.index(value)]!r} "
                             f"and {values[i]!r})")
    return parsed


def _order_list(text: str) -> tuple[int, ...]:
    orders = parse_unique(parse_list(text), parse_order, lambda o: f"folio order {o}")
    if not orders:
        raise ValueError("needs at least one folio order")
    return orders


def _block_size_list(text: str) -> tuple[int, ...]:
    sizes = parse_unique(parse_list(text), parse_block_size_value,
                         lambda b: f"block size {format_size(b)}")
    if not sizes:
        raise ValueError("needs at least one block size")
    return sizes


def _positive_int(text: str) -> int:
    try:
        value = int(str(text), 0)
    except ValueError:
        raise ValueError(f"must be a whole number, not {text!r}") from None
    if value <= 0:
        raise ValueError(f"must be positive, not {value}")
    return value


def _percentage(text: str) -> float:
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise ValueError(f"takes a percentage, not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"takes a percentage of 0 or more, not {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"takes a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"takes a number of seconds of 0 or more, not {text!r}")
    return value


def _timeout(text: str) -> float:
    """``--folio-timeout``: seconds, at most what every platform's timers hold."""
    value = _seconds(text)
    if value > MAX_SECONDS:
        raise ValueError(f"{text} seconds is more than the timers hold "
                         f"({MAX_SECONDS:.0f} s, some 68 years)")
    return value


def _power_cut_rules(text: str) -> str:
    from pytest_folio.fsx.powercut import check_rules

    return check_rules(text.strip().lower())


def _failures_dir(text: str) -> Path | None:
    if text.lower() == "off":
        return None
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} is not a directory")
    return path


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value == 0:
        raise ValueError(f"takes a positive number of seconds, not {text!r}")
    return value


def _pages(size: int, what: str) -> int:
    if size < PAGE_SIZE or size % PAGE_SIZE:
        raise ValueError(f"{what} {size} must be a positive multiple of {PAGE_SIZE}")
    return size


def check_reference_geometry(size: int, erasesize: int) -> None:
    """The reference device's geometry rules (block2mtd's own checks)."""
    _pages(size, "MTD size")
    _pages(erasesize, "erasesize")
    if size % erasesize:
        raise ValueError(
            f"erasesize {format_size(erasesize)} does not divide the device size "
            f"{format_size(size)}")


def parse_erasesizes(text: str, size: int) -> tuple[int, ...]:
    """``--folio-erasesizes 4K,16K,128K``: each a divisor of the device size, once."""
    erasesizes = parse_unique(parse_list(text), lambda e: parse_size(str(e)),
                              lambda e: f"erasesize {format_size(e)}")
    for each in erasesizes:
        check_reference_geometry(size, each)
    return erasesizes


def read_settings(config: pytest.Config, seed: int | None = None) -> FolioSettings:
    """Parse and check every option; raise pytest.UsageError with one line on bad input,
    naming the option or ini key the bad value came from.

    ``seed`` is the controller's choice, handed to xdist workers so every process uses
    the same one.
    """
    given = GivenValues(config)
    orders = given.parse("--folio-orders", _order_list)
    block_sizes = given.parse("--folio-block-sizes", _block_size_list)
    mtd_size = given.parse("--folio-mtd-size", lambda t: _pages(parse_size(t), "MTD size"))
    erasesize = given.parse("--folio-erasesize", lambda t: _pages(parse_size(t), "erasesize"))
    assert orders and block_sizes and mtd_size is not None and erasesize is not None
    try:
        check_reference_geometry(mtd_size, erasesize)
    except ValueError as exc:
        raise given.error("--folio-erasesize",
                          f"{exc} ({given.source('--folio-mtd-size')})") from None
    for order in orders:
        # the reference block device's logical block size is the folio size: it holds
        # at least one (its last folio may be partial)
        if mtd_size < (PAGE_SIZE << order):
            raise pytest.UsageError(
                f"{given.source('--folio-mtd-size')}: the MTD size {format_size(mtd_size)} "
                f"is smaller than one {format_size(PAGE_SIZE << order)} folio of "
                f"order {order} ({given.source('--folio-orders')})")
    fsx_ops = given.parse("--folio-fsx-ops", _positive_int)
    seed = _seed(given, seed)
    compare_fail = given.parse("--folio-compare-fail", _percentage)
    fsx_replay = given.parse("--folio-fsx-replay", Path)
    fsx_dir = given.parse("--folio-fsx-dir", Path)
    if fsx_dir is not None and fsx_dir.exists() and not fsx_dir.is_dir():
        raise given.error("--folio-fsx-dir", f"{fsx_dir} is not a directory")
    mtd = given.text("--folio-mtd")
    fs = given.text("--folio-fs")
    columns = given.parse("--folio-columns", parse_figures)
    assert fsx_ops is not None and mtd is not None and fs is not None and columns
    values: dict[str, Any] = dict(
        allow_destructive=given.flag("--folio-allow-destructive"),
        save=given.parse("--folio-save", _save_path),
        compare=given.parse("--folio-compare", Path),
        autosave=given.flag("--folio-autosave"),
        fs_oracle=given.text("--folio-fs-oracle") or None,
        erasesizes=given.parse("--folio-erasesizes",
                               lambda t: parse_erasesizes(t, mtd_size)) or (),
        mtd_replay=given.parse("--folio-mtd-replay", Path),
        mtd_oracle=given.text("--folio-mtd-oracle"),
        hypothesis=given.parse("--folio-hypothesis", parse_level) or DEFAULT_LEVEL,
        failures=given.parse("--folio-failures", _failures_dir),
        timeout=given.parse("--folio-timeout", _timeout) or 0.0,
        columns=columns,
        fs_oracle_replay=given.parse("--folio-fs-oracle-replay", _fsdiff_log),
        race_seconds=given.parse("--folio-race-seconds", _positive_seconds) or 2.0,
        shrink_seconds=given.parse("--folio-shrink-seconds", _seconds),
        ktap=given.parse("--folio-ktap", _ktap_log),
        coverage=given.flag("--folio-coverage"),
        power_cut_rules=given.parse("--folio-power-cut-rules", _power_cut_rules),
    )
    # last: every value above has recorded where it came from
    return FolioSettings(
        orders=orders,
        block_sizes=block_sizes,
        mtd=mtd,
        fs=fs,
        mtd_size=mtd_size,
        erasesize=erasesize,
        fsx_ops=fsx_ops,
        seed=seed,
        fsx_replay=fsx_replay,
        fsx_dir=fsx_dir,
        compare_fail=compare_fail,
        sources=dict(given.sources),
        **values,
    )


def option_default(option: str) -> str | None:
    """An option's default as text (for the commands that take a size outside a run)."""
    return next(default for name, _, default, _ in _OPTIONS if name == option)
