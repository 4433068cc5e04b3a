"""Results people see and share: the end-of-run table, show, N-way compare and merging,
run metadata and the warnings it gives, numbered autosaved runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_folio.cli import main
from pytest_folio.timing.storage import Record, TimingRun, load_run, save_run

pytest_plugins = ["pytester"]

TESTS = """
import pytest

@pytest.mark.parametrize("i", range(2))
def test_timer(folio_timer, folio_order, i):
    folio_timer.record("fixed", [10.0 + k / 10 for k in range(5)])
"""


def cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([*map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


# -- the end-of-run table -----------------------------------------------------------------

@pytest.mark.parametrize("dist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_every_run_with_measurements_ends_with_its_table(pytester: pytest.Pytester,
                                                         dist: list[str]) -> None:
    pytester.makepyfile(TESTS)
    result = pytester.runpytest("--folio-orders=0,2", *dist)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([
        "*- folio timings -*",
        "+------------------------------+-------+---------------+",
        "| Test                         | Folio | this run (ms) |",
        "+------------------------------+-------+---------------+",
        "| fixed                        |   4K  |   10.20 ±0.20 |",
        "|                              |  16K  |   10.20 ±0.20 |",
        "+------------------------------+-------+---------------+",
        "cells: median ±IQR of the samples",
        "*4 passed*"])


def test_minus_q_drops_the_title_and_minus_qq_leaves_one_line(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TESTS)
    quiet = pytester.runpytest("--folio-orders=0", "-q").stdout.str()
    assert "| fixed                        |   4K  |   10.20 ±0.20 |" in quiet
    assert "folio timings" not in quiet
    very = pytester.runpytest("--folio-orders=0", "-qq").stdout.str()
    assert "|" not in very
    assert "folio: 2 measurements of 1 items" in very


def test_folio_columns_option_and_ini_key_choose_the_figures(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TESTS)
    result = pytester.runpytest("--folio-orders=0", "--folio-columns=min,median,mad,n")
    result.stdout.fnmatch_lines([
        "| Test                         | Folio |          this run (ms) |",
        "*",
        "| fixed                        |   4K  | 10.00/10.20 ±0.10 n=10 |",
        "*",
        "cells: min/median ±MAD n of the samples"])
    pytester.makeini("[pytest]\nfolio_columns = max\n")
    result = pytester.runpytest("--folio-orders=0")
    result.stdout.fnmatch_lines(["| fixed                        |   4K  |         10.40 |",
                                 "*", "cells: max of the samples"])
    bad = pytester.runpytest("--folio-orders=0", "--folio-columns=median,p99")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert bad.stderr.lines == [
        "ERROR: --folio-columns: 'median,p99': choose from min, median, mean, max, iqr, mad, "
        "stdev, n (comma-separated, e.g. min,median,iqr)", ""]


def test_a_run_without_measurements_prints_no_table(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    pass\n")
    assert "folio timings" not in pytester.runpytest().stdout.str()


def test_one_column_per_target_when_items_share_them(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        from pytest_folio.measurement import Measurement

        def test_two_targets(request):
            for target, value in (("page", 20.0), ("folio", 10.0)):
                m = Measurement(suite="s", name="erase", unit="ms", samples=[value],
                                params={"folio": "4K"}, target=target)
                request.config.hook.pytest_folio_measurement(item=request.node,
                                                             measurement=m)
    """)
    result = pytester.runpytest()
    result.stdout.fnmatch_lines([
        "| Test                         | Folio | page (ms) | folio (ms) |  Change |",
        "*",
        "| erase                        |   4K  |     20.00 |      10.00 |  -50.0% |",
        "*"])


def test_the_speed_suite_prints_nothing_around_the_progress_line(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)  # in CI, progress is one line per step by design
    result = pytester.runpytest("-p", "pytest_folio", "--pyargs",
                                "pytest_folio.suites.test_mtd_speed", "--folio-orders=0",
                                "--folio-mtd-size=1M", "--folio-erasesize=64K")
    result.assert_outcomes(passed=1)
    lines = result.stdout.lines
    progress = next(i for i, line in enumerate(lines) if "[100%]" in line)
    assert lines[progress + 1] == "" and "folio timings" in lines[progress + 2]
    assert not any("mtd_speedtest:" in line for line in lines[:progress])
    result.stdout.fnmatch_lines(["| Eraseblock write (64 KiB)    |   4K  | *"])


# -- show, compare with more runs, merging, sorting ---------------------------------------

def _run(rows: list[tuple[str, str, float]], target: str = "t", **settings: object
         ) -> TimingRun:
    return TimingRun(records=[
        Record(suite="s", name=name, unit="ms", samples=[v + k / 100 for k in range(5)],
               params={"bs": size[3:]} if size.startswith("bs=") else {"folio": size},
               target=target) for name, size, v in rows],
        machine={"host": "h", "cpu": "c", "memcpy_gbps": 10.0}, settings=dict(settings),
        meta={"version": "0.1.0", "git": {"commit": "a" * 40, "dirty": True}})


def test_show_prints_when_where_and_the_table(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    save_run(_run([("Erase", "16K", 5.0), ("Erase", "4K", 9.0)], "reference:api=page"),
             tmp_path / "base.json")
    code, out, err = cli(capsys, "show", tmp_path / "base.json")
    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == [
        "base: " + load_run(tmp_path / "base.json").created + "; host h; target "
        "reference:api=page; kernel",
        "    unknown; git aaaaaaaaaaaa+dirty; pytest-folio 0.1.0"]
    assert out.splitlines()[2:9] == [
        "+------------------------------+-------+-------------------------+",
        "| Test                         | Folio | reference:api=page (ms) |",
        "+------------------------------+-------+-------------------------+",
        "| Erase                        |   4K  |              9.02 ±0.02 |",
        "|                              |  16K  |              5.02 ±0.02 |",
        "+------------------------------+-------+-------------------------+",
        "cells: median ±IQR of the samples"]


def test_block_sizes_sort_by_size_not_text(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    save_run(_run([("write", f"bs={s}", 1.0) for s in ("128K", "16K", "2M", "4K")]),
             tmp_path / "r.json")
    _, out, _ = cli(capsys, "show", tmp_path / "r.json", "--format", "csv")
    assert [line.split(",")[2:4] for line in out.splitlines()[1:]] == [
        ["bs=4K", "4096"], ["bs=16K", "16384"], ["bs=128K", "131072"], ["bs=2M", "2097152"]]
    _, out, _ = cli(capsys, "show", tmp_path / "r.json", "--columns", "median")
    table = out[out.index("\n+") + 1:].splitlines()
    assert [line[32:39] for line in table[1:7]] == [
        " bs    ", "-------", "   4K  ", "  16K  ", " 128K  ", "   2M  "]


def test_plot_draws_block_size_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    pytest.importorskip("matplotlib")
    for name, v in (("a", 1.0), ("b", 2.0)):
        save_run(_run([("write", f"bs={s}", v) for s in ("128K", "16K")]),
                 tmp_path / f"{name}.json")
    code, _, err = cli(capsys, "compare", tmp_path / "a.json", tmp_path / "b.json",
                       "--plot", tmp_path / "p.png")
    assert (code, err) == (0, "")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_three_runs_gives_a_column_each_with_change_against_the_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, v in (("base", 10.0), ("p1", 5.0), ("p2", 20.0)):
        save_run(_run([("Erase", "4K", v)]), tmp_path / f"{name}.json")
    code, out, _ = cli(capsys, "compare", *(tmp_path / f"{n}.json" for n in
                                            ("base", "p1", "p2")))
    assert code == 0
    assert out.splitlines() == [     # 80 columns: the Test column gave way
        "+---------+-------+-------------+------------+---------+-------------+---------+",
        "| Test    | Folio |   base (ms) |    p1 (ms) |  Change |     p2 (ms) |  Change |",
        "+---------+-------+-------------+------------+---------+-------------+---------+",
        "| Erase   |   4K  | 10.02 ±0.02 | 5.02 ±0.02 |  -49.9% | 20.02 ±0.02 |  +99.8% |",
        "+---------+-------+-------------+------------+---------+-------------+---------+",
        "cells: median ±IQR of the samples; change of the median, against base"]


def test_runs_of_one_folio_size_each_merge_into_the_seed_grid(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One base and one patched run per folio size (one kernel boot each): six files,
    one compare, the seeds' grid."""
    files = []
    for side, target, v in (("base", "/dev/mtd0", 20.0), ("patched", "/dev/mtd0", 14.0)):
        for size in ("64K", "4K", "16K"):
            files.append(tmp_path / f"{side}-{size}.json")
            save_run(_run([("Eraseblock read (128 KiB)", size, v)], target), files[-1])
    code, out, _ = cli(capsys, "compare", *files, "--columns", "median")
    assert code == 0
    assert out.splitlines() == [
        "+------------------------------+-------+-----------+--------------+---------+",
        "| Test                         | Folio | Base (ms) | Patched (ms) |  Change |",
        "+------------------------------+-------+-----------+--------------+---------+",
        "| Eraseblock read (128 KiB)    |   4K  |     20.02 |        14.02 |  -30.0% |",
        "|                              |  16K  |     20.02 |        14.02 |  -30.0% |",
        "|                              |  64K  |     20.02 |        14.02 |  -30.0% |",
        "+------------------------------+-------+-----------+--------------+---------+"]


# -- metadata and doubtful comparisons ----------------------------------------------------

def test_a_saved_run_records_version_commit_dirty_flag_seed_and_options(
        pytester: pytest.Pytester) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    source = pytester.makepyfile(TESTS)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=pytester.path, check=True, env=env)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=pytester.path, check=True,
                          capture_output=True, text=True).stdout.strip()
    pytester.runpytest("--folio-orders=0", "--folio-seed=5", "--folio-mtd-size=8M",
                       "--folio-save=clean.json").assert_outcomes(passed=2)
    clean = load_run(pytester.path / "clean.json")
    assert clean.meta["git"] == {"commit": head, "dirty": False}
    assert clean.meta["seed"] == 5 and clean.meta["version"]
    assert clean.settings["mtd_size"] == 8 << 20 and clean.settings["mtd"] == "reference"
    source.write_text(TESTS + "\n")                        # a tracked file changed: dirty
    pytester.runpytest("--folio-orders=0", "--folio-save=dirty.json")
    assert load_run(pytester.path / "dirty.json").meta["git"]["dirty"] is True


def test_no_git_is_no_commit_and_no_failure(pytester: pytest.Pytester,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(TESTS)
    monkeypatch.setenv("PATH", str(pytester.path))       # no git on the PATH
    pytester.runpytest("--folio-orders=0", "--folio-save=r.json").assert_outcomes(passed=2)
    run = load_run(pytester.path / "r.json")
    assert "git" not in run.meta and run.meta["version"]


def test_compare_warns_once_per_doubtful_difference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _run([("Erase", "4K", 10.0)], mtd_size=256 << 20, erasesize=128 << 10)
    other = _run([("Erase", "4K", 10.0)], mtd_size=16 << 20, erasesize=128 << 10)
    other.machine = {"host": "h2", "cpu": "c", "memcpy_gbps": 13.0}
    other.meta = {"version": "0.2.0"}
    same = _run([("Erase", "4K", 10.0)], mtd_size=256 << 20, erasesize=128 << 10)
    same.machine["memcpy_gbps"] = 11.9                   # within 20%
    for name, run in (("base", base), ("other", other), ("same", same)):
        save_run(run, tmp_path / f"{name}.json")
    _, _, err = cli(capsys, "compare", tmp_path / "base.json", tmp_path / "other.json")
    assert err.splitlines() == [
        "warning: base and other ran with different device sizes: 256M and 16M",
        "warning: base and other ran on different hosts: h and h2",
        "warning: base and other: memcpy bandwidth 10.0 and 13.0 GB/s are more than 20% "
        "apart (compare --normalise scales by it)",
        "warning: base and other were measured by different pytest-folio versions: 0.1.0 "
        "and 0.2.0"]
    _, _, err = cli(capsys, "compare", tmp_path / "base.json", tmp_path / "same.json")
    assert err == ""


def test_a_version_1_file_without_metadata_still_reads(tmp_path: Path) -> None:
    old = {"format": "pytest-folio-timing", "version": 1, "measurements": [
        {"suite": "s", "name": "n", "unit": "ms", "samples": [1.0]}]}
    (tmp_path / "old.json").write_text(json.dumps(old))
    run = load_run(tmp_path / "old.json")
    assert run.meta == {} and run.complete and run.records[0].name == "n"


def test_version_option_prints_the_package_version(capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    from importlib import metadata
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"pytest-folio {metadata.version('pytest-folio')}\n"


# -- numbered runs under .folio/ ----------------------------------------------------------

def test_autosave_numbers_runs_and_compare_takes_numbers_and_names(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(TESTS)
    pytester.runpytest("--folio-orders=0", "--folio-autosave").assert_outcomes(passed=2)
    second = pytester.runpytest("--folio-orders=0", "--folio-autosave",
                                "--folio-compare=1")
    second.stdout.fnmatch_lines(["folio timing: comparing against *0001_*.json",
                                 "*Base (ms) | Patched (ms)*",
                                 "folio: saved 2 measurements to *.folio/0002_*.json"])
    saved = sorted(p.name for p in (pytester.path / ".folio").iterdir())
    assert [name[:5] for name in saved] == ["0001_", "0002_"]
    monkeypatch.chdir(pytester.path)
    code, out, _ = cli(capsys, "compare", "1", saved[1][5:-5] if saved[0][5:] != saved[1][5:]
                       else "2")
    assert code == 0 and "| fixed " in out
    code, _, err = cli(capsys, "show", "7")
    assert code == 2
    assert err.strip().endswith("7: no such timing file or saved run in .folio (runs 1..2; "
                                f"the latest is {saved[1]})")
