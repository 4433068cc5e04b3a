"""A power cut of a real kernel: ``python -m pytest_folio vm --power-cut``.

Two boots on the same disks. In the first, ``test_kernel_power_cut_writes_then_cuts``
writes, erases and syncs every block2mtd device from the run's seed and asks the host to
kill qemu (the guest's page cache is lost, what reached the virtual disks stays); in the
second, ``test_kernel_power_cut_keeps_synced_data_reads_the_rest_old_or_new`` checks each
device, at its folio order, against the MTD power-cut rules: what was synced reads back
exactly, each page changed since reads as one of its states since. Outside that run
both skip and say how to run them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.mtdtests.common import MTDTestError
from pytest_folio.mtdtests.guest import check_after_cut, run_until_cut
from pytest_folio.mtdtests.kernel_modules import kernel_mtd_devices
from pytest_folio.powercut import NOT_IN_VM, announce_cut, vm_phase
from pytest_folio.sizes import format_size
from pytest_folio.suites.mtd.base import run_seed
from pytest_folio.vmabi import GUEST_OUT

FOLIO_KIND = "mtd"      # flash tests: deselected when only --folio-fs is named


def _phase() -> str:
    phase = vm_phase()
    if phase is None:
        pytest.skip(NOT_IN_VM)
    return phase


def test_kernel_power_cut_writes_then_cuts(request: pytest.FixtureRequest) -> None:
    if _phase() != "cut":
        pytest.skip("this boot checks what the power cut of the boot before left")
    devices = [d for d in kernel_mtd_devices() if d.folio_order is not None]
    if not devices:
        pytest.fail("the guest has no block2mtd device to cut the power of")
    opened = run_until_cut(devices, run_seed(request.config), Path(GUEST_OUT))
    announce_cut(f"{len(opened)} block2mtd devices written, "
                 f"seed {run_seed(request.config)}")


def test_kernel_power_cut_keeps_synced_data_reads_the_rest_old_or_new(
        folio_order: int, request: pytest.FixtureRequest) -> None:
    if _phase() != "check":
        pytest.skip("this boot writes and is cut; the next one checks")
    folio = format_size(PAGE_SIZE << folio_order)
    devices = [d for d in kernel_mtd_devices() if d.folio_order == folio_order]
    if not devices:
        pytest.skip(f"kernel {os.uname().release} has no block2mtd device with {folio} "
                    "folios")
    try:
        result = check_after_cut(folio, Path(GUEST_OUT))
    except MTDTestError as exc:
        pytest.fail(str(exc))
    request.node.add_report_section("call", "power cut", result.summary)
    assert result.problem is None, f"{result.summary}\n{result.problem}"
