"""The mtd_test-style runners as plain functions, on correct RAM devices."""

from __future__ import annotations

import errno
import itertools

import pytest

from pytest_folio.mtdtests import (
    NAND_REQUIRED,
    Geometry,
    MTDTestError,
    check_bounds,
    check_readonly,
    nand_skip_reason,
    row_names,
    run_pagetest,
    run_readtest,
    run_speedtest,
    run_stresstest,
    run_torturetest,
)
from pytest_folio.mtdtests.speed import SpeedResult
from pytest_folio.mtdtests.torture import fit_range, patterns
from pytest_folio.targets.protocols import MTD_CAP_ROM, MTD_ROM
from tests.helpers.mtd_devices import CachedRamMTD, NandRamMTD, RamMTD

SEED_ROWS = [
    "Eraseblock write (128 KiB)", "Eraseblock read (128 KiB)",
    "Page write (512 B)", "Page read (512 B)",
    "2-page write (1 KiB)", "2-page read (1 KiB)",
    "Erase, blocks hold data",
    "Multi-block erase (2 blocks)", "Multi-block erase (4 blocks)",
    "Multi-block erase (8 blocks)", "Multi-block erase (16 blocks)",
    "Multi-block erase (32 blocks)", "Multi-block erase (64 blocks)",
    "Erase, already erased",
]


def test_geometry_assumes_512_byte_pages_when_writesize_is_1() -> None:
    geo = Geometry.of(RamMTD(size=1 << 20, erasesize=128 << 10))
    assert (geo.pgsize, geo.ebcnt, geo.pgcnt) == (512, 8, 256)
    nand = Geometry.of(NandRamMTD())
    assert (nand.pgsize, nand.pgcnt) == (2048, 64)


def test_speed_rows_are_the_kernel_sub_tests_in_order_with_the_seed_names() -> None:
    dev = RamMTD(size=1 << 20, erasesize=128 << 10)
    results = run_speedtest(dev, passes=2)
    assert [r.name for r in results] == SEED_ROWS == row_names(Geometry.of(dev))
    assert all(len(r.samples_ms) == 2 for r in results)
    assert all(r.nbytes == 1 << 20 for r in results)
    assert dev.store == b"\xff" * (1 << 20)   # it ends with every block erased


def test_speed_uses_the_device_page_size_on_nand() -> None:
    names = row_names(Geometry.of(NandRamMTD()))
    assert names[2:6] == ["Page write (2 KiB)", "Page read (2 KiB)",
                          "2-page write (4 KiB)", "2-page read (4 KiB)"]


class CountingRam(RamMTD):
    """Records every call, and keeps a stats object like the model's."""

    class Stats:
        def __init__(self) -> None:
            self.counts = {"writes": 0, "erases": 0}

        def snapshot(self) -> dict[str, int]:
            return dict(self.counts)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.calls: list[tuple[str, int, int]] = []
        self.stats = self.Stats()

    def _read(self, offset: int, length: int) -> bytes:
        self.calls.append(("read", offset, length))
        return super()._read(offset, length)

    def _write(self, offset: int, data: bytes) -> None:
        self.calls.append(("write", offset, len(data)))
        self.stats.counts["writes"] += 1
        super()._write(offset, data)

    def _erase(self, offset: int, length: int) -> None:
        self.calls.append(("erase", offset, length))
        self.stats.counts["erases"] += 1
        super()._erase(offset, length)


def test_speed_io_sizes_counters_and_multiblock_erase_lengths() -> None:
    dev = CountingRam(size=640 << 10, erasesize=64 << 10)   # 10 eraseblocks
    results = {r.name: r for r in run_speedtest(dev)}
    assert results["Page write (512 B)"].counters == {"writes": 10 * 128}
    assert results["2-page write (1 KiB)"].counters["writes"] == 10 * 64
    assert results["Erase, blocks hold data"].counters == {"erases": 10}
    erases = [c for c in dev.calls if c[0] == "erase"]
    # 4 setup/timed full erases of 10 blocks, then 2x..64x multi-block, then once more.
    multi = erases[40:-10]
    assert [n // (64 << 10) for _, _, n in multi] == (
        [2] * 5 + [4, 4, 2] + [8, 2] + [10] + [10] + [10])
    assert {n for kind, _, n in dev.calls if kind == "read"} == {64 << 10, 512, 1024}


def test_speed_reports_ms_per_pass_and_kib_per_second_from_the_clock() -> None:
    ticks = itertools.count(step=0.25)               # every timed section takes 250 ms
    results = run_speedtest(RamMTD(size=1 << 20, erasesize=128 << 10), passes=3,
                            clock=lambda: next(ticks))
    first = results[0]
    assert first.samples_ms == [250.0, 250.0, 250.0]
    assert first.kib_per_s == pytest.approx(1024 / 0.25)
    m = first.to_measurement({"folio": "16K"}, "reference")
    assert (m.suite, m.name, m.unit, m.params, m.target) == (
        "mtd_speedtest", "Eraseblock write (128 KiB)", "ms", {"folio": "16K"}, "reference")
    assert m.extra == {"bytes": 1 << 20, "kib_per_s": 4096.0}


def test_speed_count_limits_the_eraseblocks_and_logs_like_the_kernel() -> None:
    lines: list[str] = []
    dev = CountingRam(size=1 << 20, erasesize=64 << 10)
    results = run_speedtest(dev, count=3, log=lines.append)
    assert results[0].nbytes == 3 * (64 << 10)
    assert max(off for _, off, _ in dev.calls) < 3 * (64 << 10)
    assert any(line.startswith("eraseblock write speed is ") and line.endswith(" KiB/s")
               for line in lines)
    assert lines[-1] == "finished"


def test_speed_rejects_zero_passes() -> None:
    with pytest.raises(ValueError, match="passes"):
        run_speedtest(RamMTD(), passes=0)


def test_speed_result_median_ignores_one_slow_pass() -> None:
    r = SpeedResult("x", [10.0, 11.0, 500.0], 1 << 20)
    assert r.ms == 11.0


def test_read_reads_every_page_and_oob_only_when_there_is_oob() -> None:
    result = run_readtest(RamMTD(size=1 << 20, erasesize=64 << 10))
    assert (result.pages, result.eraseblocks, result.oob_pages) == (2048, 16, 0)
    nand = run_readtest(NandRamMTD())
    assert nand.oob_pages == 0 and nand.oob_skipped == "the device has no read_oob()"


def test_read_reads_oob_through_read_oob() -> None:
    class WithOob(NandRamMTD):
        def read_oob(self, offset: int, length: int) -> bytes:
            return b"\xff" * length

    result = run_readtest(WithOob(), count=2)
    assert result.oob_pages == result.pages == 2 * 64


def test_stress_is_deterministic_per_seed_and_touches_the_whole_device() -> None:
    a, b = CachedRamMTD(), CachedRamMTD()
    ra, rb = run_stresstest(a, count=400, seed=7), run_stresstest(b, count=400, seed=7)
    a.sync()
    b.sync()
    assert ra == rb and a.store == b.store
    assert ra.reads + ra.writes == 400 and ra.erases > 0
    assert b.retries > 0          # the simulated invalidate_bdev race did happen
    c = CachedRamMTD()
    run_stresstest(c, count=400, seed=8)
    c.sync()
    assert c.store != a.store


def test_stress_needs_two_eraseblocks() -> None:
    with pytest.raises(MTDTestError, match="at least 2 eraseblocks"):
        run_stresstest(RamMTD(size=64 << 10, erasesize=64 << 10), count=1)


def test_stress_detects_data_changed_behind_its_back() -> None:
    class Flaky(RamMTD):
        reads = 0

        def _read(self, offset: int, length: int) -> bytes:
            self.reads += 1
            data = bytearray(super()._read(offset, length))
            if self.reads == 150 and data:
                data[-1] ^= 0x01
            return bytes(data)

    with pytest.raises(MTDTestError, match="read wrong data"):
        run_stresstest(Flaky(), count=400, seed=1)


def test_torture_defaults_fit_the_device_and_patterns_alternate() -> None:
    geo = Geometry.of(RamMTD(size=16 << 20, erasesize=128 << 10))
    assert fit_range(geo, None, None) == (8, 32)
    small = Geometry.of(RamMTD(size=1 << 20, erasesize=64 << 10))
    assert fit_range(small, None, None) == (0, 16)
    with pytest.raises(ValueError, match="outside the device"):
        fit_range(small, 10, 10)
    a5a, _ = patterns(small)
    assert a5a[:512] == b"\x55" * 512 and a5a[512:1024] == b"\xaa" * 512


def test_torture_erases_checks_and_writes_only_its_range() -> None:
    dev = RamMTD(size=1 << 20, erasesize=64 << 10)
    dev.store[:] = b"\x11" * dev.size
    result = run_torturetest(dev, eb=2, ebcnt=3, cycles_count=3)
    assert result.erase_cycles == 3
    assert dev.store[:2 << 16] == b"\x11" * (2 << 16)
    assert dev.store[5 << 16:] == b"\x11" * (dev.size - (5 << 16))
    # cycle 2 (eb + cycles even) wrote 0xAA55..., so the first page holds 0xAA.
    assert dev.store[2 << 16:(2 << 16) + 512] == b"\xaa" * 512


def test_torture_pgcnt_tortures_the_last_pages_of_each_block() -> None:
    dev = RamMTD(size=1 << 20, erasesize=64 << 10)
    run_torturetest(dev, eb=0, ebcnt=1, pgcnt=2, cycles_count=1)
    assert dev.store[:(64 << 10) - 1024] == b"\xff" * ((64 << 10) - 1024)
    assert set(dev.store[(64 << 10) - 1024:64 << 10]) == {0x55, 0xAA}
    with pytest.raises(ValueError, match="pgcnt"):
        run_torturetest(dev, pgcnt=1000)


def test_nand_tests_give_the_kernel_reason_on_ram() -> None:
    assert nand_skip_reason(RamMTD(), "mtd_pagetest") == NAND_REQUIRED
    assert nand_skip_reason(NandRamMTD(), "mtd_pagetest") is None
    assert "OOB" in (nand_skip_reason(NandRamMTD(), "mtd_oobtest") or "")
    with pytest.raises(ValueError, match=NAND_REQUIRED):
        run_pagetest(RamMTD())


def test_pagetest_on_nand_checks_every_page_and_the_boundaries() -> None:
    assert run_pagetest(NandRamMTD()) == 16 * 64

    class CrossingBug(NandRamMTD):
        def _read(self, offset: int, length: int) -> bytes:
            data = super()._read(offset, length)
            if length > self.writesize and (offset + length) % self.erasesize:
                return data[:self.writesize] + b"\x00" * (length - self.writesize)
            return data

    with pytest.raises(MTDTestError, match="across the eraseblock boundary"):
        run_pagetest(CrossingBug())


def test_bounds_and_readonly_checks_pass_on_correct_devices() -> None:
    check_bounds(RamMTD())
    rom = RamMTD(type=MTD_ROM, flags=MTD_CAP_ROM)
    check_bounds(rom, write=False)
    check_readonly(rom, erase=True)
    with pytest.raises(ValueError, match="writeable"):
        check_readonly(RamMTD())


def test_bounds_names_the_missing_error() -> None:
    class ReadPastEnd(RamMTD):
        def _range(self, what: str, offset: int, length: int) -> None:
            if what != "read":
                super()._range(what, offset, length)

    with pytest.raises(MTDTestError, match=f"succeeded, expected {errno.errorcode[22]}"):
        check_bounds(ReadPastEnd())
