"""``python -m pytest_folio shrink LOG``: a failing log delta-debugged against a target."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from pytest_folio.cli import main
from pytest_folio.fsx.config import FsxOptions
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from pytest_folio.fsx.log import read_fsxops, recorded_by, recorded_note, write_fsxops
from pytest_folio.mtdtests.mtdops import format_mtdops, parse_mtdops
from pytest_folio.mtdtests.opgen import random_ops
from pytest_folio.mtdtests.ops import MTDFsx, MTDFsxFailure
from tests.helpers.fsx_broken import StaleDataAfterTruncateUp
from tests.helpers.mtd_devices import EvictionDropsDirty

BROKEN_FS = "tests.helpers.fsx_broken:StaleDataAfterTruncateUp.factory"


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
    assert capsys.readouterr().err.endswith(f"{tmp_path}: not a regular file\n")
