"""A power cut of a real file system: ``python -m pytest_folio vm --power-cut --fs xfs``.

Two boots on the same disks. In the first, ``test_kernel_fs_power_cut_writes_then_cuts``
runs the file-system power-cut suite's writes, truncates, renames and fsyncs (each fsync
followed by one of the directory) in a directory of every scratch file system, from the
run's seed, and asks the host to kill qemu (the guest's page cache is lost, what reached
the virtual disks stays); in the second, after the mount's log recovery,
``test_kernel_fs_power_cut_keeps_fsynced_files_reads_the_rest_old_or_new`` checks each file
system at its block size against the file-system power-cut rules: fsync'd data, sizes and
names survive, what changed since reads old or new per 4K page, nothing is invented.
Outside that run both skip and say how to run them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_folio.fixtures.fs import fs_target
from pytest_folio.fsx.guest import (
    KernelPowerCutError,
    NamesSynced,
    check_after_cut,
    cut_directory,
    fs_type,
    run_until_cut,
)
from pytest_folio.fsx.powercut import KERNEL_RULES
from pytest_folio.powercut import NOT_IN_VM, announce_cut, vm_phase
from pytest_folio.session import settings
from pytest_folio.sizes import format_size
from pytest_folio.vmabi import GUEST_OUT

FOLIO_KIND = "fs"       # file-system tests: deselected when only --folio-mtd is named
MEMORY_ONLY = ("ramfs", "tmpfs")
NO_FS = ("the file-system power cut needs the VM's scratch file systems: "
         "python -m pytest_folio vm --power-cut --fs xfs (or ext4)")


def _phase() -> str:
    phase = vm_phase()
    if phase is None:
        pytest.skip(f"{NOT_IN_VM} --fs xfs")
    return phase


def test_kernel_fs_power_cut_writes_then_cuts(request: pytest.FixtureRequest) -> None:
    if _phase() != "cut":
        pytest.skip("this boot checks what the power cut of the boot before left")
    target = fs_target(request.config)
    if target.kind != "path" or not target.paths:
        pytest.fail(NO_FS, pytrace=False)
    in_memory = [f"{path} is {kind}" for path in target.paths.values()
                 if (kind := fs_type(path)) in MEMORY_ONLY]
    if in_memory:
        pytest.fail(f"{NO_FS}: {', '.join(in_memory)}, which keeps nothing on a disk",
                    pytrace=False)
    file_systems = {format_size(size): NamesSynced(cut_directory(path))
                    for size, path in sorted(target.paths.items())}
    seed = settings(request.config).seed
    run_until_cut(file_systems, seed, Path(GUEST_OUT))
    announce_cut(f"{len(file_systems)} file system(s) written, seed {seed}")


def test_kernel_fs_power_cut_keeps_fsynced_files_reads_the_rest_old_or_new(
        block_size: int, request: pytest.FixtureRequest) -> None:
    if _phase() != "check":
        pytest.skip("this boot writes and is cut; the next one checks")
    try:
        result = check_after_cut(format_size(block_size), Path(GUEST_OUT),
                                 rules=settings(request.config).power_cut_rules
                                 or KERNEL_RULES)
    except KernelPowerCutError as exc:
        pytest.fail(str(exc), pytrace=False)
    request.node.add_report_section("call", "power cut", result.summary)
    assert result.problem is None, f"{result.summary}\n{result.problem}"
