"""fsx for flash: the operation log, the oracle, and the ready suite run as a user runs
it (``--folio-mtd=pkg.mod:factory``), its failures replayed and shrunk."""

from __future__ import annotations

import errno
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_folio.model.block2mtd import Block2MTD, make_reference_block2mtd
from pytest_folio.mtdtests.mtdops import MTDOpsError, Op, format_mtdops, parse_mtdops
from pytest_folio.mtdtests.opgen import random_ops
from pytest_folio.mtdtests.ops import MTDFsx, MTDFsxFailure, make_data
from tests.helpers import FIRST_STRESS_PART, subprocess_env
from tests.helpers.mtd_devices import (
    EraseOfTheLastBlockIsEinval,
    FolioCacheMTD,
    PartialFolioWriteSkipsTheRead,
    RamMTD,
)

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


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = subprocess_env(COLUMNS="300")
    return subprocess.run([sys.executable, "-m", "pytest", *QUICK, *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)


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
                   "--folio-mtd-size=2M", "--folio-orders=2", "--folio-seed=5")
    assert proc.returncode == 1, proc.stdout[-3000:]
    first = re.search(r"^mtd fsx: (op \d+ \(.*)$", proc.stdout, re.M)
    command = re.search(r"^mtd fsx: replay it: (.*)$", proc.stdout, re.M)
    assert first and command, proc.stdout[-3000:]
    words = shlex.split(command.group(1))
    assert words[:3] == ["python", "-m", "pytest"]
    replay = _pytest(tmp_path, *words[3:], "-q")
    assert replay.returncode == 1, replay.stdout[-3000:]
    assert f"mtd fsx: {first.group(1)}" in replay.stdout


def test_the_hypothesis_form_shrinks_a_failure_to_a_few_operations(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "-p", "pytest_folio", "--pyargs",
                   "pytest_folio.suites.test_mtd_fsx", "-q", "-k", "hypothesis and eb16K",
                   "--folio-mtd=tests.helpers.mtd_devices:PartialFolioWriteSkipsTheRead",
                   "--folio-mtd-size=2M", "--folio-orders=2", "--folio-seed=1")
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
