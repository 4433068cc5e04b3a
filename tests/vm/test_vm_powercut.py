"""``vm --power-cut``: the cut boot's run and the check boot's replay, on model devices
standing in for /dev/mtdN; the host's kill on the guest's line; and one real pair of
boots (``vm_boot``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_folio.cli import main
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.model.block2mtd import Block2MTD, make_reference_block2mtd
from pytest_folio.mtdtests import guest as powercut
from pytest_folio.mtdtests.guest import (
    LOG_NAME,
    check_after_cut,
    cut_ops,
    device_layout,
    run_until_cut,
)
from pytest_folio.mtdtests.kernel_modules import KernelDevice
from pytest_folio.vm.qemu import run_guest
from pytest_folio.vmabi import POWERCUT_ENV
from tests.vm.test_vm_boot import MISSING, leftover_qemus
from tests.vm.test_vm_qemu import script

SIZE, ERASESIZE = 4 << 20, 128 << 10


class CloseWithoutSync(Block2MTD):
    """A /dev/mtdN whose close drops the cache instead of syncing it (an mtdchar release
    that forgets mtd_sync): nothing but a power cut tells it apart."""

    def reopen(self) -> None:
        self.power_cut()


def _devices(monkeypatch: pytest.MonkeyPatch, make: type[Block2MTD] = Block2MTD
             ) -> tuple[list[KernelDevice], dict[str, Block2MTD]]:
    """Model block2mtd devices at 4K, 16K and 64K folios, opened by path as the guest
    opens /dev/mtdN."""
    kernel, models = [], {}
    for number, order in enumerate((0, 2, 4)):
        ref = make_reference_block2mtd(size=SIZE, erasesize=ERASESIZE, folio_order=order)
        dev = make(ref.bdev, ERASESIZE)
        kernel.append(KernelDevice(number, dev.name, SIZE, ERASESIZE, 1, order))
        models[kernel[-1].path] = dev
    monkeypatch.setattr(powercut, "open_mtd_char", lambda path, **_: models[str(path)])
    return kernel, models


def _cut_and_check(devices: list[KernelDevice], models: dict[str, Block2MTD], out: Path,
                   seed: int) -> list[powercut.CheckResult]:
    run_until_cut(devices, seed, out)
    for dev in models.values():
        dev.power_cut()
    return [check_after_cut(f"{PAGE_SIZE << d.folio_order >> 10}K", out)
            for d in devices if d.folio_order is not None]


def test_cut_ops_end_unsynced_and_repeat_for_the_seed() -> None:
    dev = make_reference_block2mtd(size=SIZE, erasesize=ERASESIZE, folio_order=2)
    layout = device_layout(dev, 2)  # type: ignore[arg-type]
    ops = cut_ops(layout, 7)
    assert ops == cut_ops(layout, 7) != cut_ops(layout, 8)
    assert "cut" not in {op.kind for op in ops}
    assert {"write", "sync"} <= {op.kind for op in ops}
    assert ops[-1].kind != "sync"  # the cut falls after unsynced changes
    assert all(op.offset + op.length <= layout.size for op in ops)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_correct_device_passes_after_the_cut(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path, seed: int) -> None:
    devices, models = _devices(monkeypatch)
    results = _cut_and_check(devices, models, tmp_path, seed)
    assert [r.problem for r in results] == [None, None, None]
    assert "4K folios" in results[0].summary and "64K folios" in results[2].summary
    # the cut lost something: some page changed after the last sync reads as synced
    assert any(re.search(r"of [1-9]\d* changed since, [1-9]\d* read as synced", r.summary)
               for r in results), [r.summary for r in results]


def test_a_close_that_does_not_sync_is_caught(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    # the flusher may have written everything back before the cut: over three seeds
    # every folio size is caught, each time naming the sync that did not hold
    caught = set()
    for seed in (1, 2, 3):
        devices, models = _devices(monkeypatch, CloseWithoutSync)
        out = tmp_path / str(seed)
        out.mkdir()
        for d, r in zip(devices, _cut_and_check(devices, models, out, seed), strict=True):
            if r.problem is not None:
                assert "(synced by op" in r.problem and f"seed {seed}:" in r.problem
                caught.add(d.folio_order)
    assert caught == {0, 2, 4}


def test_a_byte_changed_on_the_store_is_caught(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    devices, models = _devices(monkeypatch)
    run_until_cut(devices, 1, tmp_path)
    dev = models[devices[0].path]
    dev.power_cut()
    last = device_layout(dev, 0).size - 1  # type: ignore[arg-type]
    dev.write(last, bytes([dev.read(last, 1)[0] ^ 0x5A]))  # a stray write, synced
    dev.sync()
    result = check_after_cut("4K", tmp_path)
    assert result.problem is not None and f"byte {last:#x} read" in result.problem


def test_the_check_without_the_cut_boot_log_says_so(tmp_path: Path) -> None:
    with pytest.raises(powercut.MTDTestError, match=f"no {LOG_NAME} on the results share"):
        check_after_cut("4K", tmp_path)


def test_the_host_kills_the_guest_on_its_cut_line(tmp_path: Path) -> None:
    cmd = script(tmp_path, "print('@@folio-vm powercut 3 written', flush=True); "
                           "time.sleep(60)")
    seen: list[str] = []
    result = run_guest(cmd, seen.append, timeout=60, stop=lambda: bool(seen))
    assert result.ended == "stopped" and result.elapsed < 10


def test_power_cut_defaults_to_the_kernel_power_cut_suite(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, list[str]] = {}
    monkeypatch.setattr("pytest_folio.vm.runner.VMRun.execute",
                        lambda self: seen.setdefault("args", self.opts.pytest_args) and 0)
    assert main(["vm", "--power-cut"]) == 0
    assert seen["args"] == ["--pyargs", "pytest_folio.suites.test_kernel_powercut", "-rP"]


def suite_run(module: str, *args: str, guest: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
    """The suite ``module`` run on the host, in a guest's environment ``guest`` only
    when given."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_FOLIO_VM",
                                                            POWERCUT_ENV)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_folio",
         "--pyargs", module, "-rs", "-q", *args],
        env={**env, **(guest or {})}, capture_output=True, text=True, timeout=120)


def outside_the_vm(module: str) -> str:
    """pytest's output for the suite ``module`` run on the host, which must pass."""
    proc = suite_run(module)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_suite_skips_outside_the_vm() -> None:
    out = outside_the_vm("pytest_folio.suites.test_kernel_powercut")
    assert "python -m pytest_folio vm --power-cut" in out
    assert re.search(r"\b4 skipped\b", out), out


@pytest.mark.slow
@pytest.mark.vm_boot
@pytest.mark.skipif(MISSING is not None, reason=str(MISSING))
def test_real_power_cut_keeps_what_the_kernel_synced(tmp_path: Path) -> None:
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_folio", "vm", "--power-cut", "--mtd-size", "4M",
         "--timeout", "400", "--", "--pyargs", "pytest_folio.suites.test_kernel_powercut",
         "-rP", "--folio-orders=0", "--folio-seed=1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "folio-vm: power cut: qemu killed" in proc.stderr
    assert re.search(r"/dev/mtd0 \(4K folios\): \d+ operations, then the power cut",
                     proc.stdout), proc.stdout
    assert "1 passed" in proc.stdout
    assert leftover_qemus() == []
