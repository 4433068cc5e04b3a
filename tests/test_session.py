"""The run's session: targets and logs resolved once, the same on every xdist worker."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import execnet
import pytest

import pytest_folio.session as session_module
from pytest_folio.fsx.log import FSYNC_NOTE, LogEntry, recorded_note
from pytest_folio.options import FolioSettings
from pytest_folio.session import FolioSession

SETTINGS = FolioSettings(
    orders=(0,), block_sizes=(4096,), mtd="reference", fs="reference", mtd_size=1 << 20,
    erasesize=64 << 10, allow_destructive=False, fsx_ops=10, seed=1, fsx_replay=None,
    fsx_dir=None, save=None, compare=None, compare_fail=None)


def test_a_worker_reads_the_replayed_logs_the_controller_read(tmp_path: Path) -> None:
    mtdops, fsxops = tmp_path / "run.mtdops", tmp_path / "run.fsxops"
    mtdops.write_text("write 0x0 0x1000 rand 1\nsync\n")
    fsxops.write_text("write 0x0 0x100 0x0\n")
    s = dataclasses.replace(SETTINGS, mtd_replay=mtdops, fsx_replay=fsxops)
    controller = FolioSession.resolve(s)
    mtdops.unlink()     # a worker on another host, or after the file went away
    fsxops.unlink()
    worker = FolioSession.resolve(s, controller.decisions())
    assert worker.mtd_replay == controller.mtd_replay
    assert worker.fsx_replay == controller.fsx_replay


def test_a_worker_gets_the_logs_parsed_not_their_text(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    mtdops, fsxops = tmp_path / "run.mtdops", tmp_path / "run.fsxops"
    mtdops.write_text("# device: x size=0x100000 erasesize=0x1000 writesize=1\n"
                      "write 0x0 0x1000 rand 1\nerase 0x0 0x4000\nsync\n")
    fsxops.write_text(f"{FSYNC_NOTE}\n{recorded_note('t.py::test_x', '-r 4096')}\n"
                      "write 0x0 0x100 0x0 close_open\ncopy_range 0 1 9 0x100\nfsync 0 0 0x100\n")
    controller = FolioSession.resolve(
        dataclasses.replace(SETTINGS, mtd_replay=mtdops, fsx_replay=fsxops))
    # what xdist sends a worker: execnet's serializer takes primitive data only
    decisions = execnet.loads(execnet.dumps(controller.decisions()))

    def parse_again(*args: object) -> None:
        raise AssertionError("a worker parsed the log again")

    monkeypatch.setattr(session_module, "parse_mtdops", parse_again)
    monkeypatch.setattr(session_module, "parse_fsxops", parse_again)
    worker = FolioSession.resolve(controller.settings, decisions)
    assert worker.mtd_replay == controller.mtd_replay
    assert worker.fsx_replay == controller.fsx_replay
    assert worker.fsx_recorded_by == controller.fsx_recorded_by == ("t.py::test_x", "-r 4096")
    assert worker.fsx_replay is not None
    assert [type(e) for e in worker.fsx_replay[1]] == [LogEntry] * 3


@pytest.mark.parametrize(("option", "field"), [("--folio-mtd-replay", "mtd_replay"),
                                               ("--folio-fsx-replay", "fsx_replay")])
def test_a_log_over_the_cap_is_one_line_before_reading_it(tmp_path: Path, option: str,
                                                          field: str) -> None:
    log = tmp_path / "huge.log"
    with log.open("wb") as f:     # sparse: 100 MiB that take no disk and are never read
        f.truncate(100 << 20)
    with pytest.raises(pytest.UsageError) as raised:
        FolioSession.resolve(dataclasses.replace(SETTINGS, **{field: log}))  # type: ignore[arg-type]
    assert str(raised.value) == (f"{option}: {log}: 100M is more than the 16M a log "
                                 "may have")


def test_a_worker_takes_the_controllers_classification_of_a_path(tmp_path: Path) -> None:
    s = dataclasses.replace(SETTINGS, fs=str(tmp_path))
    decisions = FolioSession.resolve(s).decisions()
    tmp_path.rmdir()    # would be "does not exist" if the worker checked again
    worker = FolioSession.resolve(s, decisions)
    assert (worker.fs.kind, worker.fs.label) == ("path", str(tmp_path))


def test_the_decisions_are_primitive_data() -> None:
    decisions = FolioSession.resolve(
        dataclasses.replace(SETTINGS, fs_oracle="reference")).decisions()
    assert decisions == {"kinds": {"mtd": "reference", "fs": "reference",
                                   "fs_oracle": "reference"}, "logs": {},
                         "fs_cache_bound": False, "sizes": {}}


def test_a_worker_runs_a_factory_at_the_sizes_the_controller_kept() -> None:
    s = dataclasses.replace(SETTINGS, fs="tests.helpers.ignoring_sizes:fs",
                            block_sizes=(4096, 16384, 65536))
    controller = FolioSession.resolve(s)
    assert controller.decisions()["sizes"] == {"fs_block_sizes": [4096]}
    worker = FolioSession.resolve(s, controller.decisions())
    assert worker.fit("fs_block_sizes", (4096, 16384, 65536)) == (4096,)
    assert worker.fit("fs_block_sizes", (65536,)) == (65536,)     # a marker's: one
    assert worker.fit("mtd_orders", (0, 2)) == (0, 2)


def test_a_bad_spec_is_a_usage_error_of_one_line() -> None:
    with pytest.raises(pytest.UsageError, match=r"^--folio-mtd: unknown knob 'apx'"):
        FolioSession.resolve(dataclasses.replace(SETTINGS, mtd="reference:apx=1"))


def test_each_target_labels_the_tests_that_use_it() -> None:
    folio = FolioSession.resolve(dataclasses.replace(SETTINGS, fs="reference:features=full"))
    assert folio.target_label(["mtd_device", "request"]) == "reference:api=folio,retry=on"
    assert folio.target_label(["filesystem"]) == "reference:features=full"
    assert folio.target_label(["tmp_path"]) == ""
