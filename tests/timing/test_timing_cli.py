"""python -m pytest_folio compare / bandwidth: formats, row selection, counters, bad input."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_folio.cli import COMMANDS, build_parser, main
from pytest_folio.timing.storage import Record, TimingRun, save_run
from tests.helpers.timing import RunFactory


@pytest.fixture
def runs(tmp_path: Path, make_run: RunFactory) -> tuple[Path, Path]:
    base = make_run([("Eraseblock write (128 KiB)", f, [26.0 + k for k in range(5)])
                     for f in ("16K", "4K")] +
                    [("Page read (512 B)", "4K", [75.0, 75.5, 76.0, 76.5, 77.0])])
    patched = make_run([("Eraseblock write (128 KiB)", f, [17.0 + k / 10 for k in range(5)])
                        for f in ("16K", "4K")] +
                       [("Page read (512 B)", "4K", [74.9, 75.6, 76.1, 76.4, 77.1])])
    for run, per_pass in ((base, 4), (patched, 0)):
        for r in run.records:
            r.counters = {"compound_head": per_pass * 32 * len(r.samples)}
    save_run(base, tmp_path / "base.json")
    save_run(patched, tmp_path / "patched.json")
    return tmp_path / "base.json", tmp_path / "patched.json"


def compare(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_grid_orders_folios_and_marks_noise(runs: tuple[Path, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = compare(capsys, *runs)
    assert (code, err) == (0, "")
    assert out.splitlines()[1:8] == [
        "| Test                        | Folio |   Base (ms) | Patched (ms) |    Change |",
        "+-----------------------------+-------+-------------+--------------+-----------+",
        "| Eraseblock write (128 KiB)  |   4K  | 28.00 ±2.00 |  17.20 ±0.20 | -38.6%    |",
        "|                             |  16K  | 28.00 ±2.00 |  17.20 ±0.20 | -38.6%    |",
        "+-----------------------------+-------+-------------+--------------+-----------+",
        "| Page read (512 B)           |   4K  | 76.00 ±1.00 |  76.10 ±0.80 |  +0.1% ns |",
        "+-----------------------------+-------+-------------+--------------+-----------+",
    ]
    assert out.splitlines()[-2:] == [
        "ns: not significant (two-sided Mann-Whitney U, p >= 0.05)",
        "cells: median ±IQR of the samples; change of the median"]
    assert max(map(len, out.splitlines())) == 80


def test_columns_option_chooses_the_figures(runs: tuple[Path, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = compare(capsys, *runs, "--columns", "min,median,mad")
    assert code == 0
    assert out.splitlines()[3:9] == [   # 80 columns: names wrap, "(512 B)" stays whole
        "| Eraseblock write |   4K  | 26.00/28.00 ±1.00 | 17.00/17.20 ±0.10 | -38.6%    |",
        "| (128 KiB)        |  16K  | 26.00/28.00 ±1.00 | 17.00/17.20 ±0.10 | -38.6%    |",
        "+------------------+-------+-------------------+-------------------+-----------+",
        "| Page read        |   4K  | 75.00/76.00 ±0.50 | 74.90/76.10 ±0.50 |  +0.1% ns |",
        "| (512 B)          |       |                   |                   |           |",
        "+------------------+-------+-------------------+-------------------+-----------+"]
    code, out, _ = compare(capsys, *runs, "--columns", "median", "--statistic", "min")
    assert out.splitlines()[3] == (
        "| Eraseblock write (128 KiB)   |   4K  |     28.00 |        17.20 | -34.6%    |")
    assert out.splitlines()[-1] == "cells: median of the samples; change of the min"


def test_rows_and_counters(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = compare(capsys, *runs, "--row", "Page read (512 B)=Page read",
                           "--counter", "compound_head")
    assert code == 0
    lines = out.splitlines()
    assert lines[3].startswith("| Page read                    |   4K  | 76.00 ±1.00 |")
    assert "compound_head per pass:" in lines
    start = lines.index("compound_head per pass:")
    assert lines[start + 2] == (
        "| Test                | Folio | Base (per pass) | Patched (per pass) |  Change |")
    assert lines[start + 4] == (
        "| Page read           |   4K  |             128 |                  0 | -100.0% |")


@pytest.mark.parametrize("fmt", ["markdown", "csv", "json"])
def test_other_formats(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
                       fmt: str) -> None:
    code, out, _ = compare(capsys, *runs, "--format", fmt)
    assert code == 0
    if fmt == "json":
        rows = json.loads(out)["rows"]
        assert [(r["test"], r["params"], r["column"], r["significant"]) for r in rows] == [
            ("Eraseblock write (128 KiB)", "folio=4K", "Base", None),
            ("Eraseblock write (128 KiB)", "folio=4K", "Patched", True),
            ("Eraseblock write (128 KiB)", "folio=16K", "Base", None),
            ("Eraseblock write (128 KiB)", "folio=16K", "Patched", True),
            ("Page read (512 B)", "folio=4K", "Base", None),
            ("Page read (512 B)", "folio=4K", "Patched", False)]
    elif fmt == "csv":
        assert out.splitlines()[1].startswith(
            "mtd_speedtest,Eraseblock write (128 KiB),folio=4K,4096,ms,Base,0,")
    else:
        assert "| Page read (512 B) | 4K | 76.00 ±1.00 | 76.10 ±0.80 | +0.1% ns |" in out


@pytest.mark.parametrize(("args", "message"), [
    (["compare", "{d}/base.json", "{d}/nope.json"], "{d}/nope.json: no such timing file"),
    (["compare", "{d}/base.json", "{d}/bad.json"], "{d}/bad.json: truncated or corrupt"),
    (["compare", "{d}/base.json"], "1 targets; one run compares when it holds two"),
    (["compare", "{d}/base.json", "{d}/patched.json", "--format", "html"],
     "argument --format: invalid choice: 'html'"),
    (["compare", "{d}/base.json", "{d}/patched.json", "--row", "Nope"],
     "no item named 'Nope'"),
    (["compare", "{d}/base.json", "{d}/patched.json", "--counter", "nope"],
     "no counter 'nope' in either file"),
    (["compare", "{d}/base.json", "{d}/patched.json", "--counter", "compound_head",
      "--format", "csv"], "--counter prints extra tables: use --format grid or markdown"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["compare", "{d}/base.json", "{d}/patched.json", "--columns", "median,p99"],
     "argument --columns: 'median,p99': choose from min, median, mean, max, iqr, mad"),
    (["bandwidth", "{d}/base.json"], "no item with a block size and a bandwidth"),
])
def test_bad_input_is_one_line_and_exit_2(runs: tuple[Path, Path], args: list[str],
                                          message: str) -> None:
    d = runs[0].parent
    (d / "bad.json").write_text('{"format": "pytest-folio-timing", "version": 1, "meas')
    proc = subprocess.run([sys.executable, "-m", "pytest_folio",
                           *(a.format(d=d) for a in args)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1
    assert message.format(d=d) in proc.stderr


def test_plot_writes_a_png(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
                           tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    code, out, _ = compare(capsys, *runs, "--plot", tmp_path / "t.png")
    assert code == 0 and out.startswith("+---")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_replaces_a_planted_symlink_instead_of_writing_through_it(
        runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "link.png").symlink_to(victim)
    code, _, _ = compare(capsys, *runs, "--plot", tmp_path / "link.png")
    assert code == 0 and victim.read_text() == "keep"
    assert not (tmp_path / "link.png").is_symlink()
    assert (tmp_path / "link.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("name", "says"), [
    ("d", "--plot {p}: a directory; name the image file, e.g. {p}/compare.png"),
    ("t", "--plot {p}: no suffix to say the image format (.png, .svg, .pdf, ...)"),
])
def test_plot_to_a_directory_or_without_a_format_is_one_line(
        runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path,
        name: str, says: str) -> None:
    (tmp_path / "d").mkdir()
    before = sorted(tmp_path.iterdir())
    code, out, err = compare(capsys, *runs, "--plot", tmp_path / name)
    assert (code, out) == (2, "")
    assert err == ("python -m pytest_folio compare: error: "
                   + says.format(p=tmp_path / name) + "\n")
    assert sorted(tmp_path.iterdir()) == before          # no d.png, no t.png


def test_plot_without_matplotlib_says_how_to_get_it(
        runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, out, err = compare(capsys, *runs, "--plot", tmp_path / "t.png")
    assert (code, out) == (2, "")
    assert err == ("python -m pytest_folio compare: error: plotting needs matplotlib: "
                   "pip install 'pytest-folio[plot]'\n")
    assert not (tmp_path / "t.png").exists()


def test_bandwidth_table_from_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # ms per 1 GB written at each block size -> GB/s; a GB/s item would be taken as is
    run = TimingRun(records=[
        Record(suite="ramfs", name="dd write", unit="ms", samples=[ms, ms, ms],
               params={"bs": bs}, extra={"bytes": 10 ** 9})
        for bs, ms in (("2M", 200.0), ("4K", 1000.0), ("64K", 400.0))])
    save_run(run, tmp_path / "run.json")
    assert main(["bandwidth", str(tmp_path / "run.json")]) == 0
    assert capsys.readouterr().out.splitlines()[3:6] == [
        "| 4k   |      1.0 |", "| 64k  |      2.5 |", "| 2M   |      5.0 |"]


def test_a_subcommand_is_one_registration_line(monkeypatch: pytest.MonkeyPatch) -> None:
    module = type(sys)("folio_extra_command")

    def register(subparsers: object) -> None:
        p = subparsers.add_parser("hello", help="greets")  # type: ignore[attr-defined]
        p.set_defaults(run=lambda args: 7)

    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "folio_extra_command", module)
    monkeypatch.setattr("pytest_folio.cli.COMMANDS", [*COMMANDS, "folio_extra_command:register"])
    assert "hello" in build_parser().format_help()
    assert main(["hello"]) == 7


def test_normalise_scales_patched_to_the_base_machine(
        tmp_path: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_run([("Write", "4K", [10.0, 10.0, 10.0, 10.0])])
    patched = make_run([("Write", "4K", [5.0, 5.0, 5.0, 5.0])])
    base.machine, patched.machine = {"memcpy_gbps": 10.0}, {"memcpy_gbps": 20.0}
    save_run(base, tmp_path / "b.json")
    save_run(patched, tmp_path / "p.json")
    # twice the memcpy bandwidth: half the time is what the base machine would take too
    code, out, _ = compare(capsys, tmp_path / "b.json", tmp_path / "p.json", "--normalise")
    assert code == 0
    assert "| Write                        |   4K  | 10.00 ±0.00 |  10.00 ±0.00 | +0.0% ns |" in out
    patched.machine = {}
    save_run(patched, tmp_path / "p.json")
    code, out, err = compare(capsys, tmp_path / "b.json", tmp_path / "p.json", "--normalise")
    assert code == 2 and "need the machine's memcpy_gbps" in err


def test_one_run_of_two_targets_compares_them_as_base_and_patched(
        runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vm --interleave saves base and patched in one run, as two targets."""
    from pytest_folio.timing.storage import load_run
    both = TimingRun(records=[])
    for path, target in zip(runs, ("kernel:mtd_speedtest, stock block2mtd",
                                   "kernel:mtd_speedtest, block2mtd built with x.patch"),
                            strict=True):
        for record in load_run(path).records:
            record.target = target
            both.records.append(record)
    save_run(both, tmp_path / "interleaved.json")
    code, one, err = compare(capsys, tmp_path / "interleaved.json")
    assert (code, err) == (0, "")
    _, two, _ = compare(capsys, *runs)
    assert one == two       # the same grid as the two runs saved apart


def test_one_run_of_one_target_is_refused_in_one_line(
        runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = compare(capsys, runs[0])
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert "1 targets; one run compares when it holds two" in err


def test_list_tells_runs_apart_by_target_kernel_and_git(
        tmp_path: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_folio.timing.autosave import autosave

    monkeypatch.chdir(tmp_path)
    assert main(["list"]) == 0
    assert capsys.readouterr().out == "no saved runs in .folio (save one with --folio-autosave)\n"
    storage = tmp_path / ".folio"
    saved = []
    for kernel in ("6.8.0-45-generic", "6.9.0-folio+"):    # base and patched kernels
        run = make_run([("Write", "4K", [1.0, 2.0]), ("Write", "16K", [1.0]),
                        ("Read", "4K", [1.0])])
        run.created = "2026-11-29T21:30:25+00:00"
        run.meta = {"git": {"commit": "1a2b3c4d5e6f", "dirty": True}}
        run.machine = {"kernel": f"Linux {kernel}"}
        for r in run.records:
            r.target = "/dev/mtd0"
        saved.append(autosave(run, storage).name)
    assert saved == ["0001_1a2b3c4d-dirty-dev-mtd0-6.8.0-45-generic.json",
                     "0002_1a2b3c4d-dirty-dev-mtd0-6.9.0-folio+.json"]
    partial = make_run([("Write", "4K", [1.0])])
    partial.complete, partial.created = False, "2026-11-30T08:00:00+00:00"
    save_run(partial, storage / "base.json")
    (storage / "zz.json").write_text("{")
    assert main(["list"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "1  1a2b3c4d-dirty-dev-mtd0-6.8.0-45-generic",
        "   2026-11-29 21:30, 2 items (3 measurements), complete",
        "   target /dev/mtd0; kernel 6.8.0-45-generic; git 1a2b3c4d5e6f+dirty",
        "2  1a2b3c4d-dirty-dev-mtd0-6.9.0-folio+",
        "   2026-11-29 21:30, 2 items (3 measurements), complete",
        "   target /dev/mtd0; kernel 6.9.0-folio+; git 1a2b3c4d5e6f+dirty",
        "-  .folio/base.json",
        "   2026-11-30 08:00, 1 item (1 measurements), partial",
        "   target none; kernel unknown; git none",
        "-  .folio/zz.json",
        "   unreadable: .folio/zz.json: truncated or corrupt timing file (invalid JSON at",
        "     line 1, column 2)"]


def test_runs_outside_git_are_named_by_time_and_target(make_run: RunFactory) -> None:
    from pytest_folio.timing.autosave import run_name

    run = make_run([("Write", "4K", [1.0])])
    run.records[0].target = "reference:api=page"
    run.machine = {"kernel": "Linux 6.8.0"}
    name = run_name(run)
    assert re.fullmatch(r"\d{8}T\d{6}-reference-api-page", name), name   # no kernel: model
    run.records = [dataclasses.replace(run.records[0], target=f"/srv/fs{i}")
                   for i in range(10)]          # ten real directories: names stay short
    many = run_name(run)
    assert len(many) <= 100 and many.split("-")[1:3] == ["srv", "fs0"], many


def test_plot_gives_fourteen_items_fourteen_styles(tmp_path: Path, make_run: RunFactory,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_folio.timing.plot import item_styles

    styles = item_styles(14)
    assert len(set(styles)) == 14
    assert all(a[0] != b[0] and a[1] != b[1] for a, b in itertools.pairwise(styles))
    pytest.importorskip("matplotlib")
    names = [f"item {k}" for k in range(14)]
    for i, name in enumerate(("a", "b", "c")):
        save_run(make_run([(n, f, [1.0 + i + k]) for k, n in enumerate(names)
                           for f in ("4K", "16K")]), tmp_path / f"{name}.json")
    code, _, err = compare(capsys, *(tmp_path / f"{n}.json" for n in "abc"),
                           "--plot", tmp_path / "p.png")
    assert (code, err) == (0, "")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
