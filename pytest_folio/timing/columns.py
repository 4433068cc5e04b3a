"""Runs as the columns of one table: ``show`` (one run), ``compare`` with any number of
runs, and the end-of-run summary.

A column is one target's records, from one run or merged from several: runs that each
cover a different folio size (one real-kernel boot per block size) join into one column
as long as no item at the same parameters is measured twice in it. Two columns are the
seeds' Base/Patched grid; one or more than two get a column per run, each later one with
its change against the first.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Sequence
from typing import Any

from pytest_folio.timing import table
from pytest_folio.timing.compare import Comparison, Key, Row, _key, compare_runs, label_order
from pytest_folio.timing.storage import Record, TimingRun


@dataclasses.dataclass
class Column:
    """One table column: the records of ``target`` from the runs named in ``sources``."""

    target: str
    records: list[Record]
    sources: list[str]
    title: str = ""
    machine: dict[str, Any] = dataclasses.field(default_factory=dict)  # the first run's

    @property
    def keys(self) -> set[Key]:
        return {_key(r) for r in self.records}

    def run(self) -> TimingRun:
        return TimingRun(records=self.records, machine=self.machine)


def by_target(name: str, run: TimingRun) -> list[Column]:
    """``run``'s records, one column per target, in the order targets first appear."""
    columns: dict[str, Column] = {}
    for record in run.records:
        columns.setdefault(record.target, Column(record.target, [], [name],
                                                 machine=run.machine)).records.append(record)
    return list(columns.values())


def merge(columns: Sequence[Column]) -> list[Column]:
    """Join each column into the first earlier one of the same target that measured none
    of its items at the same parameters; the rest stay columns of their own."""
    merged: list[Column] = []
    for column in columns:
        for into in merged:
            if into.target == column.target and not into.keys & column.keys:
                into.records += column.records
                into.sources += column.sources
                break
        else:
            merged.append(dataclasses.replace(column, records=list(column.records),
                                              sources=list(column.sources)))
    return merged


def one_run_columns(name: str, run: TimingRun) -> list[Column]:
    """A run shown alone: a column per target, titled by the target, or one column when
    no item was measured on more than one target (nothing to put side by side)."""
    columns = by_target(name, run)
    keys = [c.keys for c in columns]
    if len(columns) > 1 and all(not a & b for i, a in enumerate(keys) for b in keys[i + 1:]):
        titles = {c.target for c in columns}
        columns = [Column("", list(run.records), [name], name, run.machine)]
        columns[0].title = name if len(titles) > 1 else (titles.pop() or name)
    for column in columns:
        column.title = column.title or column.target or name
    return columns


def runs_columns(named: Sequence[tuple[str, TimingRun]]) -> list[Column]:
    """Runs side by side: their target columns, merged where they cover different
    parameters, titled by run name (by target where the names are not distinct)."""
    columns = merge([c for name, run in named for c in by_target(name, run)])
    for column in columns:
        first = column.sources[0]
        column.title = first if len(column.sources) == 1 else (
            f"{first}+{len(column.sources) - 1}")
    for attempt in range(2):      # distinct titles: add the target, then the position
        titles = [c.title for c in columns]
        for n, column in enumerate(columns):
            if titles.count(column.title) > 1:
                column.title = (f"{column.title} {column.target}".strip() if attempt == 0
                                else f"{n + 1}:{column.title}")
    return columns


@dataclasses.dataclass
class Table:
    """Rows of several columns: ``cells[key][i]`` is column i's Row against column 0."""

    titles: list[str]
    comparisons: list[Comparison]       # column 0 against each column (itself for one)

    def row_keys(self) -> list[tuple[str, str, str, str]]:
        seen: dict[tuple[str, str, str, str], None] = {}
        for c in self.comparisons:
            for r in c.rows:
                seen.setdefault((r.suite, r.name, r.unit, r.label), None)
        return list(seen)

    def row(self, i: int, key: tuple[str, str, str, str]) -> Row | None:
        for r in self.comparisons[i].rows:
            if (r.suite, r.name, r.unit, r.label) == key:
                return r
        return None


def build(columns: Sequence[Column], statistic: str = "median") -> Table:
    first = columns[0].run()
    others = columns[1:] or [Column("", [], [])]
    return Table([c.title for c in columns],
                 [compare_runs(first, c.run(), statistic=statistic) for c in others])


def _grouped(t: Table) -> list[tuple[tuple[str, str, str], list[tuple[str, str, str, str]]]]:
    """Keys by group (suite, name, unit) in first-seen order, rows by parameter order."""
    groups: dict[tuple[str, str, str], list[tuple[str, str, str, str]]] = {}
    for key in t.row_keys():
        groups.setdefault(key[:3], []).append(key)
    return [(g, sorted(keys, key=lambda k: label_order(k[3]))) for g, keys in groups.items()]


def _cells(t: Table, key: tuple[str, str, str, str], integral: bool,
           marked: bool) -> list[str]:
    rows = [t.row(i, key) for i in range(len(t.comparisons))]
    base = next((r for r in rows if r is not None and r.base), None)
    cells = [table.format_value(base.base_value if base else None, integral)]
    if len(t.titles) == 1:
        return cells
    for r in rows:
        cells.append(table.format_value(r.patched_value if r else None, integral))
        cells.append(table._change_cell(r, marked) if r else "-")
    return cells


def _headers(t: Table) -> list[str]:
    headers = [t.titles[0]]
    for title in t.titles[1:]:
        headers += [title, "Change"]
    return headers


def _all_rows(t: Table) -> list[Row]:
    return [r for c in t.comparisons for r in c.rows]


def _marked(t: Table) -> bool:
    return len(t.titles) > 1 and any(r.test.significant is False for r in _all_rows(t))


def _note(t: Table, marked: bool) -> list[str]:
    c = t.comparisons[0]
    if len(t.titles) == 1:
        return [f"values are the {c.what}"]
    text = (f"values are the {c.what}; changes against {t.titles[0]}")
    if marked:
        text = f"{table.NS}: not significant ({c.method}, p >= {c.alpha:g}); " + text
    return [text]


def _name(t: Table, group: tuple[str, str, str]) -> str:
    units = {k[2] for k in t.row_keys()}
    return group[1] if len(units) <= 1 else f"{group[1]} [{group[2]}]"


def grid(t: Table) -> str:
    rows = _all_rows(t)
    integral = table._integral(rows) if rows else False
    marked = _marked(t)
    blocks = [[(_name(t, g), k[3], *_cells(t, k, integral, marked)) for k in keys]
              for g, keys in _grouped(t)]
    headers = [table.HEADERS[0], table.label_header(rows), *_headers(t)]
    return table.grid_text(headers, blocks, table.SEED_WIDTHS[:2], _note(t, marked))


def markdown(t: Table) -> str:
    rows = _all_rows(t)
    integral = table._integral(rows) if rows else False
    marked = _marked(t)
    headers = [table.HEADERS[0], table.label_header(rows), *_headers(t)]
    lines = ["| " + " | ".join(h.replace("|", "\\|") for h in headers) + " |",
             "|:---|" + "---:|" * (len(headers) - 1)]
    for g, keys in _grouped(t):
        for i, k in enumerate(keys):
            name = _name(t, g).replace("|", "\\|") if i == 0 else ""
            cells = [c.rstrip() for c in _cells(t, k, integral, marked)]
            lines.append("| " + " | ".join([name, k[3], *cells]) + " |")
    return "\n".join([*lines, "", *_note(t, marked)]) + "\n"


def row_dicts(t: Table) -> list[dict[str, Any]]:
    out = []
    for g, keys in _grouped(t):
        for k in keys:
            rows = [t.row(i, k) for i in range(len(t.comparisons))]
            base = next((r for r in rows if r is not None and r.base), None)
            entry: dict[str, Any] = {
                "suite": g[0], "test": g[1], "unit": g[2], "folio": k[3],
                t.titles[0]: base.base_value if base else None}
            for title, r in zip(t.titles[1:], rows, strict=False):
                entry[title] = r.patched_value if r else None
                entry[f"change_pct {title}"] = r.change_pct if r else None
                entry[f"p_value {title}"] = r.test.p_value if r else None
            out.append(entry)
    return out


def csv_text(t: Table) -> str:
    rows = row_dicts(t)
    fields = list(dict.fromkeys(f for r in rows for f in r)) or ["suite", "test"]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: "" if v is None else v for k, v in r.items()})
    return out.getvalue()


def json_text(t: Table) -> str:
    c = t.comparisons[0]
    return json.dumps({"columns": t.titles, "method": c.method, "alpha": c.alpha,
                       "value": c.what, "rows": row_dicts(t)}, indent=1) + "\n"


def render(t: Table, fmt: str, seed_grid: bool = True) -> str:
    """``t`` in one of :data:`table.FORMATS`; exactly two columns are the seeds' grid
    (Base, Patched) unless not ``seed_grid`` (then they keep their titles)."""
    if len(t.titles) == 2 and seed_grid:
        return table.render(t.comparisons[0], fmt)
    renderers = {"grid": grid, "markdown": markdown, "csv": csv_text, "json": json_text}
    if fmt not in renderers:
        raise ValueError(f"unknown format {fmt!r} (use {', '.join(table.FORMATS)})")
    return renderers[fmt](t)
