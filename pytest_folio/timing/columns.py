"""Runs as the columns of one table (:mod:`pytest_folio.timing.table`): ``show`` (one
run), ``compare`` with any number of runs, and the end-of-run summary.

A column is one target's records, from one run or merged from several: runs that each
cover a different folio size (one real-kernel boot per block size) join into one column
as long as no item at the same parameters is measured twice in it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pytest_folio.timing import table
from pytest_folio.timing.compare import Key, compare_runs, record_key
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
        return {record_key(r) for r in self.records}

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


def build(columns: Sequence[Column], statistic: str = "median",
          figures: Sequence[str] = table.DEFAULT_FIGURES,
          titles: Sequence[str] | None = None) -> table.Table:
    """The table of ``columns``: the first against each other one (titled ``titles``, by
    default each column's own title)."""
    first = columns[0].run()
    others = columns[1:] or [Column("", [], [])]
    headings = [table.Heading(title, c.target, list(c.sources))
                for title, c in zip(titles or [c.title for c in columns], columns, strict=True)]
    return table.from_comparisons(
        headings, [compare_runs(first, c.run(), statistic=statistic) for c in others], figures)
