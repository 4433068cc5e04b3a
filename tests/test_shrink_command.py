"""``python -m pytest_folio shrink LOG``: a failing log delta-debugged against a target."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_folio.cli import main
from pytest_folio.fsx.config import FsxOptions
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from pytest_folio.fsx.log import read_fsxops, recorded_by, recorded_note, write_fsxops
from pytest_folio.mtdtests.engine import MTDFsx, MTDFsxFailure
from pytest_folio.mtdtests.log import format_mtdops, parse_mtdops
from pytest_folio.mtdtests.opgen import random_ops
from tests.helpers.fsx_broken import StaleDataAfterTruncateUp
from tests.helpers.mtd_devices import EvictionDropsDirty

BROKEN_FS = "tests.helpers.fsx_broken:StaleDataAfterTruncateUp.factory"
ROOT = Path(__file__).resolve().parent.parent


def _failing_fsxops(path: Path) -> int:
    fs = StaleDataAfterTruncateUp.factory(4096, tempfile.mkdtemp())
    engine = FsxEngine(fs, FsxOptions(numops=3000, seed=4))
    with pytest.raises(FsxFailure):
        engine.run()
    write_fsxops(path, engine.log, note=recorded_note("t.py::test_x[4K]", ""))
    return len(engine.log)


def test_a_failing_fsxops_shrinks_to_a_few_operations_that_still_fail(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "bug.fsxops"
    before = _failing_fsxops(log)
    assert main(["shrink", str(log), f"--folio-fs={BROKEN_FS}", "--seconds=120"]) == 0
    shortest = read_fsxops(tmp_path / "bug.min.fsxops")
    assert capsys.readouterr().out == (f"{log}: {before} operations, {len(shortest)} still "
                                       f"fail: {tmp_path / 'bug.min.fsxops'}\n")
    assert len(shortest) <= 5 < before
    # it replays in the test that recorded the log, as the log did
    assert recorded_by((tmp_path / "bug.min.fsxops").read_text()) == ("t.py::test_x[4K]", "")
    fs = StaleDataAfterTruncateUp.factory(4096, tempfile.mkdtemp())
    with pytest.raises(FsxFailure):
        FsxEngine(fs, FsxOptions()).run(replay=shortest)


def test_a_failing_mtdops_shrinks_and_replays(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    dev = EvictionDropsDirty(size=1 << 20, erasesize=16384, folio_order=2)
    fsx = MTDFsx(dev, folio=16384)
    with pytest.raises(MTDFsxFailure) as info:
        fsx.run(random_ops(fsx.layout, seed=3, count=400, erased=fsx.model.is_erased))
    log = tmp_path / "bug.mtdops"
    log.write_text(format_mtdops(info.value.ops, dev))
    assert main(["shrink", str(log), "--folio-mtd=tests.helpers.mtd_devices:EvictionDropsDirty",
                 "--folio-order=2", "-o", str(tmp_path / "min.mtdops")]) == 0
    shortest = parse_mtdops((tmp_path / "min.mtdops").read_text())
    assert (shortest.size, shortest.erasesize) == (1 << 20, 16384)
    assert len(shortest.ops) < len(info.value.ops)
    assert "still fail" in capsys.readouterr().out


def test_a_log_that_passes_or_cannot_be_read_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "bug.fsxops"
    _failing_fsxops(log)
    assert main(["shrink", str(log)]) == 2       # the reference has no such bug
    assert capsys.readouterr().err == (
        "python -m pytest_folio shrink: error: the log does not fail on "
        "--folio-fs=reference: nothing to shrink\n")
    assert main(["shrink", str(tmp_path)]) == 2
    assert capsys.readouterr().err.endswith(f"{tmp_path}: is a directory, not a log file\n")


# Targets for the shrink command in a child process (it is interrupted by signals and
# timers): an MTD device whose every read answers zeros (so any log with an erase and a
# read after it fails, and ddmin's first candidate, half the log, fails too) that
# misbehaves at one open.
TARGETS = """
import os
import signal
import time

from tests.helpers.fsx_broken import StaleDataAfterTruncateUp
from tests.helpers.mtd_devices import RamMTD

OPENS = []
WHEN = int(os.environ.get("SHRINK_TARGET_AT", "3"))


def _misbehave():
    OPENS.append(1)
    if len(OPENS) == WHEN:
        how = os.environ["SHRINK_TARGET_DOES"]
        if how == "hang":
            time.sleep(3600)
        os.kill(os.getpid(), getattr(signal, how))
        time.sleep(3600)


class ReadsZeros(RamMTD):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        _misbehave()

    def read(self, offset, length):
        return bytes(length)


def fs(blocksize, root=None):
    _misbehave()
    return StaleDataAfterTruncateUp.factory(blocksize, root)
"""
ZEROS_LOG = ("# pytest-folio MTD operation log\n# device: d size=0x100000 erasesize=0x4000\n"
             + "erase 0 0x4000\nread 0 0x10\n" * 32)


def _shrink(tmp_path: Path, log: Path, does: str, *args: str,
            at: int = 3) -> subprocess.CompletedProcess[str]:
    (tmp_path / "shrink_targets.py").write_text(TARGETS)
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "SHRINK_TARGET_DOES": does, "SHRINK_TARGET_AT": str(at),
           "TMPDIR": str(scratch),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "pytest_folio", "shrink", str(log), *args],
                          env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_an_interrupted_shrink_keeps_the_shortest_so_far(tmp_path: Path,
                                                         signame: str) -> None:
    log = tmp_path / "zeros.mtdops"
    log.write_text(ZEROS_LOG)
    done = _shrink(tmp_path, log, signame, "--folio-mtd=shrink_targets:ReadsZeros")
    assert done.returncode == 128 + getattr(signal, signame), done.stderr
    partial = tmp_path / "zeros.partial.mtdops"
    assert done.stderr == (f"{log}: interrupted; 32 of 64 operations still fail: "
                           f"{partial}\n")
    assert len(parse_mtdops(partial.read_text()).ops) == 32
    assert log.read_text() == ZEROS_LOG
    assert not (tmp_path / "zeros.min.mtdops").exists()


def test_an_interrupted_fsxops_shrink_removes_its_temporary_directories(
        tmp_path: Path) -> None:
    log = tmp_path / "bug.fsxops"
    _failing_fsxops(log)
    done = _shrink(tmp_path, log, "SIGTERM", "--folio-fs=shrink_targets:fs", at=2)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert done.stderr == (f"{log}: interrupted before any operation could be dropped; "
                           "nothing written\n")
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_replay_that_hangs_obeys_seconds(tmp_path: Path) -> None:
    """The third replay never returns: --seconds ends it and the shortest so far (the
    half the second replay kept) is the result."""
    log = tmp_path / "zeros.mtdops"
    log.write_text(ZEROS_LOG)
    done = _shrink(tmp_path, log, "hang", "--folio-mtd=shrink_targets:ReadsZeros",
                   "--seconds=2")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "zeros.min.mtdops"
    assert done.stdout == f"{log}: 64 operations, 32 still fail: {out}\n"
    assert len(parse_mtdops(out.read_text()).ops) == 32


def test_a_whole_log_that_hangs_is_one_line(tmp_path: Path) -> None:
    log = tmp_path / "zeros.mtdops"
    log.write_text(ZEROS_LOG)
    done = _shrink(tmp_path, log, "hang", "--folio-mtd=shrink_targets:ReadsZeros",
                   "--seconds=1", at=1)
    assert done.returncode == 2
    assert done.stderr.startswith(
        "python -m pytest_folio shrink: error: replaying the whole log on "
        "--folio-mtd=shrink_targets:ReadsZeros took longer than --seconds 1 (it was at ")
    assert done.stderr.count("\n") == 1 and "in _misbehave)" in done.stderr


def test_the_output_is_never_the_input_unless_in_place(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    log = tmp_path / "zeros.mtdops"
    log.write_text(ZEROS_LOG)
    (tmp_path / "link.mtdops").symlink_to(log)
    os.link(log, tmp_path / "hard.mtdops")
    for same in (log, tmp_path / "link.mtdops", tmp_path / "." / "zeros.mtdops",
                 tmp_path / "hard.mtdops"):
        assert main(["shrink", str(log), "-o", str(same)]) == 2
        assert capsys.readouterr().err == (
            f"python -m pytest_folio shrink: error: -o {same} is the log being shrunk: "
            "give another file, or --in-place to replace the log\n")
        assert log.read_text() == ZEROS_LOG


@pytest.mark.parametrize("kind", ["huge", "fifo", "zero"])
def test_a_log_too_big_or_not_a_file_is_one_line(tmp_path: Path, kind: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "big.fsxops"
    if kind == "huge":
        with log.open("wb") as f:
            f.truncate(300 << 20)
        why = f"{log}: 300M is more than the 16M a log may have"
    elif kind == "fifo":
        os.mkfifo(log)
        why = f"{log}: is a FIFO, not a log file"
    else:
        log, why = Path("/dev/zero"), "/dev/zero: is a character device, not a log file"
    assert main(["shrink", str(log)]) == 2
    assert capsys.readouterr().err == f"python -m pytest_folio shrink: error: {why}\n"


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e10"])
def test_seconds_must_be_a_time_the_timers_hold(value: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["shrink", "x.fsxops", f"--seconds={value}"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
