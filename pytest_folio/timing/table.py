"""The one table of timings: a model for any number of columns and its four renderers
(the seeds' grid, markdown, CSV, JSON), plus the ramfs seed's ``| bs | BW(GB/s) |`` table.

A :class:`Table` has one column per run (or per target, or per merged runs) and a line per
item and parameter set; every later column carries its change against the first. Two
columns are the first seed's grid (Test | Folio | Base | Patched | Change): its column
widths are minimums (a wider cell widens its column), a test name longer than the first
column wraps at spaces, numbers are right-aligned with two decimals and the change has a
sign, one decimal and ``%``. A grid wider than 80 columns narrows its Test column first,
down to the longest word, so the two-column grid with spreads fits. Every header
carries the unit when all lines share one (``Base (ms)``), else each item's name does
(``Write [ms]``). A cell shows the figures chosen (``--folio-columns``: by default the
median and the IQR, ``20.25 ±0.31``); a change that is not statistically significant
gets `` ns`` after it and a footnote names the test. CSV and JSON have one schema
whatever the number of columns: a record per line and column, with every figure at full
precision (docs/timing.md lists the fields).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from collections.abc import Sequence
from typing import Any

from pytest_folio.sizes import format_size, parse_size
from pytest_folio.terminal.textwidth import WIDTH, wrap
from pytest_folio.timing.compare import (
    SIZE_KEYS,
    Comparison,
    Row,
    label_order,
    param_label,
    size_key,
)
from pytest_folio.timing.statistics import (
    ALPHA,
    LOCATIONS,
    METHOD,
    SPREADS,
    Significance,
    Summary,
)

HEADERS = ("Test", "Folio", "Base", "Patched", "Change")   # the seed's; Base/Patched titles
SEED_WIDTHS = (28, 5, 6, 7, 7)
VALUE_WIDTH, CHANGE_WIDTH = SEED_WIDTHS[2], SEED_WIDTHS[4]
PARAMS_HEADER = "Params"        # the size column when lines share no size parameter
NS = "ns"
FORMATS = ("grid", "markdown", "csv", "json")
DEFAULT_FIGURES = ("median", "iqr")
FIGURE_NAMES = {"iqr": "IQR", "mad": "MAD"}
SCHEMA = "pytest-folio-table"
SCHEMA_VERSION = 1
FIELDS = ("suite", "test", "params", "size", "unit", "column", "column_index", "target",
          "runs", "n", "min", "median", "mean", "max", "q1", "q3", "iqr", "mad", "stdev",
          "statistic", "value", "change_pct", "p_value", "significant", "better")


def format_value(value: float | None, integral: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if integral else f"{value:.2f}"


def format_change(change: float | None) -> str:
    if change is None:
        return "-"
    text = f"{change:+.1f}%"
    return "+0.0%" if text == "-0.0%" else text


@dataclasses.dataclass
class Heading:
    """A column: its title, the target it measured and the runs it came from."""

    title: str
    target: str = ""
    runs: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Cell:
    """One column's samples of one line; ``change_pct`` and ``test`` against column 0."""

    samples: list[float]
    value: float | None = None          # the table's statistic, what the change compares
    change_pct: float | None = None
    test: Significance | None = None    # None in column 0 (nothing to test against)

    @property
    def summary(self) -> Summary | None:
        return Summary.of(self.samples) if self.samples else None


@dataclasses.dataclass
class Line:
    """An item at one parameter set, a cell per column."""

    params: dict[str, str]
    cells: list[Cell]
    better: str = "lower"


@dataclasses.dataclass
class Group:
    """The lines of one item name, in parameter order (one block of the grid)."""

    suite: str
    name: str
    unit: str
    lines: list[Line]


@dataclasses.dataclass
class Table:
    headings: list[Heading]
    groups: list[Group]
    statistic: str = "median"
    figures: tuple[str, ...] = DEFAULT_FIGURES
    exact: bool = False                 # counters: whole numbers, never tested
    what: str = "samples"               # what the values are of ("compound_head per pass")
    method: str = METHOD
    alpha: float = ALPHA

    @property
    def lines(self) -> list[Line]:
        return [line for group in self.groups for line in group.lines]

    @property
    def size_key(self) -> str | None:
        """The parameter the size column shows bare (see :func:`compare.size_key`)."""
        params = [line.params for line in self.lines]
        return size_key(params) if any(params) else "folio"

    @property
    def size_header(self) -> str:
        key = self.size_key
        return SIZE_KEYS[key] if key is not None else PARAMS_HEADER

    def label(self, line: Line) -> str:
        return param_label(line.params, self.size_key)

    @property
    def unit(self) -> str | None:
        """The unit every line shares, else None (then each group's name carries it)."""
        units = {g.unit for g in self.groups}
        return units.pop() if len(units) == 1 else None


def _cell(row: Row, side: str) -> Cell:
    samples = row.base if side == "base" else row.patched
    if side == "base":
        return Cell(samples, row.base_value)
    return Cell(samples, row.patched_value, row.change_pct, row.test)


def from_comparisons(headings: Sequence[Heading], comparisons: Sequence[Comparison],
                     figures: Sequence[str] = DEFAULT_FIGURES) -> Table:
    """The table of ``headings``: ``comparisons[i]`` pairs column 0 with column i + 1
    (one column: a comparison of its run with nothing). Groups come in first-seen order,
    lines by parameter order (sizes by size)."""
    first = comparisons[0]
    rows: dict[tuple[str, str, str], dict[str, list[Row | None]]] = {}
    for i, comparison in enumerate(comparisons):
        for row in comparison.rows:
            by_label = rows.setdefault((row.suite, row.name, row.unit), {})
            by_label.setdefault(row.label, [None] * len(comparisons))[i] = row
    groups = []
    for (suite, name, unit), by_label in rows.items():
        lines = []
        for found in by_label.values():
            some = next(r for r in found if r is not None)
            base = next((r for r in found if r is not None and r.base), some)
            cells = [_cell(base, "base")]
            if len(headings) > 1:
                cells += [_cell(r, "patched") if r is not None else Cell([]) for r in found]
            lines.append(Line(dict(some.params), cells, some.better))
        groups.append(Group(suite, name, unit, lines))
    statistic = first.rows[0].statistic if first.rows else "median"
    exact = bool(first.rows) and first.rows[0].exact
    t = Table(list(headings), groups, statistic, tuple(figures), exact,
              first.what.removesuffix(" of the samples") if exact else "samples",
              first.method, first.alpha)
    for group in t.groups:
        group.lines.sort(key=lambda line: label_order(t.label(line)))
    return t


def of(comparison: Comparison, figures: Sequence[str] = DEFAULT_FIGURES,
       titles: Sequence[str] = HEADERS[2:4]) -> Table:
    """A base-against-patched comparison as a two-column table (the seeds' grid)."""
    return from_comparisons([Heading(t) for t in titles], [comparison], figures)


def _table(t: Table | Comparison) -> Table:
    return t if isinstance(t, Table) else of(t)


# -- what cells show -----------------------------------------------------------------------

def _integral(t: Table) -> bool:
    """Counters per pass are whole numbers: show them without decimals."""
    values = [c.value for line in t.lines for c in line.cells if c.value is not None]
    return t.exact and bool(values) and all(v == int(v) for v in values)


def _shown(t: Table) -> list[str]:
    """The figures the cells show: spreads only when some cell has two samples or more."""
    spread = any(len(c.samples) > 1 for line in t.lines for c in line.cells)
    return [f for f in t.figures if spread or f not in SPREADS]


def _parts(t: Table, cell: Cell, shown: Sequence[str], integral: bool) -> list[str] | None:
    """The cell's figures as text: the locations joined by ``/``, then each spread
    (``±0.31``, "" when unknown) and the count; None for an empty cell."""
    summary = cell.summary
    if summary is None:
        return None
    locations = [format_value(summary.figure(n), integral) for n in shown if n in LOCATIONS]
    parts = ["/".join(locations)]
    for name in shown:
        value = summary.figure(name)
        if name == "n":
            parts.append(f" n={summary.n}")
        elif name in SPREADS:
            parts.append("" if value is None else f" ±{format_value(value, integral)}")
    return parts


def _value_cells(t: Table, column: int, aligned: bool) -> list[str]:
    """Column ``column``'s cells, line by line; ``aligned`` lines up each figure."""
    shown, integral = _shown(t), _integral(t)
    parts = [_parts(t, line.cells[column], shown, integral) for line in t.lines]
    widths = [max((len(p[i]) for p in parts if p is not None), default=0)
              for i in range(1 + sum(f not in LOCATIONS for f in shown))]
    out = []
    for p in parts:
        if p is None:
            out.append("-")
        elif aligned:
            out.append("".join(x.rjust(w) for x, w in zip(p, widths, strict=True)))
        else:
            out.append(" ".join(x.strip() for x in p if x))
    return out


def _marked(t: Table) -> bool:
    return any(c.test is not None and c.test.significant is False
               for line in t.lines for c in line.cells)


def _change_cells(t: Table, column: int, marked: bool) -> list[str]:
    out = []
    for line in t.lines:
        cell = line.cells[column]
        text = format_change(cell.change_pct)
        if marked and cell.change_pct is not None:
            text += f" {NS}" if cell.test and cell.test.significant is False else " " * 3
        elif marked:
            text += " " * 3
        out.append(text)
    return out


def headers(t: Table) -> list[str]:
    """Test, the size column, then each column's title (with the unit) and, after every
    column but the first, its Change."""
    unit = f" ({t.unit})" if t.unit else ""
    out = [HEADERS[0], t.size_header, t.headings[0].title + unit]
    for heading in t.headings[1:]:
        out += [heading.title + unit, HEADERS[4]]
    return out


def _body(t: Table, aligned: bool) -> list[list[str]]:
    """Every line's cells after the label, column by column as :func:`headers` has them."""
    marked = _marked(t)
    columns = [_value_cells(t, 0, aligned)]
    for i in range(1, len(t.headings)):
        columns += [_value_cells(t, i, aligned), _change_cells(t, i, marked)]
    return [list(cells) for cells in zip(*columns, strict=True)]


def _name(t: Table, group: Group) -> str:
    return group.name if t.unit is not None else f"{group.name} [{group.unit}]"


def _describe(t: Table) -> str:
    """What the cells hold, as they write it: ``min/median ±IQR n``."""
    shown = _shown(t)
    words = ["/".join(FIGURE_NAMES.get(n, n) for n in shown if n in LOCATIONS)]
    words += [("±" if n in SPREADS else "") + FIGURE_NAMES.get(n, n)
              for n in shown if n not in LOCATIONS]
    return " ".join(w for w in words if w)


def notes(t: Table) -> list[str]:
    """The footnote, in lines of at most 80 columns: what ``ns`` means, then what the
    cells hold and what changes are against. None when the grid is the seed's (two
    columns of one figure, nothing marked)."""
    marked = _marked(t)
    shown = _shown(t)
    if not marked and len(t.headings) == 2 and shown == [t.statistic]:
        return []
    lines = [f"{NS}: not significant ({t.method}, p >= {t.alpha:g})"] if marked else []
    parts = [f"cells: {_describe(t)} of the {t.what}"]
    if len(t.headings) > 1:
        against = f", against {t.headings[0].title}" if len(t.headings) > 2 else ""
        parts.append(f"change of the {t.statistic}{against}")
    return [*lines, *wrap("; ".join(parts), indent="  ")]


# -- renderers -----------------------------------------------------------------------------

def _words(name: str) -> list[str]:
    """A test name's words for wrapping: a parenthesised part (``(128 KiB)``) is one."""
    return re.findall(r"[^\s(]*\([^)]*\)\S*|\S+", name)


def _wrap_name(name: str, width: int) -> list[str]:
    """``name`` in lines of ``width`` at most, broken only between words (:func:`_words`)."""
    lines: list[str] = []
    for word in _words(name):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def grid_text(head: Sequence[str], blocks: Sequence[Sequence[Sequence[str]]],
              min_widths: Sequence[int], foot: Sequence[str] = ()) -> str:
    """The seeds' grid: ``blocks`` hold one group each, every line ``(group name, label,
    cells...)``; see the module docstring for the rules."""
    widths = [max(len(h), w) for h, w in zip(head, min_widths, strict=True)]
    longest_word = len(head[0])
    for block in blocks:
        for line in block:
            for col in range(1, len(head)):
                widths[col] = max(widths[col], len(line[col]) + (col == 1))
            longest_word = max([longest_word, *(len(w) for w in _words(line[0]))])
    # the names give way first: a grid wider than the terminal narrows its Test column
    # (names wrap at spaces) down to the longest word
    excess = sum(widths) + 3 * len(widths) + 1 - WIDTH
    widths[0] = max(longest_word, widths[0] - max(excess, 0))
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def render(cells: Sequence[str]) -> str:
        texts = [cells[0].ljust(widths[0]),
                 cells[1].rjust(widths[1] - 1) + " " if cells[1] else " " * widths[1],
                 *(c.rjust(w) for c, w in zip(cells[2:], widths[2:], strict=True))]
        return "| " + " | ".join(texts) + " |"

    lines = [sep, "| " + " | ".join(
        [head[0].ljust(widths[0]), head[1].ljust(widths[1]),
         *(h.rjust(w) for h, w in zip(head[2:], widths[2:], strict=True))]) + " |", sep]
    for block in blocks:
        name_lines = _wrap_name(block[0][0], widths[0])
        for i in range(max(len(block), len(name_lines))):
            name = name_lines[i] if i < len(name_lines) else ""
            rest = block[i][1:] if i < len(block) else ("",) * (len(head) - 1)
            lines.append(render((name, *rest)))
        lines.append(sep)
    lines += foot
    return "\n".join(lines) + "\n"


def _blocks(t: Table, aligned: bool) -> list[list[list[str]]]:
    body = iter(_body(t, aligned))
    return [[[_name(t, g), t.label(line), *next(body)] for line in g.lines] for g in t.groups]


def grid(t: Table | Comparison) -> str:
    """The seeds' table for any number of columns; see the module docstring."""
    t = _table(t)
    head = headers(t)
    mins = [*SEED_WIDTHS[:2], VALUE_WIDTH,
            *[w for _ in t.headings[1:] for w in (VALUE_WIDTH, CHANGE_WIDTH)]]
    return grid_text(head, _blocks(t, aligned=True), mins, notes(t))


def markdown(t: Table | Comparison) -> str:
    """A GitHub table: the grid's columns, the name once per group, no wrapping."""
    t = _table(t)
    head = headers(t)
    lines = ["| " + " | ".join(h.replace("|", "\\|") for h in head) + " |",
             "|:---|" + "---:|" * (len(head) - 1)]
    for block in _blocks(t, aligned=False):
        for i, cells in enumerate(block):
            name = cells[0].replace("|", "\\|") if i == 0 else ""
            lines.append("| " + " | ".join([name, *(c.rstrip() for c in cells[1:])]) + " |")
    foot = notes(t)
    return "\n".join([*lines, *(["", *foot] if foot else [])]) + "\n"


def _size(line: Line, key: str | None) -> int | None:
    try:
        return parse_size(line.params[key]) if key in line.params else None
    except ValueError:
        return None


def records(t: Table | Comparison) -> list[dict[str, Any]]:
    """One record per line and column, every figure at full precision (the CSV and JSON
    schema: :data:`FIELDS`, JSON adding ``samples``)."""
    t = _table(t)
    key = t.size_key or next(iter(SIZE_KEYS))
    out = []
    for group in t.groups:
        for line in group.lines:
            for i, (heading, cell) in enumerate(zip(t.headings, line.cells, strict=True)):
                s = cell.summary
                test = cell.test
                out.append({
                    "suite": group.suite, "test": group.name,
                    "params": param_label(line.params, None), "size": _size(line, key),
                    "unit": group.unit, "column": heading.title, "column_index": i,
                    "target": heading.target, "runs": "+".join(heading.runs),
                    "n": len(cell.samples),
                    **{f: None if s is None else s.figure(f) for f in FIELDS[10:19]},
                    "statistic": t.statistic, "value": cell.value,
                    "change_pct": cell.change_pct,
                    "p_value": test.p_value if test else None,
                    "significant": test.significant if test else None,
                    "better": line.better, "samples": list(cell.samples),
                })
    return out


def csv_text(t: Table | Comparison) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for record in records(t):
        writer.writerow({k: "" if v is None else v for k, v in record.items()})
    return out.getvalue()


def json_text(t: Table | Comparison) -> str:
    t = _table(t)
    return json.dumps({
        "format": SCHEMA, "version": SCHEMA_VERSION, "statistic": t.statistic,
        "method": t.method, "alpha": t.alpha,
        "columns": [dataclasses.asdict(h) for h in t.headings], "rows": records(t),
    }, indent=1) + "\n"


def render(t: Table | Comparison, fmt: str) -> str:
    """The table in one of :data:`FORMATS`."""
    renderers = {"grid": grid, "markdown": markdown, "csv": csv_text, "json": json_text}
    if fmt not in renderers:
        raise ValueError(f"unknown format {fmt!r} (use {', '.join(FORMATS)})")
    return renderers[fmt](t)


def dd_size(nbytes: int) -> str:
    """Block sizes as dd and the ramfs seed write them: 4k, 512k, 1M, 2M."""
    return format_size(nbytes).replace("K", "k")


def bandwidth_table(rows: Sequence[tuple[int, float]]) -> str:
    """The ramfs seed's table: block size against bandwidth in GB/s with one decimal."""
    sizes = [dd_size(bs) for bs, _ in rows]
    values = [f"{gbps:.1f}" for _, gbps in rows]
    w0 = max([4, *map(len, sizes)])
    w1 = max([len("BW(GB/s)"), *map(len, values)])
    sep = f"+{'-' * (w0 + 2)}+{'-' * (w1 + 2)}+"
    lines = [sep, f"| {'bs'.center(w0)} | {'BW(GB/s)'.rjust(w1)} |", sep]
    lines += [f"| {s.ljust(w0)} | {v.rjust(w1)} |" for s, v in zip(sizes, values, strict=True)]
    lines.append(sep)
    return "\n".join(lines) + "\n"
