"""The kernel's mtd test modules in the guest: devices, parameters, the kernel log."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pytest_folio.mtdtests import kernel_modules as mtdtests
from pytest_folio.mtdtests.kernel_modules import (
    KERNEL_TESTS,
    KernelDevice,
    KernelTestRun,
    kernel_mtd_devices,
    speed_rows,
    swap_block2mtd,
    torture_params,
)
from pytest_folio.sizes import blocksize_order

DEVICE = KernelDevice(0, "block2mtd: /dev/ram0", 16 << 20, 128 << 10, 1, 0)

# mtd_speedtest's lines on a 16 MiB block2mtd (128 eraseblocks of 128 KiB), as the kernel
# logs them; 16384 KiB in 250 ms is 65536 KiB/s
SPEEDTEST_LOG = [
    "mtd_speedtest: MTD device: 0",
    "mtd_speedtest: not NAND flash, assume page size is 512 bytes.",
    "mtd_speedtest: MTD device size 16777216, eraseblock size 131072, page size 512, "
    "count of eraseblocks 128, pages per eraseblock 256, OOB size 0",
    "mtd_speedtest: testing eraseblock write speed",
    "mtd_speedtest: eraseblock write speed is 65536 KiB/s",
    "mtd_speedtest: eraseblock read speed is 131072 KiB/s",
    "mtd_speedtest: page write speed is 32768 KiB/s",
    "mtd_speedtest: page read speed is 40960 KiB/s",
    "mtd_speedtest: 2 page write speed is 16384 KiB/s",
    "mtd_speedtest: 2 page read speed is 81920 KiB/s",
    "mtd_speedtest: Testing erase speed",
    "mtd_speedtest: erase speed is 163840 KiB/s",
    "mtd_speedtest: Testing 2x multi-block erase speed",
    "mtd_speedtest: 2x multi-block erase speed is 327680 KiB/s",
    "mtd_speedtest: 64x multi-block erase speed is 0 KiB/s",
    "mtd_speedtest: finished",
]


def test_speed_lines_become_ms_per_pass_under_the_speed_suites_names() -> None:
    rows = speed_rows(SPEEDTEST_LOG, 128 << 10, 1)
    assert rows == {
        "Eraseblock write (128 KiB)": 250.0, "Eraseblock read (128 KiB)": 125.0,
        "Page write (512 B)": 500.0, "Page read (512 B)": 400.0,
        "2-page write (1 KiB)": 1000.0, "2-page read (1 KiB)": 200.0,
        "Erase, blocks hold data": 100.0, "Multi-block erase (2 blocks)": 50.0}


def test_bad_blocks_are_left_out_of_the_bytes_moved() -> None:
    log = [*SPEEDTEST_LOG[:3], "mtd_test: scanned 128 eraseblocks, 64 are bad",
           "mtd_speedtest: eraseblock write speed is 65536 KiB/s"]
    assert speed_rows(log, 128 << 10, 1) == {"Eraseblock write (128 KiB)": 125.0}


def test_a_nand_only_test_skips_with_the_kernels_words() -> None:
    run = KernelTestRun(KERNEL_TESTS["pagetest"], DEVICE, 19, [
        "mtd_pagetest: MTD device: 0", "mtd_pagetest: this test requires NAND flash"])
    assert run.nand_only_reason() == "mtd_pagetest: this test requires NAND flash"
    assert not run.passed()


def test_a_test_passes_only_with_its_finished_line() -> None:
    test = KERNEL_TESTS["stresstest"]
    done = KernelTestRun(test, DEVICE, 0, ["mtd_stresstest: finished, 2000 operations done"])
    cut = KernelTestRun(test, DEVICE, 0, ["mtd_stresstest: doing operations"])
    assert done.passed() and not cut.passed()
    assert done.nand_only_reason() is None


def test_torturetests_wear_warning_is_no_problem_but_a_verify_failure_is() -> None:
    test = KERNEL_TESTS["torturetest"]
    warned = KernelTestRun(test, DEVICE, 0, [
        "mtd_torturetest: Warning: this program is trying to wear out your flash, stop "
        "it if this is not wanted.", "mtd_torturetest: finished after 4 erase cycles"])
    failed = KernelTestRun(test, DEVICE, 0, ["mtd_torturetest: verify failed for 0xff "
                                             "pattern"])
    assert warned.problems() == [] and warned.passed()
    assert failed.problems() == ["mtd_torturetest: verify failed for 0xff pattern"]


@pytest.mark.parametrize(("lbs", "order"), [(512, 0), (4096, 0), (16384, 2), (65536, 4)])
def test_the_folio_order_follows_the_logical_block_size(lbs: int, order: int) -> None:
    assert blocksize_order(lbs) == order


def test_torture_fits_its_range_into_a_small_device() -> None:
    small = KernelDevice(0, "x", 1 << 20, 128 << 10, 1, 0)
    assert torture_params(DEVICE) == {"eb": "8", "ebcnt": "32"}
    assert torture_params(small) == {"eb": "2", "ebcnt": "6"}


def test_devices_come_from_sysfs_with_their_block_devices_folio_order(tmp_path: Path) -> None:
    rdev = os.stat("/dev/null").st_rdev
    queue = tmp_path / "dev/block" / f"{os.major(rdev)}:{os.minor(rdev)}" / "queue"
    queue.mkdir(parents=True)
    (queue / "logical_block_size").write_text("16384\n")
    for n, name in ((0, "block2mtd: /dev/null"), (1, "some nor flash")):
        d = tmp_path / "class/mtd" / f"mtd{n}"
        d.mkdir(parents=True)
        for attr, value in (("name", name), ("size", "1048576"), ("erasesize", "65536"),
                            ("writesize", "1")):
            (d / attr).write_text(value + "\n")
    (tmp_path / "class/mtd/mtd0ro").mkdir()
    devices = kernel_mtd_devices(tmp_path)
    assert [(d.number, d.folio_order, d.path) for d in devices] == [
        (0, 2, "/dev/mtd0"), (1, None, "/dev/mtd1")]



def test_the_items_skip_outside_the_vm_saying_how_to_run_them(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_FOLIO_VM", raising=False)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--pyargs",
                                          "pytest_folio.suites.test_kernel_mtd", "-rs",
                                          "--folio-orders=0,2")
    result.assert_outcomes(skipped=18)
    result.stdout.fnmatch_lines(["*the kernel's mtd tests run in the VM: python -m "
                                 "pytest_folio vm --mtd-tests*",
                                 "*base and patched in turn in one boot: python -m "
                                 "pytest_folio vm --mtd-tests --patch FILE --interleave*",
                                 "*the stock and the patched block2mtd in turn in one boot: "
                                 "python -m pytest_folio vm --patch FILE --interleave -- -k "
                                 "race*"], consecutive=False)


def test_the_items_are_named_after_the_kernels_modules_and_folio_sizes(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--co", "-q",
                                          "--pyargs", "pytest_folio.suites.test_kernel_mtd",
                                          "--folio-orders=0,2")
    names = {ln.split("::")[-1] for ln in result.stdout.lines if "::" in ln}
    assert {f"test_kernel_mtd_{t}[{s}]" for t in KERNEL_TESTS for s in ("4K", "16K")} | {
        "test_kernel_mtd_speedtest_interleaved",
        "test_block2mtd_invalidate_race_interleaved"} == names


def fake_block2mtd_sys(root: Path, names: list[str]) -> None:
    for n, name in enumerate(names):
        d = root / "class/mtd" / f"mtd{n}"
        d.mkdir(parents=True, exist_ok=True)
        for attr, value in (("name", name), ("size", "1048576"), ("erasesize", "65536"),
                            ("writesize", "1")):
            (d / attr).write_text(value + "\n")
    (root / "module/block2mtd/parameters").mkdir(parents=True, exist_ok=True)
    (root / "module/block2mtd/parameters/block2mtd").write_text("")


def test_a_swap_unloads_loads_and_attaches_each_device_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def unload(name: str) -> int:
        calls.append(f"rm {name}")
        return 0

    def load(path: Path, params: str) -> int:
        calls.append(f"load {path.name}")
        return 0

    monkeypatch.setattr(mtdtests, "unload_module", unload)
    monkeypatch.setattr(mtdtests, "load_module", load)
    fake_block2mtd_sys(tmp_path, ["block2mtd: /dev/vda"])
    devices = [KernelDevice(0, "block2mtd: /dev/vda", 1 << 20, 65536, 1, 0)]
    again = swap_block2mtd(tmp_path / "patched/block2mtd.ko", devices, tmp_path)
    assert calls == ["rm block2mtd", "load block2mtd.ko"]
    assert (tmp_path / "module/block2mtd/parameters/block2mtd").read_text() == (
        "/dev/vda,65536\n")
    assert [(d.number, d.name) for d in again] == [(0, "block2mtd: /dev/vda")]


def test_a_swap_that_brings_other_devices_back_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mtdtests, "unload_module", lambda name: 0)
    monkeypatch.setattr(mtdtests, "load_module", lambda path, params: 0)
    fake_block2mtd_sys(tmp_path, ["block2mtd: /dev/vdb"])
    devices = [KernelDevice(0, "block2mtd: /dev/vda", 1 << 20, 65536, 1, 0)]
    with pytest.raises(OSError, match="made"):
        swap_block2mtd(tmp_path / "block2mtd.ko", devices, tmp_path)


def test_a_module_that_will_not_load_stops_the_swap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mtdtests, "unload_module", lambda name: 0)
    monkeypatch.setattr(mtdtests, "load_module", lambda path, params: errno.ENOEXEC)
    with pytest.raises(OSError, match="cannot load"):
        swap_block2mtd(tmp_path / "block2mtd.ko", [], tmp_path)
