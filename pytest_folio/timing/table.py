"""The comparison as text: the seeds' grid (the block2mtd cover letter's table), markdown,
CSV, JSON, and the ramfs seed's ``| bs | BW(GB/s) |`` table.

The grid is the first seed's table to the character: its column widths are minimums (a
wider number widens its column), a test name longer than the first column wraps at
spaces onto more lines, numbers are right-aligned with two decimals and the change has a
sign, one decimal and ``%``. A change that is not statistically significant gets `` ns``
after it and a footnote names the test; when every change is significant, or none could
be tested (too few samples, e.g. one a side), the grid is exactly the seed's layout.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from collections.abc import Sequence
from typing import Any

from pytest_folio.sizes import format_size
from pytest_folio.timing.compare import Comparison, Row

HEADERS = ("Test", "Folio", "Base", "Patched", "Change")
SEED_WIDTHS = (28, 5, 6, 7, 7)
NS = "ns"
FORMATS = ("grid", "markdown", "csv", "json")


def format_value(value: float | None, integral: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if integral else f"{value:.2f}"


def format_change(change: float | None) -> str:
    if change is None:
        return "-"
    text = f"{change:+.1f}%"
    return "+0.0%" if text == "-0.0%" else text


def _integral(rows: Sequence[Row]) -> bool:
    """Counters per pass are whole numbers: show them without decimals."""
    values = [v for r in rows for v in (r.base_value, r.patched_value) if v is not None]
    return bool(values) and all(rows[0].exact and v == int(v) for v in values)


def _group_name(comparison: Comparison, name: str, unit: str) -> str:
    units = {g.unit for g in comparison.groups}
    return name if len(units) <= 1 else f"{name} [{unit}]"


def _marked(comparison: Comparison) -> bool:
    return any(r.test.significant is False for r in comparison.rows)


def _change_cell(row: Row, marked: bool) -> str:
    text = format_change(row.change_pct)
    if not marked:
        return text
    return text + (f" {NS}" if row.test.significant is False else " " * (len(NS) + 1))


def footnote(comparison: Comparison) -> str:
    return (f"{NS}: not significant ({comparison.method}, p >= {comparison.alpha:g}); "
            f"Base and Patched are the {comparison.what}")


Block = list[tuple[str, ...]]   # one group's lines: (name, label, cells...)


def grid_text(headers: Sequence[str], blocks: Sequence[Block],
              min_widths: Sequence[int], notes: Sequence[str] = ()) -> str:
    """The seeds' grid for any number of value columns: ``blocks`` hold one group each,
    every line ``(group name, label, cells...)``; see the module docstring for the rules."""
    ncols = len(headers)
    widths = [*min_widths, *(len(h) for h in headers[len(min_widths):])][:ncols]
    widths[1] = max(widths[1], len(headers[1]))
    for col in range(2, ncols):
        widths[col] = max(widths[col], len(headers[col]))
    for block in blocks:
        for line in block:
            for col in range(1, ncols):
                widths[col] = max(widths[col], len(line[col]) + (col == 1))
            widths[0] = max([widths[0], *(len(w) for w in line[0].split())])
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def render(cells: Sequence[str]) -> str:
        texts = [cells[0].ljust(widths[0]),
                 cells[1].rjust(widths[1] - 1) + " " if cells[1] else " " * widths[1],
                 *(c.rjust(w) for c, w in zip(cells[2:], widths[2:], strict=True))]
        return "| " + " | ".join(texts) + " |"

    lines = [sep, "| " + " | ".join(
        [headers[0].ljust(widths[0]), headers[1].ljust(widths[1]),
         *(h.rjust(w) for h, w in zip(headers[2:], widths[2:], strict=True))]) + " |", sep]
    for block in blocks:
        name_lines = textwrap.wrap(block[0][0], widths[0], break_long_words=False,
                                   break_on_hyphens=False) or [""]
        for i in range(max(len(block), len(name_lines))):
            name = name_lines[i] if i < len(name_lines) else ""
            rest: tuple[str, ...] = block[i][1:] if i < len(block) else ("",) * (ncols - 1)
            lines.append(render((name, *rest)))
        lines.append(sep)
    lines += notes
    return "\n".join(lines) + "\n"


def label_header(rows: Sequence[Row]) -> str:
    """"Folio", or "Params" when no row has a folio size (block sizes, other parameters)."""
    return ("Params" if rows and all(r.label.partition(",")[0].count("=") for r in rows)
            else HEADERS[1])


def grid(comparison: Comparison) -> str:
    """The seeds' table; see the module docstring for the rules."""
    marked = _marked(comparison)
    integral = _integral(comparison.rows)
    headers = (HEADERS[0], label_header(comparison.rows), *HEADERS[2:])
    blocks: list[Block] = []
    for group in comparison.groups:
        cells = [(r.label, format_value(r.base_value, integral),
                  format_value(r.patched_value, integral), _change_cell(r, marked))
                 for r in group.rows]
        blocks.append([(_group_name(comparison, group.name, group.unit), *c) for c in cells])
    return grid_text(headers, blocks, SEED_WIDTHS, [footnote(comparison)] if marked else [])


def markdown(comparison: Comparison) -> str:
    """A GitHub table: the grid's columns, the name once per group, no wrapping."""
    marked = _marked(comparison)
    integral = _integral(comparison.rows)
    lines = ["| " + " | ".join(HEADERS) + " |", "|:---|---:|---:|---:|---:|"]
    for group in comparison.groups:
        for i, r in enumerate(group.rows):
            name = _group_name(comparison, group.name, group.unit) if i == 0 else ""
            lines.append("| " + " | ".join([
                name.replace("|", "\\|"), r.label, format_value(r.base_value, integral),
                format_value(r.patched_value, integral), _change_cell(r, marked).rstrip(),
            ]) + " |")
    if marked:
        lines += ["", footnote(comparison)]
    return "\n".join(lines) + "\n"


def row_dicts(comparison: Comparison) -> list[dict[str, Any]]:
    """Every row with full precision and its raw samples, for CSV and JSON."""
    out = []
    for group in comparison.groups:
        for r in group.rows:
            test = r.test
            out.append({
                "suite": r.suite, "test": group.name, "folio": r.label, "unit": r.unit,
                "base": r.base_value, "patched": r.patched_value,
                "change_pct": r.change_pct, "p_value": test.p_value,
                "significant": test.significant, "better": r.better,
                "n_base": len(r.base), "n_patched": len(r.patched),
                "base_samples": r.base, "patched_samples": r.patched,
            })
    return out


def csv_text(comparison: Comparison) -> str:
    fields = ["suite", "test", "folio", "unit", "base", "patched", "change_pct", "p_value",
              "significant", "better", "n_base", "n_patched"]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in row_dicts(comparison):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def json_text(comparison: Comparison) -> str:
    return json.dumps({"method": comparison.method, "alpha": comparison.alpha,
                       "value": comparison.what, "rows": row_dicts(comparison)},
                      indent=1) + "\n"


def render(comparison: Comparison, fmt: str) -> str:
    """The comparison in one of :data:`FORMATS`."""
    renderers = {"grid": grid, "markdown": markdown, "csv": csv_text, "json": json_text}
    if fmt not in renderers:
        raise ValueError(f"unknown format {fmt!r} (use {', '.join(FORMATS)})")
    return renderers[fmt](comparison)


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
