"""The timing subcommands of ``python -m pytest_folio``: ``show``, ``compare`` and
``bandwidth``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_folio.errors import CommandError
from pytest_folio.sizes import parse_size
from pytest_folio.timing import columns, meta, table
from pytest_folio.timing.autosave import STORAGE, resolve
from pytest_folio.timing.compare import (
    compare_counter,
    compare_runs,
    normalise_to,
    select_rows,
)
from pytest_folio.timing.plot import PlotError, plot_comparison, require_matplotlib
from pytest_folio.timing.stats import STATISTICS, center
from pytest_folio.timing.storage import TimingFileError, TimingRun, load_run


def _load(ref: str) -> TimingRun:
    return _named(ref, None)[1]


def _named(ref: str, storage: Path | None) -> tuple[str, TimingRun]:
    """(the file's stem, the run) of a file or (with ``storage``) of a run number or
    name saved there."""
    try:
        path = resolve(ref, storage) if storage is not None else Path(ref)
        return path.stem, load_run(path)
    except TimingFileError as exc:
        raise CommandError(str(exc)) from None


def _storage_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage", default=STORAGE, metavar="DIR",
                   help=f"where --folio-autosave's numbered runs are (default: {STORAGE})")


def register_show(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "show", help="print one saved run's table (a column per target)",
        description="Print a run saved with --folio-save or --folio-autosave: when, where "
                    "and with what code it was measured, then its table.")
    p.add_argument("run_ref", metavar="RUN", help="a file, or a saved run number or name")
    p.add_argument("--format", choices=table.FORMATS, default="grid")
    _statistic_option(p)
    _storage_option(p)
    p.set_defaults(run=run_show)


def run_show(args: argparse.Namespace) -> int:
    name, run = _named(args.run_ref, Path(args.storage))
    if not run.records:
        raise CommandError(f"{args.run_ref}: no timings in this run")
    t = columns.build(columns.one_run_columns(name, run), args.statistic)
    if args.format in ("grid", "markdown"):
        print(f"{name}: {meta.describe(run)}")
    print(columns.render(t, args.format, seed_grid=False), end="")
    return 0


def register_compare(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compare", help="print saved runs side by side (two: the seeds' table)",
        description="Compare runs saved with --folio-save or --folio-autosave (files, run "
                    "numbers or names). Two runs print the seeds' Base/Patched grid; more "
                    "print a column per run with its change against the first. Runs of "
                    "one target that cover different folio sizes merge into one column. "
                    "One run of two targets (vm --interleave: base and patched in one "
                    "boot) prints its two targets as Base/Patched.")
    p.add_argument("base", metavar="BASE")
    p.add_argument("patched", metavar="PATCHED", nargs="?",
                   help="leave out for one run that holds both sides (vm --interleave)")
    p.add_argument("more", metavar="MORE", nargs="*", help="further runs")
    p.add_argument("--format", choices=table.FORMATS, default="grid")
    p.add_argument("--plot", metavar="FILE.png", help="also draw time against folio size")
    p.add_argument("--row", action="append", default=[], metavar="NAME[=SHOWN AS]",
                   help="only these items, in this order, optionally renamed (repeatable)")
    p.add_argument("--counter", action="append", default=[], metavar="NAME",
                   help="also compare this model counter per pass, e.g. compound_head")
    _statistic_option(p)
    p.add_argument("--normalise", action="store_true",
                   help="scale PATCHED to BASE's machine by their memcpy bandwidths")
    _storage_option(p)
    p.set_defaults(run=run_compare)


def _statistic_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--statistic", choices=tuple(STATISTICS), default="median",
                   help="what a sample list shows as (default: median; min suits a busy "
                        "machine, where noise only adds time)")


def run_compare(args: argparse.Namespace) -> int:
    if args.plot:
        try:
            require_matplotlib()
        except PlotError as exc:
            raise CommandError(str(exc)) from None
    if args.counter and args.format in ("csv", "json"):
        raise CommandError("--counter prints extra tables: use --format grid or markdown")
    storage = Path(args.storage)
    refs = [args.base, *([args.patched] if args.patched else []), *args.more]
    named = [_named(ref, storage) for ref in refs]
    for line in meta.doubts(named):
        print(f"warning: {line}", file=sys.stderr)
    if len(named) == 1:          # one run holding both sides: its two targets
        cols = columns.by_target(*named[0])
        if len(cols) != 2:
            raise CommandError(f"{args.base}: {len(cols)} targets; one run compares when it "
                               "holds two, a base and a patched (vm --interleave)")
        sides = [c.run() for c in cols]
    elif len(named) == 2:        # the seeds' grid, whatever the targets: base, patched
        sides = [named[0][1], named[1][1]]
    else:
        cols = columns.runs_columns(named)
        if len(cols) != 2:
            if args.counter or args.row or args.normalise or args.plot:
                raise CommandError(f"{len(cols)} columns: --counter, --row, --normalise "
                                   "and --plot work on two (a base and a patched side)")
            t = columns.build(cols, args.statistic)
            if not t.row_keys():
                raise CommandError("no timings in these files")
            print(columns.render(t, args.format), end="")
            return 0
        sides = [c.run() for c in cols]
    base, patched = sides
    try:
        if args.normalise:
            patched = normalise_to(patched, base)
        comparisons = [compare_runs(base, patched, statistic=args.statistic)]
        comparisons += [compare_counter(base, patched, c) for c in args.counter]
        if args.row:
            comparisons = [select_rows(c, args.row, missing_ok=i > 0)
                           for i, c in enumerate(comparisons)]
        if not comparisons[0].groups:
            raise CommandError("no timings in either file")
        if args.plot:
            plot_comparison(comparisons[0], args.plot)
    except (ValueError, PlotError) as exc:
        raise CommandError(str(exc)) from None
    texts = [table.render(comparisons[0], args.format)]
    texts += [f"\n{c.what}:\n{table.render(c, args.format)}" for c in comparisons[1:]]
    print("".join(texts), end="")
    return 0


def register_bandwidth(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "bandwidth", help="print a run's bandwidth by block size (the ramfs seed's table)",
        description="Bandwidth by block size from a run saved with --folio-save: items in "
                    "GB/s directly, items in ms with extra['bytes'] as bytes per median "
                    "time.")
    p.add_argument("run_files", metavar="RUN.json", nargs="+",
                   help="one or more runs (e.g. one per mounted block size)")
    p.add_argument("--name", help="the item to show when the runs have several")
    _statistic_option(p)
    p.set_defaults(run=run_bandwidth)


def bandwidth_rows(runs: list[TimingRun], name: str | None = None,
                   statistic: str = "median") -> list[tuple[int, float]]:
    """(block size, GB/s) of every item that has a block size, sorted by block size.

    A time's ``statistic`` is taken before dividing (min time is max bandwidth).
    """
    rows: dict[int, float] = {}
    names = set()
    for r in (r for run in runs for r in run.records):
        size_text = r.params.get("bs", r.params.get("folio"))
        if size_text is None or (name is not None and r.name != name):
            continue
        if r.unit == "GB/s":
            best_rate = "max" if statistic == "min" else statistic
            gbps = max(r.samples) if best_rate == "max" else center(r.samples, statistic)
        elif r.unit == "ms" and isinstance(r.extra.get("bytes"), int):
            ms = center(r.samples, statistic)
            if ms <= 0:
                raise ValueError(f"{r.name} at {size_text}: a time of {ms:g} ms has no "
                                 "bandwidth")
            gbps = r.extra["bytes"] / (ms / 1e3) / 1e9
        else:
            continue
        names.add(r.name)
        rows[parse_size(str(size_text))] = gbps
    if len(names) > 1:
        raise ValueError(f"several items ({'; '.join(sorted(names))}): choose one with --name")
    return sorted(rows.items())


def run_bandwidth(args: argparse.Namespace) -> int:
    runs = [_load(path) for path in args.run_files]
    try:
        rows = bandwidth_rows(runs, args.name, args.statistic)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if not rows:
        raise CommandError("no item with a block size and a bandwidth in "
                           + ", ".join(args.run_files))
    print(table.bandwidth_table(rows), end="")
    return 0
