"""Saved runs: round trip, atomic replacement, and one-line errors for bad files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_folio.timing.storage import (
    VERSION,
    Record,
    TimingFileError,
    TimingRun,
    load_run,
    save_run,
)


def sample_run(n: int = 3) -> TimingRun:
    return TimingRun(
        records=[Record(suite="s", name=f"item {i}", unit="ms", samples=[1.0 + i, 2.5],
                        params={"folio": "16K"}, target="reference:api=folio",
                        counters={"compound_head": 7 * i}, extra={"bytes": 4096},
                        nodeid=f"t.py::test[{i}]", worker="gw0", host="h")
                 for i in range(n)],
        machine={"cpu": "x", "memcpy_gbps": 9.5}, settings={"orders": [0, 2]})


def test_round_trip_keeps_everything(tmp_path: Path) -> None:
    run = sample_run()
    save_run(run, tmp_path / "run.json")
    back = load_run(tmp_path / "run.json")
    assert back == run
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["format"] == "pytest-folio-timing" and data["version"] == VERSION


def test_failed_save_leaves_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    save_run(sample_run(2), path)
    before = path.read_bytes()
    bad = sample_run(1)
    bad.records[0].samples = [float("nan")]
    with pytest.raises(ValueError):
        save_run(bad, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_crash_while_saving_leaves_old_file_whole(tmp_path: Path) -> None:
    """A process that dies after writing part of the new file never damages the old one."""
    path = tmp_path / "run.json"
    old = sample_run(2)
    save_run(old, path)
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import os
        from pytest_folio.timing import storage
        from tests_crash_run import run
        real_fdopen = os.fdopen
        class Dying:
            def __init__(self, f): self.f = f
            def __enter__(self): return self
            def __exit__(self, *a): return False
            def write(self, text):
                self.f.write(text[: len(text) // 2]); self.f.flush(); os._exit(9)
        os.fdopen = lambda fd, *a, **k: Dying(real_fdopen(fd, *a, **k))
        storage.save_run(run, {str(path)!r})
    """)
    (tmp_path / "tests_crash_run.py").write_text(
        "from pytest_folio.timing.storage import Record, TimingRun\n"
        "run = TimingRun(records=[Record(suite='s', name='new', unit='ms', "
        "samples=[1.0] * 5000)])\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=False)
    assert proc.returncode == 9
    assert path.read_bytes() == before
    assert load_run(path) == old
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".run.json.")]
    assert len(leftovers) == 1 and leftovers[0].stat().st_size > 0   # the half-written one


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such timing file"),
    ("", "empty timing file"),
    ('{"format": "pytest-folio-timing", "version": 1, "measurements": [{"su',
     "truncated or corrupt timing file (invalid JSON at line 1"),
    ('[1, 2]', "not a pytest-folio timing file"),
    ('{"format": "other"}', "not a pytest-folio timing file"),
    ('{"format": "pytest-folio-timing", "version": 99, "measurements": []}',
     "timing format version 99, this pytest-folio reads version 1"),
    ('{"format": "pytest-folio-timing", "version": 1}', "no measurements list"),
    ('{"format": "pytest-folio-timing", "version": 1, "measurements": [{"suite": "s", '
     '"name": "n", "unit": "ms", "samples": []}]}',
     "measurement 0 (n): samples must be a non-empty list of numbers"),
    ('{"format": "pytest-folio-timing", "version": 1, "measurements": [{"suite": "s", '
     '"unit": "ms", "samples": [1]}]}', "measurement 0 has no 'name' string"),
])
def test_bad_files_are_one_line_errors(tmp_path: Path, content: str | None,
                                       message: str) -> None:
    path = tmp_path / "base.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(TimingFileError) as info:
        load_run(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ") and message in text
    assert "\n" not in text


def test_truncated_real_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    save_run(sample_run(), path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(TimingFileError, match="truncated or corrupt"):
        load_run(path)
