"""fsx for flash: the operation log, the oracle, and the ready suite run as a user runs
it (``--folio-mtd=pkg.mod:factory``), its failures replayed and shrunk."""

from __future__ import annotations

import errno
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from pytest_folio.model.block2mtd import Block2MTD, make_reference_block2mtd
from pytest_folio.mtdtests.engine import MTDFsx, MTDFsxFailure, make_data
from pytest_folio.mtdtests.log import MTDOpsError, Op, format_mtdops, parse_mtdops
from pytest_folio.mtdtests.opgen import random_ops
from pytest_folio.mtdtests.report import explain, kind_of, shrink
from pytest_folio.targets.protocols import MTDDevice
from tests.helpers import FIRST_STRESS_PART, subprocess_env
from tests.helpers.mtd_devices import (
    ColdReadBypassesTheCache,
    EraseOfTheLastBlockIsEinval,
    FolioCacheMTD,
    PageEraseMTD,
    PartialFolioWriteSkipsTheRead,
    RamMTD,
    ReadReturnsAViewOfTheFolio,
    UnalignedEraseRefusedAcrossEraseblocks,
)
from tests.helpers.usual_python import MemoryviewMTD, UsualMTD

QUICK = ("-p", "no:cacheprovider", "-p", "no:benchmark")


def test_an_operation_log_parses_back_to_the_same_operations() -> None:
    ops = [Op("erase", 0, 1 << 20), Op("write", 4095, 4098, "pages", 7), Op("sync"),
           Op("write", 0, 16, "same"), Op("read", 0x1fff, 2), Op("reopen")]
    log = parse_mtdops(format_mtdops(ops, RamMTD(size=1 << 20)))
    assert (log.ops, log.size, log.erasesize) == (ops, 1 << 20, 64 << 10)


def test_a_bad_log_line_is_named_by_its_number() -> None:
    with pytest.raises(MTDOpsError, match="line 2: write data must be one of"):
        parse_mtdops("read 0 1\nwrite 0 1 blue\n")


def test_page_mixed_data_keeps_some_pages_and_changes_others() -> None:
    current = bytes(range(256)) * 64          # four pages
    data = make_data(Op("write", 0, len(current), "pages", 3), current, clear_only=False)
    pages = [data[i:i + 4096] for i in range(0, len(data), 4096)]
    kinds = {"same" if p == current[:4096] else "ff" if p == b"\xff" * 4096
             else "00" if p == bytes(4096) else "rand" for p in pages}
    assert len(kinds) > 1


def test_flash_that_only_clears_bits_gets_data_it_can_store() -> None:
    data = make_data(Op("write", 0, 4, "rand", 1), b"\x0f\xf0\x00\xff", clear_only=True)
    assert all(d & ~c == 0 for d, c in zip(data, b"\x0f\xf0\x00\xff", strict=True))


def test_the_oracle_answers_like_the_mtd_core() -> None:
    fsx = MTDFsx(RamMTD(size=1 << 20))
    fsx.step(Op("erase", 0, 1 << 20))
    assert fsx.step(Op("read", (1 << 20) - 1, 2)).error == errno.EINVAL
    assert fsx.step(Op("erase", 1 << 20, 64 << 10)).error == errno.EINVAL
    assert fsx.step(Op("write", (1 << 20) - 1, 1, "00")).error is None


def test_a_correct_folio_cache_survives_a_random_run() -> None:
    fsx = MTDFsx(FolioCacheMTD(size=1 << 20, erasesize=4096), folio=16384)
    fsx.run(random_ops(fsx.layout, seed=11, count=400, erased=fsx.model.is_erased))
    assert fsx.counts["reopen"] > 0 and fsx.bytes_written >= 2 << 20


def test_a_broken_folio_cache_fails_on_an_operation_the_log_ends_with() -> None:
    fsx = MTDFsx(PartialFolioWriteSkipsTheRead(size=1 << 20, erasesize=4096), folio=16384)
    with pytest.raises(MTDFsxFailure) as info:
        fsx.run(random_ops(fsx.layout, seed=11, count=400, erased=fsx.model.is_erased))
    failure = info.value
    assert failure.summary.startswith(f"op {len(failure.ops)} (") or failure.op_number is None
    replayed = MTDFsx(PartialFolioWriteSkipsTheRead(size=1 << 20, erasesize=4096),
                      folio=16384)
    with pytest.raises(MTDFsxFailure) as again:
        replayed.run(failure.ops)
    assert again.value.summary == failure.summary


def _pytest(cwd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = subprocess_env(COLUMNS="300")
    return subprocess.run([sys.executable, "-m", "pytest", *QUICK, *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_the_default_suites_pass_on_a_correct_user_folio_cache(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "-p", "pytest_folio", "--pyargs", "pytest_folio.suites",
                   "-q", "--folio-mtd=tests.helpers.mtd_devices:FolioCacheMTD",
                   "--folio-mtd-size=2M", "-k", f"mtd and {FIRST_STRESS_PART}",
                   "--folio-orders=0,2")
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_a_users_broken_device_fails_with_a_replay_that_fails_the_same_way(
        tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "-p", "pytest_folio", "--pyargs",
                   "pytest_folio.suites.test_mtd_fsx", "-q", "-k", "not hypothesis",
                   "--folio-mtd=tests.helpers.mtd_devices:PartialFolioWriteSkipsTheRead",
                   "--folio-mtd-size=2M", "--folio-orders=2", "--folio-seed=5",
                   f"--basetemp={tmp_path / 'run'}")    # the log outlives other runs' pruning
    assert proc.returncode == 1, proc.stdout[-3000:]
    first = re.search(r"^mtd fsx: (op \d+ \(.*)$", proc.stdout, re.M)
    command = re.search(r"^mtd fsx: replay it: (.*)$", proc.stdout, re.M)
    assert first and command, proc.stdout[-3000:]
    words = shlex.split(command.group(1))
    assert words[:3] == ["python", "-m", "pytest"]
    replay = _pytest(tmp_path, *words[3:], "-q", f"--basetemp={tmp_path / 'replay'}")
    assert replay.returncode == 1, replay.stdout[-3000:]
    shrunk = re.search(r"^mtd fsx: shrunk to (\d+) of \d+ operations .*; it fails with: "
                       r"(.*)$", proc.stdout, re.M)
    assert shrunk and int(shrunk.group(1)) <= 12, proc.stdout[-3000:]
    assert f"mtd fsx: {shrunk.group(2)}" in replay.stdout


@pytest.mark.slow   # the shrinking may take its whole 60 s of CPU
def test_the_hypothesis_form_shrinks_a_failure_to_a_few_operations(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "-p", "pytest_folio", "--pyargs",
                   "pytest_folio.suites.test_mtd_fsx", "-q", "-k", "hypothesis and eb16K",
                   "--folio-mtd=tests.helpers.mtd_devices:PartialFolioWriteSkipsTheRead",
                   "--folio-mtd-size=2M", "--folio-orders=2", "--folio-seed=1",
                   # shrinking may take its whole budget (60 s of CPU): wall-clock time
                   # under load is several times that
                   timeout=1800)
    assert proc.returncode == 1, proc.stdout[-3000:]
    logged = re.search(r"operation log \((\d+) operations\)", proc.stdout)
    assert logged and int(logged.group(1)) <= 12, proc.stdout[-3000:]


def _reference(size: int, erasesize: int) -> Block2MTD:
    return make_reference_block2mtd(size=size, erasesize=erasesize, folio_order=2)


def test_differential_mode_agrees_with_the_reference_on_a_correct_device() -> None:
    fsx = MTDFsx(FolioCacheMTD(size=1 << 20, erasesize=16384), folio=16384,
                 reference=_reference(1 << 20, 16384))
    fsx.run(random_ops(fsx.layout, seed=3, count=300, erased=fsx.model.is_erased))
    assert fsx.counts["erase"] > 0


def test_differential_mode_names_both_sides_of_the_first_difference() -> None:
    fsx = MTDFsx(EraseOfTheLastBlockIsEinval(size=1 << 20, erasesize=16384), folio=16384,
                 reference=_reference(1 << 20, 16384))
    with pytest.raises(MTDFsxFailure, match=r"^op 1 \(erase 0x0 0x100000\): target EINVAL, "
                                            r"reference ok$"):
        fsx.run(random_ops(fsx.layout, seed=3, count=300))


def test_differential_mode_through_the_option(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "-p", "pytest_folio", "--pyargs",
                   "pytest_folio.suites.test_mtd_fsx", "-q", "-k", "not hypothesis",
                   "--folio-mtd=tests.helpers.mtd_devices:EraseOfTheLastBlockIsEinval",
                   "--folio-mtd-oracle=reference", "--folio-mtd-size=1M",
                   "--folio-orders=2", "--folio-erasesizes=16K")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "mtd fsx: op 1 (erase 0x0 0x100000): target EINVAL, reference ok" in proc.stdout
    assert "--folio-mtd-oracle=reference --folio-mtd-replay=" in proc.stdout


def test_an_erase_of_nothing_is_a_no_op_inside_and_einval_at_the_end() -> None:
    fsx = MTDFsx(_reference(1 << 20, 16384), folio=16384)
    fsx.step(Op("erase", 0, 1 << 20))
    fsx.step(Op("write", 0, 16384, "rand", 1))
    assert fsx.step(Op("erase", 100, 0)).error is None
    assert fsx.step(Op("erase", 1 << 20, 0)).error == errno.EINVAL
    assert fsx.step(Op("read", 1 << 20, 0)).data == b""
    assert fsx.step(Op("write", 1 << 20, 0, "rand", 0)).error is None
    fsx.check_all()                       # the erase of nothing left the data alone


@pytest.mark.parametrize("device", [RamMTD, PageEraseMTD])
def test_either_rule_for_erasing_part_of_an_eraseblock_passes(device: type[RamMTD]) -> None:
    fsx = MTDFsx(device(size=1 << 20, erasesize=16384), folio=16384)
    fsx.run([Op("erase", 0, 1 << 20), Op("write", 0, 1 << 16, "rand", 1),
             Op("erase", 4096, 8192), Op("erase", 20000, 5000), Op("read", 0, 1 << 16)])
    assert fsx.erase_rule == ("refuses" if device is RamMTD else "erases pages")


def test_a_device_that_changes_its_rule_for_erasing_part_of_an_eraseblock_fails() -> None:
    fsx = MTDFsx(UnalignedEraseRefusedAcrossEraseblocks(size=1 << 20, erasesize=16384),
                 folio=16384)
    with pytest.raises(MTDFsxFailure, match=r"op 3 \(erase 0x3000 0x2000\): got EINVAL for "
                                            r"an erase of part of an eraseblock, but the "
                                            r"device erases pages for op 2"):
        fsx.run([Op("erase", 0, 1 << 20), Op("erase", 4096, 4096), Op("erase", 0x3000, 0x2000)])


def test_a_read_answering_a_view_of_its_cache_breaks_the_protocol() -> None:
    fsx = MTDFsx(ReadReturnsAViewOfTheFolio(size=1 << 20, erasesize=16384), folio=16384)
    with pytest.raises(MTDFsxFailure, match=r"op 4 \(sync\): the answer of read\(0, 16\) "
                                            r"\(call 2\) had changed by call 4 \(sync\(\)\): "
                                            r"it is a view into the target's cache"):
        fsx.run([Op("erase", 0, 1 << 20), Op("read", 0, 16), Op("write", 0, 16, "00", 1),
                 Op("sync")])


@pytest.mark.parametrize("device", [UsualMTD, MemoryviewMTD])
def test_answers_in_the_usual_python_shapes_pass(device: type[UsualMTD]) -> None:
    """Counts and 0 returned, reopen returning the device, bytearray and memoryview
    reads: the same information as the protocol's shapes."""
    fsx = MTDFsx(cast(MTDDevice, device(size=1 << 20, erasesize=16384)), folio=16384)
    fsx.run(random_ops(fsx.layout, seed=3, count=400, erased=fsx.model.is_erased))
    assert fsx.counts["reopen"] and fsx.counts["write"] and fsx.counts["read"]


def test_the_reference_runs_with_a_partial_last_folio_and_drops_clean_folios() -> None:
    size = (1 << 20) - 4096                            # 16K folios: the last one partial
    ref = make_reference_block2mtd(size=size, erasesize=4096, folio_order=2)
    fsx = MTDFsx(ref, folio=16384, reference=None)
    assert fsx.layout.can_drop and ref.size == size
    fsx.run(random_ops(fsx.layout, seed=7, count=400, erased=fsx.model.is_erased))
    assert fsx.counts["drop"] > 0
    ref.write(0, b"\x00" * 10)                         # dirty: stays cached
    ref.sync()
    changed = bytes(b ^ 0xFF for b in ref.read(16384, 10))   # unlike what is there
    ref.write(16384, changed)
    ref.drop_caches()
    assert [f.index for f in ref.mapping.folios()] == [4]
    assert ref.read(0, 16394)[:10] == bytes(10) and ref.read(16384, 10) == changed


def test_a_failure_shrinks_to_a_few_operations_that_point_at_the_bad_byte() -> None:
    size, esz = (1 << 20) - 4096, 4096

    def rerun(ops: list[Op]) -> MTDFsxFailure | None:
        try:
            MTDFsx(ColdReadBypassesTheCache(size=size, erasesize=esz), folio=16384).run(ops)
        except MTDFsxFailure as failure:
            return failure
        return None

    fsx = MTDFsx(ColdReadBypassesTheCache(size=size, erasesize=esz), folio=16384)
    with pytest.raises(MTDFsxFailure) as info:
        fsx.run(random_ops(fsx.layout, seed=5, count=1200, erased=fsx.model.is_erased))
    small = shrink(info.value, rerun)
    assert len(small.ops) <= 8 < len(info.value.ops) and kind_of(small) == "wrong data at #"
    lines = explain(small, fsx.layout)
    assert small.mismatch is not None
    at = small.mismatch.at
    assert lines[0].startswith(f"first wrong byte at {at:#x}: eraseblock {at // esz} ")
    starred = [line for line in lines if line.startswith("*")]
    assert starred and all(" write " in line or " erase " in line for line in starred)
    assert any(line.endswith(" <") for line in lines)


@pytest.mark.parametrize(("args", "oracle"), [
    (["--folio-mtd=tests.helpers.mtd_devices:FolioCacheMTD"], "reference"),
    (["--folio-mtd=tests.helpers.mtd_devices:FolioCacheMTD", "--folio-mtd-oracle=none"],
     "none"),
    (["--folio-mtd=tests.helpers.mtd_devices:FolioCacheMTD",
      "--folio-mtd-oracle=reference:api=page"], "reference:api=page"),
    ([], "none"),
])
def test_the_mtd_oracle_is_the_reference_for_a_users_device_unless_none(
        tmp_path: Path, args: list[str], oracle: str) -> None:
    proc = _pytest(tmp_path, "-p", "pytest_folio", "--co", *args)
    assert f"folio: mtd oracle {oracle}\n" in proc.stdout, proc.stdout[-2000:]


def test_a_replayed_log_runs_at_its_erasesize_and_the_others_skip_naming_it(
        tmp_path: Path) -> None:
    log = tmp_path / "run.mtdops"
    log.write_text(format_mtdops([Op("erase", 0, 1 << 20), Op("write", 0, 1 << 15, "rand", 1),
                                  Op("read", 0, 1 << 15)], RamMTD(size=1 << 20, erasesize=16384)))
    # the default erasesizes of 16K folios: 4K, 16K and 128K; decided on the controller
    proc = _pytest(tmp_path, "-p", "pytest_folio", "--pyargs",
                   "pytest_folio.suites.test_mtd_fsx", "-k", "test_mtd_fsx and not hypothesis",
                   "--folio-mtd-size=1M", "--folio-orders=2", f"--folio-mtd-replay={log}",
                   "-n", "2", "-rs")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert re.search(r"\b1 passed, 2 skipped\b", proc.stdout), proc.stdout[-3000:]
    assert proc.stdout.count(f"--folio-mtd-replay {log}: recorded in 16K eraseblocks, this "
                             "test's are ") == 2, proc.stdout[-3000:]
    assert "(--folio-erasesizes=16K runs only the log's)" in proc.stdout
