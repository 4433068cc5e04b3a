"""The run's session: targets and logs resolved once, the same on every xdist worker."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

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
                                   "fs_oracle": "reference"}, "texts": {}}


def test_a_bad_spec_is_a_usage_error_of_one_line() -> None:
    with pytest.raises(pytest.UsageError, match=r"^--folio-mtd: unknown knob 'apx'"):
        FolioSession.resolve(dataclasses.replace(SETTINGS, mtd="reference:apx=1"))


def test_each_target_labels_the_tests_that_use_it() -> None:
    folio = FolioSession.resolve(dataclasses.replace(SETTINGS, fs="reference:features=full"))
    assert folio.target_label(["mtd_device", "request"]) == "reference:api=folio,retry=on"
    assert folio.target_label(["filesystem"]) == "reference:features=full"
    assert folio.target_label(["tmp_path"]) == ""
