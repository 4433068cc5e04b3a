"""The seeds' tables, character for character, and the other formats."""

from __future__ import annotations

import csv
import io
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_folio.timing import table
from pytest_folio.timing.compare import Comparison, compare_runs, select_rows
from pytest_folio.timing.storage import TimingRun
from tests.helpers.timing import RunFactory

SEED_GRID = """\
+------------------------------+-------+--------+---------+---------+
| Test                         | Folio |   Base | Patched |  Change |
+------------------------------+-------+--------+---------+---------+
| Eraseblock read (128 KiB)    |   4K  |  20.25 |   19.55 |   -3.4% |
|                              |  16K  |  20.19 |   14.55 |  -27.9% |
|                              |  64K  |  20.21 |   13.24 |  -34.5% |
+------------------------------+-------+--------+---------+---------+
| Eraseblock write (128 KiB)   |   4K  |  26.37 |   25.01 |   -5.1% |
|                              |  16K  |  26.10 |   17.62 |  -32.5% |
|                              |  64K  |  25.69 |   15.45 |  -39.8% |
+------------------------------+-------+--------+---------+---------+
| Page read (512 B)            |   4K  |  75.70 |   72.02 |   -4.9% |
|                              |  16K  |  76.50 |   73.00 |   -4.6% |
|                              |  64K  |  76.44 |   72.96 |   -4.5% |
+------------------------------+-------+--------+---------+---------+
| Page write (512 B)           |   4K  | 113.57 |  109.59 |   -3.5% |
|                              |  16K  | 114.42 |  109.73 |   -4.1% |
|                              |  64K  | 114.39 |  109.57 |   -4.2% |
+------------------------------+-------+--------+---------+---------+
| 2-page read (1 KiB)          |   4K  |  48.42 |   46.40 |   -4.2% |
|                              |  16K  |  48.96 |   47.07 |   -3.9% |
|                              |  64K  |  48.59 |   47.07 |   -3.1% |
+------------------------------+-------+--------+---------+---------+
| 2-page write (1 KiB)         |   4K  |  63.61 |   61.28 |   -3.7% |
|                              |  16K  |  63.96 |   61.20 |   -4.3% |
|                              |  64K  |  63.82 |   60.85 |   -4.6% |
+------------------------------+-------+--------+---------+---------+
| Erase, blocks hold data      |   4K  |  15.40 |   14.13 |   -8.3% |
| (mtd_speedtest)              |  16K  |  15.28 |   10.48 |  -31.4% |
|                              |  64K  |  15.22 |   10.13 |  -33.4% |
+------------------------------+-------+--------+---------+---------+
| Erase, already erased        |   4K  |  26.60 |   18.30 |  -31.2% |
| (MEMERASE ioctl)             |  16K  |  26.70 |   15.10 |  -43.4% |
|                              |  64K  |  26.50 |   14.40 |  -45.7% |
+------------------------------+-------+--------+---------+---------+
"""

SEED_RAMFS = """\
+------+----------+
|  bs  | BW(GB/s) |
+------+----------+
| 4k   |      1.7 |
| 8k   |      2.4 |
| 16k  |      3.2 |
| 32k  |      4.0 |
| 64k  |      4.5 |
| 128k |      4.8 |
| 256k |      5.3 |
| 512k |      5.5 |
| 1M   |      5.6 |
| 2M   |      5.6 |
+------+----------+
"""


def seed_rows() -> list[tuple[str, ...]]:
    """(name, folio, base, patched, change) as the seed's grid prints them."""
    rows: list[tuple[str, ...]] = []
    name = ""
    for line in SEED_GRID.splitlines()[3:]:
        if line.startswith("+"):
            name = ""
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] and name:
            name += " " + cells[0]          # the wrapped second line of a name
            rows[-1] = (name, *rows[-1][1:])
        elif cells[0]:
            name = cells[0]
        rows.append((name, *cells[1:]))
    return rows


def unrounded(base: str, patched: str, change: str) -> tuple[float, float]:
    """Values that print as the seed's figures: its changes come from unrounded times,
    so, e.g., 20.25 -> 19.55 is -3.4% (not the -3.5% the rounded figures give)."""
    steps = [i / 1000 for i in range(-5, 6)]
    for db, dp in itertools.product(steps, steps):
        b, p = float(base) + db, float(patched) + dp
        if (f"{b:.2f}", f"{p:.2f}", table.format_change((p - b) / b * 100)) == (
                base, patched, change):
            return b, p
    raise AssertionError(f"no values print as {base} {patched} {change}")


def seed_comparison(make_run: RunFactory, samples: int = 1, unit: str = "") -> Comparison:
    """The seed's figures as runs with ``samples`` (odd) samples a side around them
    (unit "": the seed's headers name none)."""
    spread = [k * 1e-5 for k in range(-(samples // 2), samples // 2 + 1)]
    base, patched = [], []
    for name, folio, b, p, change in seed_rows():
        bv, pv = unrounded(b, p, change)
        base.append((name, folio, [bv + s for s in spread]))
        patched.append((name, folio, [pv + s for s in spread]))
    return compare_runs(make_run(base, unit=unit), make_run(patched, unit=unit))


def grid_rows(text: str) -> list[list[str]]:
    """A grid's data lines as stripped cells (the rules and headers left out)."""
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in text.splitlines()[3:] if line.startswith("|")]


def test_seed_rows_parsed_completely() -> None:
    rows = seed_rows()
    assert len(rows) == 24
    assert {r[0] for r in rows} >= {"Erase, blocks hold data (mtd_speedtest)",
                                   "Erase, already erased (MEMERASE ioctl)"}


def test_grid_is_the_seed_table_with_one_sample(make_run: RunFactory) -> None:
    assert table.grid(seed_comparison(make_run, 1)) == SEED_GRID


def test_grid_is_the_seed_table_when_every_change_is_significant(make_run: RunFactory) -> None:
    comparison = seed_comparison(make_run, 5)
    assert all(r.test.p_value == pytest.approx(2 / 252) for r in comparison.rows)
    assert table.grid(table.of(comparison, figures=("median",))) == SEED_GRID


def test_every_header_names_the_unit_every_row_shares(make_run: RunFactory) -> None:
    text = table.grid(seed_comparison(make_run, 1, unit="ms"))
    assert text.splitlines()[1] == (
        "| Test                         | Folio | Base (ms) | Patched (ms) |  Change |")
    assert grid_rows(text) == grid_rows(SEED_GRID)        # the seed's cells, unchanged
    assert len({len(line) for line in text.splitlines()}) == 1


def test_cells_show_median_and_iqr_aligned_by_default(make_run: RunFactory) -> None:
    base = make_run([("Write", "4K", [10.0, 11.0, 12.0, 13.0, 14.0]),
                     ("Write", "16K", [100.0, 110.0, 120.0, 130.0, 140.0])])
    patched = make_run([("Write", "4K", [5.0, 5.5, 6.0, 6.5, 7.0]),
                        ("Write", "16K", [50.0])])
    lines = table.grid(compare_runs(base, patched)).splitlines()
    assert lines[1] == ("| Test                        | Folio |     Base (ms) |"
                        " Patched (ms) |  Change |")
    assert lines[3] == ("| Write                       |   4K  |  12.00  ±2.00 |"
                        "   6.00 ±1.00 |  -50.0% |")
    assert lines[4] == ("|                             |  16K  | 120.00 ±20.00 |"
                        "  50.00       |  -58.3% |")
    assert max(map(len, lines)) == 80           # the Test column gave a column back
    assert lines[-1] == "cells: median ±IQR of the samples; change of the median"


def test_columns_choose_min_median_and_mad(make_run: RunFactory) -> None:
    comparison = compare_runs(make_run([("W", "4K", [1.0, 2.0, 3.0, 4.0, 10.0])]),
                              make_run([("W", "4K", [1.0, 1.0, 2.0, 2.0, 2.0])]))
    t = table.of(comparison, figures=("min", "median", "mad", "n"))
    assert table.grid(t).splitlines()[3] == (
        "| W            |   4K  | 1.00/3.00 ±1.00 n=5 | 1.00/2.00 ±0.00 n=5 | -33.3% ns |")
    assert "cells: min/median ±MAD n of the samples" in table.grid(t)


def test_not_significant_change_is_marked_and_explained(make_run: RunFactory) -> None:
    base = make_run([("Page read (512 B)", "4K", [75.0, 76.0, 77.0, 78.0, 79.0]),
                     ("Page read (512 B)", "16K", [75.0, 75.1, 75.2, 75.3, 75.4])])
    patched = make_run([("Page read (512 B)", "4K", [74.0, 76.5, 77.5, 78.5, 74.5]),
                        ("Page read (512 B)", "16K", [50.0, 50.1, 50.2, 50.3, 50.4])])
    lines = table.grid(table.of(compare_runs(base, patched), ("median",))).splitlines()
    assert lines[3] == ("| Page read (512 B)            |   4K  |     77.00 |        76.50 |"
                        "  -0.6% ns |")
    assert lines[4] == ("|                              |  16K  |     75.20 |        50.20 |"
                        " -33.2%    |")
    assert lines[-2:] == ["ns: not significant (two-sided Mann-Whitney U, p >= 0.05)",
                          "cells: median of the samples; change of the median"]
    assert len({len(line) for line in lines[:-2]}) == 1      # every grid line equally wide


def test_long_names_and_wide_numbers_widen_columns(make_run: RunFactory) -> None:
    base = make_run([("Averyveryverylongsingleworditemname_that_cannot_wrap", "2M", [12345.6])])
    patched = make_run([("Averyveryverylongsingleworditemname_that_cannot_wrap", "2M", [1.0])])
    lines = table.grid(compare_runs(base, patched)).splitlines()
    assert len({len(line) for line in lines}) == 1
    assert "|  12345.60 |" in lines[3] and "-100.0% |" in lines[3]


def test_missing_side_and_mixed_units(make_run: RunFactory) -> None:
    base = make_run([("Write", "4K", [2.0])])
    patched = make_run([("Write", "4K", [1.0]), ("Write", "16K", [1.0])])
    patched.records += make_run([("Bandwidth", "4K", [3.0])], unit="GB/s").records
    text = table.grid(compare_runs(base, patched))
    assert text.splitlines()[1] == (
        "| Test                         | Folio |   Base | Patched |  Change |")
    assert "| Write [ms]                   |   4K  |   2.00 |    1.00 |  -50.0% |" in text
    assert "|                              |  16K  |      - |    1.00 |       - |" in text
    assert "| Bandwidth [GB/s]             |   4K  |      - |    3.00 |       - |" in text


def test_select_rows_orders_and_renames(make_run: RunFactory) -> None:
    comparison = seed_comparison(make_run, 1)
    chosen = select_rows(comparison, ["Page write (512 B)", "Page read (512 B)=Reads"])
    assert [g.name for g in chosen.groups] == ["Page write (512 B)", "Reads"]
    with pytest.raises(ValueError, match="no item named 'Nope'"):
        select_rows(comparison, ["Nope"])


def test_markdown_csv_json_carry_the_same_rows(make_run: RunFactory) -> None:
    comparison = seed_comparison(make_run, 1, unit="ms")
    md = table.markdown(comparison).splitlines()
    assert md[0] == "| Test | Folio | Base (ms) | Patched (ms) | Change |"
    assert md[2] == "| Eraseblock read (128 KiB) | 4K | 20.25 | 19.55 | -3.4% |"
    assert md[3] == "|  | 16K | 20.19 | 14.55 | -27.9% |"
    rows = list(csv.DictReader(io.StringIO(table.csv_text(comparison))))
    assert len(rows) == 48 and rows[0]["params"] == "folio=4K" and rows[0]["size"] == "4096"
    assert [r["column"] for r in rows[:2]] == ["Base", "Patched"]
    assert rows[0]["change_pct"] == "" and rows[0]["unit"] == "ms"
    assert float(rows[1]["change_pct"]) == pytest.approx(-3.4, abs=0.05)
    assert rows[1]["significant"] == ""                       # one sample: untested
    data = json.loads(table.json_text(comparison))
    assert (data["format"], data["version"]) == ("pytest-folio-table", 1)
    assert data["method"] == "two-sided Mann-Whitney U"
    assert [r["test"] for r in data["rows"]][-1] == "Erase, already erased (MEMERASE ioctl)"
    with pytest.raises(ValueError, match="unknown format"):
        table.render(comparison, "html")


def test_csv_and_json_have_one_schema_whatever_the_number_of_columns(
        make_run: RunFactory) -> None:
    runs = [make_run([("W", "4K", [float(k), k + 1.0, k + 2.0])]) for k in range(1, 5)]
    tables = [table.of(compare_runs(runs[0], runs[0])),
              *(table.from_comparisons([table.Heading(f"r{i}") for i in range(n)],
                                       [compare_runs(runs[0], r) for r in runs[1:n]])
                for n in (3, 4))]
    for t in tables:
        rows = list(csv.DictReader(io.StringIO(table.csv_text(t))))
        assert tuple(rows[0]) == table.FIELDS
        assert len(rows) == len(t.headings)                   # a record per column
        data = json.loads(table.json_text(t))
        assert set(data) == {"format", "version", "statistic", "method", "alpha",
                             "columns", "rows"}
        assert all(set(r) == {*table.FIELDS, "samples"} for r in data["rows"])
    last = json.loads(table.json_text(tables[-1]))["rows"][-1]
    assert (last["column"], last["column_index"], last["median"], last["iqr"]) == (
        "r3", 3, 5.0, 1.0)
    assert last["change_pct"] == pytest.approx(150.0) and last["samples"] == [4.0, 5.0, 6.0]


def test_block_size_rows_head_the_size_column_bs_in_every_format() -> None:
    from pytest_folio.timing.storage import Record

    run = TimingRun(records=[Record(suite="ramfs", name="dd", unit="GB/s", samples=[1.0],
                                    params={"bs": bs}) for bs in ("16K", "4K")])
    t = table.of(compare_runs(run, run))
    assert table.grid(t).splitlines()[1].startswith("| Test                        | bs    |")
    assert "| dd                          |   4K  |" in table.grid(t)
    assert table.markdown(t).splitlines()[0].startswith("| Test | bs | Base (GB/s) |")
    mixed = TimingRun(records=[*run.records, Record(suite="s", name="x", unit="GB/s",
                                                    samples=[1.0], params={"folio": "4K"})])
    grid = table.grid(compare_runs(mixed, mixed))
    assert "| Params    |" in grid and "|    bs=4K  |" in grid and "| folio=4K  |" in grid


def test_bandwidth_table_is_the_ramfs_seed() -> None:
    values = [1.7, 2.4, 3.2, 4.0, 4.5, 4.8, 5.3, 5.5, 5.6, 5.6]
    rows = [(4096 << i, v) for i, v in enumerate(values)]
    assert table.bandwidth_table(rows) == SEED_RAMFS


def test_a_wrapped_name_longer_than_its_rows_gets_blank_cells(make_run: RunFactory) -> None:
    name = "Erase, already erased (MEMERASE ioctl)"
    text = table.grid(compare_runs(make_run([(name, "64K", [26.5])], unit=""),
                                   make_run([(name, "64K", [14.4])], unit="")))
    assert text.splitlines()[3:6] == [
        "| Erase, already erased        |  64K  |  26.50 |   14.40 |  -45.7% |",
        "| (MEMERASE ioctl)             |       |        |         |         |",
        "+------------------------------+-------+--------+---------+---------+",
    ]


@given(rows=st.lists(st.tuples(
    st.text(st.characters(codec="ascii", categories=["L", "N", "P", "Zs"]), max_size=60),
    st.sampled_from(["4K", "16K", "2M", "512B", "bs=4K"]),
    st.lists(st.floats(0.001, 1e6), min_size=1, max_size=6),
    st.lists(st.floats(0.001, 1e6), min_size=1, max_size=6)), min_size=1, max_size=6))
@settings(max_examples=60, deadline=None)
def test_grid_lines_are_always_equally_wide(
        rows: list[tuple[str, str, list[float], list[float]]]) -> None:
    from pytest_folio.timing.storage import Record

    def run(side: int) -> TimingRun:
        return TimingRun(records=[
            Record(suite="s", name=name, unit="ms", samples=(base, patched)[side],
                   params={"bs": folio[3:]} if "=" in folio else {"folio": folio})
            for name, folio, base, patched in rows])

    text = table.grid(compare_runs(run(0), run(1)))
    lines = text.splitlines()
    grid_lines = [line for line in lines if line[:1] in "+|"]
    assert len({len(line) for line in grid_lines}) == 1
    assert all(line == grid_lines[0] for line in grid_lines if line.startswith("+"))


def test_rows_sort_by_folio_size_then_other_parameters() -> None:
    from pytest_folio.timing.storage import Record

    run = TimingRun(records=[
        Record(suite="s", name="n", unit="ms", samples=[1.0], params=params)
        for params in ({"folio": "64K", "i": 0}, {"folio": "4K", "i": 1},
                       {"folio": "4K", "i": 0}, {"folio": "16K", "i": 0})])
    labels = [r.label for r in compare_runs(run, run).rows]
    assert labels == ["4K,i=0", "4K,i=1", "16K,i=0", "64K,i=0"]
