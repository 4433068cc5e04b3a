"""The block2mtd checks on the reference model, and the ready-to-run modules against it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_folio.model.block2mtd import Block2MTD, make_reference_block2mtd
from pytest_folio.model.blockdev import BlockDevice
from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.mtdtests import MTDTestError, check_bounds, check_readonly, run_speedtest
from pytest_folio.mtdtests.block2mtd import (
    check_api_paths_agree,
    check_dropped_folio_race,
    check_erase_skips_erased_pages,
    check_unchanged_write_dirties_nothing,
)
from tests.helpers import FIRST_STRESS_PART, run_result, subprocess_env


def reference(api: str = "folio", order: int = 2, retry: bool = True,
              cls: type[Block2MTD] = Block2MTD) -> Block2MTD:
    if cls is Block2MTD:
        return make_reference_block2mtd(size=1 << 20, erasesize=128 << 10,
                                        folio_order=order, api=api, retry=retry)
    bdev = BlockDevice(1 << 20, logical_block_size=PAGE_SIZE << order)
    return cls(bdev, 128 << 10, api=api, retry=retry)


@pytest.mark.parametrize("api", ["folio", "page"])
@pytest.mark.parametrize("order", [0, 2, 4])
def test_every_check_passes_on_the_reference(api: str, order: int) -> None:
    dev = reference(api, order)
    check_erase_skips_erased_pages(dev)
    check_unchanged_write_dirties_nothing(dev)
    assert check_dropped_folio_race(dev) == 2          # one retry for the write, one erase
    deltas = check_api_paths_agree(dev, count=150)
    assert deltas["folio"].get("compound_head", 0) == 0
    assert deltas["page"]["compound_head"] > 0
    dev.close()


@pytest.mark.parametrize("api", ["folio", "page"])
def test_race_check_detects_the_lost_write_with_retry_off(api: str) -> None:
    with pytest.raises(MTDTestError, match="write at 0x40000 lost: its folio was dropped"):
        check_dropped_folio_race(reference(api, retry=False))


class EraseAlwaysWrites(Block2MTD):
    """Fills every page with 0xFF, erased or not, and dirties it: the skip is gone."""

    def _erase(self, index: int, pages: int) -> None:
        for i in range(index, index + pages):
            self._write(b"\x00" * 4096, i << 12)   # make it differ, then erase it
            self._write(b"\xff" * 4096, i << 12)


class WriteAlwaysDirties(Block2MTD):
    """Marks the folio dirty even when the bytes did not change."""

    def _write(self, data: bytes, pos: int) -> None:
        super()._write(data, pos)
        for folio in self.mapping.folios():
            if folio.pos <= pos < folio.pos + folio.size:
                folio.dirty = True


def test_erase_check_fails_when_erase_rewrites_erased_pages() -> None:
    with pytest.raises(MTDTestError, match="pages an erase filled: got 0, expected 11"):
        check_erase_skips_erased_pages(reference(cls=EraseAlwaysWrites))


def test_unchanged_write_check_fails_when_a_same_bytes_write_dirties() -> None:
    with pytest.raises(MTDTestError, match="folios dirtied by rewriting the same bytes"):
        check_unchanged_write_dirties_nothing(reference(cls=WriteAlwaysDirties))


def test_api_check_fails_when_the_paths_disagree() -> None:
    class ReadsOneByteWrong(Block2MTD):
        def read(self, offset: int, length: int) -> bytes:
            data = bytearray(super().read(offset, length))
            if self.api == "page" and length == self.size:
                data[100000] ^= 1
            return bytes(data)

    dev = reference("folio")
    check_api_paths_agree(dev, count=50)          # the other device is a plain Block2MTD
    with pytest.raises(MTDTestError, match="api=folio vs api=page: device contents"):
        check_api_paths_agree(reference("page", cls=ReadsOneByteWrong), count=50)


# plugins the inner runs do not need, each costing a second or two of start-up
QUICK = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark")


def run_mtd_suites(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_folio", *QUICK, "--pyargs",
         "pytest_folio.suites", "-k", f"mtd and not kernel_mtd and {FIRST_STRESS_PART}",
         "-q", "-rfs",
         "--folio-mtd-size", "1M", "--folio-erasesize", "32K", *args],
        cwd=tmp_path, env=subprocess_env(COLUMNS="400"), capture_output=True, text=True,
        timeout=600)


@pytest.mark.parametrize("knobs", ["reference:api=folio", "reference:api=page"])
def test_ready_to_run_modules_pass_on_the_reference(tmp_path: Path, knobs: str) -> None:
    proc = run_mtd_suites(tmp_path, "--folio-mtd", knobs)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # 4 read + 1 speed + 1 stress part + 1 torture + 4 nand + 4 block2mtd + 1 invalidate
    # race, at 3 orders, and fsx, its Hypothesis form, the read-only check and 3 power cut
    # at 8 geometries (4K: eb 4K, 32K; 16K: eb 4K, 16K, 32K; 64K: eb 16K, 64K, 128K)
    run_result(proc).assert_outcomes(passed=78, skipped=15)


def test_ready_to_run_race_check_fails_with_retry_off(tmp_path: Path) -> None:
    proc = run_mtd_suites(tmp_path, "--folio-mtd", "reference:retry=off", "--folio-orders", "2")
    assert proc.returncode == 1
    failed = sorted(line for line in proc.stdout.splitlines() if line.startswith("FAILED"))
    assert len(failed) == 2, proc.stdout
    # the model's own check, and the race suite's threads (the window opened for them)
    assert "test_dropped_folio_race[16K]" in failed[0]
    assert "lost: its folio was dropped" in failed[0]
    assert "test_block2mtd_invalidate_race[16K]" in failed[1] and "lost " in failed[1]


def test_readonly_reference_passes_the_readonly_and_range_checks() -> None:
    dev = Block2MTD(BlockDevice(1 << 20, read_only=True), 128 << 10)
    check_readonly(dev, erase=True)
    check_bounds(dev, write=False)


def test_speed_rows_carry_the_models_counters_as_the_seed_describes_them() -> None:
    pages = (1 << 20) // PAGE_SIZE
    page = {r.name: r.counters for r in run_speedtest(reference("page", order=2))}
    folio = {r.name: r.counters for r in run_speedtest(reference("folio", order=2))}
    # one compound_head per page read, four per page written or erased, none on folios
    assert page["Eraseblock read (128 KiB)"]["compound_head"] == pages
    assert page["Eraseblock write (128 KiB)"]["compound_head"] == 4 * pages
    assert page["Erase, blocks hold data"]["compound_head"] == 4 * pages
    assert all("compound_head" not in counters for counters in folio.values())
    assert folio["Eraseblock read (128 KiB)"]["folio_lookups"] == pages // 4
    # an erase of erased blocks skips every page and dirties nothing
    for counters in (page, folio):
        assert counters["Erase, already erased"]["erase_pages_skipped"] == pages
        assert "erase_pages_written" not in counters["Erase, already erased"]
