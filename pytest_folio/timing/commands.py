"""The timing subcommands of ``python -m pytest_folio``: ``show``, ``compare``, ``list``
and ``bandwidth``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from pytest_folio.errors import CommandError
from pytest_folio.inputs import printable
from pytest_folio.options import parse_figures
from pytest_folio.sizes import parse_size
from pytest_folio.terminal.textwidth import wrap
from pytest_folio.timing import columns, meta, table
from pytest_folio.timing.autosave import STORAGE, resolve, saved_runs
from pytest_folio.timing.compare import (
    compare_counter,
    compare_runs,
    normalise_to,
    select_rows,
)
from pytest_folio.timing.plot import PlotError, plot_format, plot_table
from pytest_folio.timing.statistics import FIGURES, STATISTICS, center
from pytest_folio.timing.storage import TimingFileError, TimingRun, load_run


def _emit(text: str, file: TextIO | None = None) -> None:
    """Print text made of a saved run's names with their control characters escaped:
    a run is a file anyone may hand over, and its names must not drive the terminal."""
    print(printable(text), end="", file=file or sys.stdout)


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


def _figures_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--columns", type=_figures, default=None, metavar="FIGURES",
                   help="what each cell shows, comma-separated from "
                        f"{', '.join(FIGURES)} (default: the statistic and iqr, e.g. "
                        "min,median,iqr)")


def _figures(text: str) -> tuple[str, ...]:
    try:
        return parse_figures(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def figures_of(args: argparse.Namespace) -> tuple[str, ...]:
    """--columns, or the statistic the changes compare and its IQR."""
    return args.columns or (args.statistic, *table.DEFAULT_FIGURES[1:])


def register_show(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "show", help="print one saved run's table (a column per target)",
        description="Print a run saved with --folio-save or --folio-autosave: when, where "
                    "and with what code it was measured, then its table.")
    p.add_argument("run_ref", metavar="RUN", help="a file, or a saved run number or name")
    p.add_argument("--format", choices=table.FORMATS, default="grid")
    _statistic_option(p)
    _figures_option(p)
    _storage_option(p)
    p.set_defaults(run=run_show)


def run_show(args: argparse.Namespace) -> int:
    name, run = _named(args.run_ref, Path(args.storage))
    if not run.records:
        raise CommandError(f"{args.run_ref}: no timings in this run")
    t = columns.build(columns.one_run_columns(name, run), args.statistic, figures_of(args))
    if args.format in ("grid", "markdown"):
        _emit("\n".join(wrap(f"{name}: {meta.describe(run)}")) + "\n")
    _emit(table.render(t, args.format))
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
    _figures_option(p)
    p.add_argument("--normalise", action="store_true",
                   help="scale every run to BASE's machine by their memcpy bandwidths")
    _storage_option(p)
    p.set_defaults(run=run_compare)


def _statistic_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--statistic", choices=tuple(STATISTICS), default="median",
                   help="what changes compare (default: median; min suits a busy "
                        "machine, where noise only adds time)")


def _sides(args: argparse.Namespace,
           named: list[tuple[str, TimingRun]]) -> list[columns.Column]:
    """The table's columns: one run's two targets, two runs whole, or more runs merged
    where they cover different parameters."""
    if len(named) == 1:          # one run holding both sides: its two targets
        cols = columns.by_target(*named[0])
        if len(cols) != 2:
            raise CommandError(f"{args.base}: {len(cols)} targets; one run compares when it "
                               "holds two, a base and a patched (vm --interleave)")
        return cols
    if len(named) == 2:          # the seeds' grid, whatever the targets: base, patched
        return [columns.Column(",".join(dict.fromkeys(r.target for r in run.records)),
                               run.records, [name], name, run.machine) for name, run in named]
    return columns.runs_columns(named)


def _tables(args: argparse.Namespace, cols: list[columns.Column]) -> list[table.Table]:
    """The timings' table, then one per --counter, with --row and --normalise applied."""
    titles = list(table.HEADERS[2:4]) if len(cols) == 2 else [c.title for c in cols]
    headings = [table.Heading(t, c.target, list(c.sources))
                for t, c in zip(titles, cols, strict=True)]
    base, *others = [c.run() for c in cols]
    if args.normalise:
        others = [normalise_to(run, base) for run in others]
    others = others or [TimingRun(records=[])]
    compared = [[compare_runs(base, run, statistic=args.statistic) for run in others]]
    compared += [[compare_counter(base, run, c) for run in others] for c in args.counter]
    if args.row:
        compared = [[select_rows(c, args.row, missing_ok=i > 0) for c in cs]
                    for i, cs in enumerate(compared)]
    if not any(c.groups for c in compared[0]):
        raise CommandError("no timings in these files")
    return [table.from_comparisons(headings, cs, figures_of(args)) for cs in compared]


def run_compare(args: argparse.Namespace) -> int:
    if args.plot:
        try:
            plot_format(args.plot)
        except PlotError as exc:
            raise CommandError(str(exc)) from None
    if args.counter and args.format in ("csv", "json"):
        raise CommandError("--counter prints extra tables: use --format grid or markdown")
    storage = Path(args.storage)
    refs = [args.base, *([args.patched] if args.patched else []), *args.more]
    named = [_named(ref, storage) for ref in refs]
    for line in meta.doubts(named):
        _emit(f"warning: {line}\n", sys.stderr)
    try:
        tables = _tables(args, _sides(args, named))
        if args.plot:
            plot_table(tables[0], args.plot)
    except (ValueError, PlotError) as exc:
        raise CommandError(str(exc)) from None
    texts = [table.render(tables[0], args.format)]
    texts += [f"\n{t.what}:\n{table.render(t, args.format)}" for t in tables[1:]]
    _emit("".join(texts))
    return 0


def register_list(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "list", help="list saved runs: number and name, then what each holds",
        description="List the runs saved under the storage directory (numbered by "
                    "--folio-autosave, or named files saved there with --folio-save) and "
                    "any timing files given: the number (- for a named file) and name, "
                    "then the date, items and whether complete, then what tells runs "
                    "apart: target, kernel and git commit.")
    p.add_argument("files", metavar="RUN.json", nargs="*", help="other saved runs to list")
    _storage_option(p)
    p.set_defaults(run=run_list)


def list_entry(path: Path) -> list[str]:
    """What ``list`` says of one saved run under its number and name: when, how much
    and whether complete, then what tells runs apart (target, kernel, git state)."""
    try:
        run = load_run(path)
    except TimingFileError as exc:
        return [f"unreadable: {exc}"]
    items = len({(r.suite, r.name, r.unit) for r in run.records})
    return [f"{run.created[:16].replace('T', ' ')}, {items} item{'s'[:items != 1]} "
            f"({len(run.records)} measurements), "
            f"{'complete' if run.complete else 'partial'}", meta.identity(run)]


def run_list(args: argparse.Namespace) -> int:
    storage = Path(args.storage)
    numbered = saved_runs(storage)
    seen = {p for *_, p in numbered}
    named = sorted(p for p in storage.glob("*.json") if p not in seen) if storage.is_dir() \
        else []
    runs = [(str(n), name, p) for n, name, p in numbered]
    runs += [("-", str(p), p) for p in [*named, *map(Path, args.files)]]
    if not runs:
        _emit(f"no saved runs in {storage} (save one with --folio-autosave)\n")
        return 0
    width = max(len(number) for number, *_ in runs)
    indent = " " * (width + 2)
    for number, name, path in runs:
        _emit(f"{number.rjust(width)}  {name}\n")
        for text in list_entry(path):
            _emit("\n".join(wrap(indent + text, indent=indent + "  ")) + "\n")
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
    _emit(table.bandwidth_table(rows))
    return 0
