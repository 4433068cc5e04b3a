"""The seed reproductions in examples/seeds run end to end (at small sizes, for speed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pytest_folio.timing.storage import load_run

SEEDS = Path(__file__).resolve().parents[2] / "examples" / "seeds"
ROWS = ["Eraseblock read (128 KiB)", "Eraseblock write (128 KiB)", "Page read (512 B)",
        "Page write (512 B)", "2-page read (1 KiB)", "2-page write (1 KiB)",
        "Erase, blocks hold data (mtd_speedtest)", "Erase, already erased (MEMERASE ioctl)"]


def run(*args: str | Path, cwd: Path) -> str:
    """Run a seed script with this interpreter as PYTHON, and a ``python`` and ``python3``
    first on PATH that lack the plugin, as on a machine where the venv is not activated
    (the scripts must use PYTHON, never whatever PATH finds)."""
    bin_dir = cwd / "not-this-python"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python", "python3"):
        (bin_dir / name).write_text("#!/bin/sh\necho not the interpreter in PYTHON >&2\n"
                                    "exit 99\n")
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PYTHON=sys.executable,
               PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    proc = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          check=False, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_block2mtd_seed_table_and_compound_head_counts(tmp_path: Path) -> None:
    text = run("env", f"OUT={tmp_path}", "SIZE=1M", "sh", SEEDS / "block2mtd.sh",
               cwd=tmp_path)
    lines = text.splitlines()
    table = lines[:lines.index("compound_head per pass:")]
    assert lines[0].startswith("+---") and lines[2] == lines[0]
    assert [c.strip() for c in lines[1].split("|")[1:3]] == ["Test", "Folio"]
    assert max(map(len, table)) <= 80            # the Test column narrows to fit
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in table
             if line.startswith("| ") and not line.startswith("| Test")]
    shown = " ".join(c[0] for c in cells if c[0])
    for row in ROWS:                      # every row of the cover letter, wrapped as there
        assert row in shown
    assert ["Erase, blocks hold data", "4K"] in [c[:2] for c in cells]
    assert ["(mtd_speedtest)", "16K"] in [c[:2] for c in cells]
    # 1 MiB = 256 pages; the seed: one compound_head per page less on read, four on
    # write and erase
    counters = text[text.index("compound_head per pass:"):]
    for row, per_page in (("Eraseblock read (128 KiB)", 1), ("Eraseblock write (128 KiB)", 4),
                          ("Erase, blocks hold data", 4)):
        # the name may wrap in the narrower counter table: find it by its first words
        block = counters[counters.index(f"| {row[:12]}"):].splitlines()[:3]
        for line, folio in zip(block, ("4K", "16K", "64K"), strict=True):
            counted = [c.strip() for c in line.strip("|").split("|")]
            assert counted[1:4] == [folio, str(256 * per_page), "0"], line
    base = load_run(tmp_path / "block2mtd-base.json")
    assert {r.target for r in base.records} == {"reference:api=page,retry=on"}
    assert all(len(r.samples) == 5 for r in base.records)


def test_ramfs_seed_bandwidth_table(tmp_path: Path) -> None:
    example = tmp_path / "seeds"
    shutil.copytree(SEEDS, example)
    module = example / "test_ramfs_bw.py"
    module.write_text(module.read_text().replace("TOTAL = 128 << 20", "TOTAL = 4 << 20"))
    text = run("env", f"OUT={tmp_path}", "SIZES=4k,64k,2M", "sh", example / "ramfs.sh",
               cwd=tmp_path)
    lines = text.splitlines()
    assert lines[1:3] == ["|  bs  | BW(GB/s) |", "+------+----------+"]
    assert [line[2:6].strip() for line in lines[3:6]] == ["4k", "64k", "2M"]
    # figures only (no speed assertion in a unit test): the shape is in docs/timing.md
    assert all(float(line.split("|")[2]) >= 0 for line in lines[3:6])
    saved = load_run(next(tmp_path.glob("ramfs-*.json")))
    assert [(r.params, len(r.samples), r.extra) for r in saved.records] == [
        ({"bs": size}, 7, {"bytes": 4 << 20}) for size in ("4K", "64K", "2M")]
