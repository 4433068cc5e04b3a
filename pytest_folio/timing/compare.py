"""Line up a base run and a patched run item by item: the rows every table format shows.

Rows are matched on (suite, item name, unit, parameters); the target is left out because
it is what differs between base and patched (``api=page`` against ``api=folio``, or two
kernels' ``/dev/mtd0``). Samples of records that share a key are pooled.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pytest_folio.sizes import parse_size
from pytest_folio.timing.statistics import (
    ALPHA,
    METHOD,
    STATISTICS,
    Significance,
    Verdict,
    center,
    gate,
    significance,
)
from pytest_folio.timing.storage import Record, TimingRun

Key = tuple[str, str, str, tuple[tuple[str, str], ...]]

HIGHER_IS_BETTER_UNITS = ("/s", "ops", "iops")


def better_direction(unit: str, extra: dict[str, Any]) -> str:
    """"lower" for times, "higher" for rates; a measurement's ``extra["better"]`` decides."""
    chosen = extra.get("better")
    if chosen in ("lower", "higher"):
        return str(chosen)
    return "higher" if unit.lower().endswith(HIGHER_IS_BETTER_UNITS) else "lower"


SIZE_KEYS = {"folio": "Folio", "bs": "bs"}    # a size parameter -> its column's header


def param_label(params: dict[str, Any], bare: str | None = "folio") -> str:
    """Parameters as a table cell: the ``bare`` one's value first (``16K``), then every
    other as ``key=value`` in key order (``16K,eb=4K``)."""
    others = [f"{k}={v}" for k, v in sorted(params.items()) if k != bare]
    return ",".join([str(params[bare]), *others] if bare in params else others)


def size_key(all_params: Iterable[dict[str, Any]]) -> str | None:
    """The size parameter a table's rows share (folio, else bs), which its size column is
    headed by and shows bare; None when rows with parameters share neither."""
    given = [p for p in all_params if p]
    for key in SIZE_KEYS:
        if all(key in p for p in given):
            return key
    return None


def _size_of(part: str) -> int | None:
    """The size a label part names: ``16K`` or ``bs=16K``; None when it is not a size."""
    try:
        return parse_size(part.rpartition("=")[2])
    except ValueError:
        return None


def label_size(label: str) -> int | None:
    """The folio or block size a label starts with (``16K`` of ``16K,i=3``, ``bs=16K``)."""
    return _size_of(label.partition(",")[0])


def label_order(label: str) -> tuple[tuple[int, int, str], ...]:
    """Labels sort part by part, sizes by size (4K before 16K before 128K), other
    values by their text."""
    order = []
    for part in label.split(","):
        size = _size_of(part)
        order.append((1, 0, part) if size is None else (0, size, part.rpartition("=")[0]))
    return tuple(order)


@dataclasses.dataclass
class Row:
    """One item at one parameter set, base against patched."""

    suite: str
    name: str
    unit: str
    label: str
    base: list[float]
    patched: list[float]
    better: str = "lower"
    alpha: float = ALPHA
    exact: bool = False             # counters: no noise, so no significance test
    statistic: str = "median"       # what the change compares (statistics.STATISTICS)
    params: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def base_value(self) -> float | None:
        return center(self.base, self.statistic) if self.base else None

    @property
    def patched_value(self) -> float | None:
        return center(self.patched, self.statistic) if self.patched else None

    @property
    def change_pct(self) -> float | None:
        """Patched against base in percent; None when a side is missing or base is 0."""
        b, p = self.base_value, self.patched_value
        if b is None or p is None or b == 0:
            return None
        return (p - b) / b * 100.0

    @functools.cached_property
    def test(self) -> Significance:
        if self.exact or not self.base or not self.patched:
            return Significance(None, self.alpha)
        return significance(self.base, self.patched, self.alpha)

    @property
    def regression_pct(self) -> float:
        """How much worse patched is, in percent (negative or 0 when it is not worse)."""
        change = self.change_pct
        if change is None:
            return 0.0
        return change if self.better == "lower" else -change

    def verdict(self, limit_pct: float) -> Verdict:
        """What the regression gate makes of this row at ``limit_pct`` (statistics.gate)."""
        if self.exact or not self.base or not self.patched:
            return Verdict("ok")
        return gate(self.base, self.patched, self.regression_pct, limit_pct,
                    lower_is_better=self.better == "lower", alpha=self.alpha)


@dataclasses.dataclass
class Group:
    """The rows of one item name, in parameter order (one block of the grid)."""

    suite: str
    name: str
    unit: str
    rows: list[Row]


@dataclasses.dataclass
class Comparison:
    groups: list[Group]
    method: str = METHOD
    alpha: float = ALPHA
    what: str = "median of the samples"

    @property
    def rows(self) -> list[Row]:
        return [row for group in self.groups for row in group.rows]


def record_key(record: Record) -> Key:
    """What rows are matched on: suite, item name, unit and parameters (not the target)."""
    params = tuple(sorted((str(k), str(v)) for k, v in record.params.items()))
    return record.suite, record.name, record.unit, params


def _pool(records: Iterable[Record],
          values: Callable[[Record], list[float]]) -> dict[Key, tuple[Record, list[float]]]:
    pooled: dict[Key, tuple[Record, list[float]]] = {}
    for record in records:
        samples = pooled.setdefault(record_key(record), (record, []))[1]
        samples.extend(values(record))
    return pooled


def _samples(record: Record) -> list[float]:
    return list(record.samples)


def compare_runs(base: TimingRun, patched: TimingRun, alpha: float = ALPHA,
                 values: Callable[[Record], list[float]] = _samples,
                 exact: bool = False, unit: str | None = None,
                 statistic: str = "median") -> Comparison:
    """Pair every item of ``base`` with ``patched``; items in only one run keep a blank side.

    Groups come in the base run's order (new items last); inside a group rows go by folio
    size. ``values`` picks what is compared (the samples, or a counter per pass);
    ``statistic`` what the Base and Patched columns show.
    """
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r} (use {', '.join(STATISTICS)})")
    old = _pool(base.records, values)
    new = _pool(patched.records, values)
    groups: dict[tuple[str, str, str], Group] = {}
    for key in [*old, *(k for k in new if k not in old)]:
        record = (old.get(key) or new[key])[0]
        shown_unit = unit or record.unit
        group = groups.setdefault(
            key[:3], Group(record.suite, record.name, shown_unit, []))
        group.rows.append(Row(
            suite=record.suite, name=record.name, unit=shown_unit,
            label=param_label(record.params),
            base=old[key][1] if key in old else [],
            patched=new[key][1] if key in new else [],
            better=better_direction(record.unit, record.extra),
            alpha=alpha, exact=exact, statistic=statistic,
            params={str(k): str(v) for k, v in record.params.items()}))
    for group in groups.values():
        group.rows.sort(key=lambda r: label_order(r.label))
    return Comparison(list(groups.values()), alpha=alpha,
                      what=f"{statistic} of the samples")


def counter_per_pass(counter: str) -> Callable[[Record], list[float]]:
    """Values for comparing a model counter: its total over the passes, divided by them.

    A record with counters but not this one counted zero of it (snapshots may leave out
    zeros); a record without counters (a real device) has no value.
    """
    def values(record: Record) -> list[float]:
        if not record.counters:
            return []
        return [record.counters.get(counter, 0) / len(record.samples)]
    return values


def compare_counter(base: TimingRun, patched: TimingRun, counter: str) -> Comparison:
    """Base against patched for one counter per pass; counters are exact, so never tested.

    A counter that neither run recorded is a ValueError.
    """
    if not any(counter in r.counters for run in (base, patched) for r in run.records):
        raise ValueError(f"no counter {counter!r} in either file")
    comparison = compare_runs(base, patched, values=counter_per_pass(counter), exact=True,
                              unit="per pass")
    comparison.groups = [g for g in comparison.groups
                         if any(r.base or r.patched for r in g.rows)]
    comparison.what = f"{counter} per pass"
    return comparison


def normalise_to(run: TimingRun, reference: TimingRun) -> TimingRun:
    """``run`` as if measured on ``reference``'s machine, scaled by memcpy bandwidth.

    Times scale by run's bandwidth over the reference's (a machine that copies twice as
    fast would take twice as long on the reference), rates by the inverse. A run
    without the figure is a ValueError.
    """
    try:
        factor = float(run.machine["memcpy_gbps"]) / float(reference.machine["memcpy_gbps"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        raise ValueError("both runs need the machine's memcpy_gbps to normalise") from None
    records = []
    for r in run.records:
        scale = factor if better_direction(r.unit, r.extra) == "lower" else 1 / factor
        records.append(dataclasses.replace(r, samples=[v * scale for v in r.samples]))
    return dataclasses.replace(run, records=records)


def select_rows(comparison: Comparison, wanted: Sequence[str],
                missing_ok: bool = False) -> Comparison:
    """Keep and order groups as ``wanted`` lists them: ``NAME`` or ``NAME=SHOWN AS``.

    This is how a cover letter's table is cut from a suite's fuller output. An unknown
    name is a ValueError naming what there is, unless ``missing_ok`` (a counter table
    leaves out items without counters).
    """
    by_name = {g.name: g for g in comparison.groups}
    chosen = []
    for entry in wanted:
        name, _, shown = entry.partition("=")
        group = by_name.get(name.strip())
        if group is None and missing_ok:
            continue
        if group is None:
            known = "; ".join(by_name) or "none"
            raise ValueError(f"no item named {name.strip()!r} (items: {known})")
        name = shown.strip() or group.name
        chosen.append(dataclasses.replace(
            group, name=name, rows=[dataclasses.replace(r, name=name) for r in group.rows]))
    return dataclasses.replace(comparison, groups=chosen)
