"""``vm --power-cut``: a power cut of the guest, checked on the kernel's block2mtd or,
with ``--fs xfs|ext4``, on a real file system.

Two boots on the same disk images. The first (the *cut* boot) writes, erases and syncs
the whole of every block2mtd device, its end included, from the run's seed (the operations of
the MTD power-cut suite, :func:`~pytest_folio.mtdtests.powercut.powercut_ops`, with the
cut at the end), keeps every ``/dev/mtdN`` open (closing one syncs it), records the
operations on the results share and says so on the console; the host kills qemu on that
line, so the guest's page cache, dirty folios included, is lost, while what the guest
had written to its virtual disks stays (qemu's ``cache=unsafe`` writes are in the
host's page cache, which outlives qemu). The second (the *check* boot) replays the
operations on :class:`~pytest_folio.mtdtests.powercut.AllowedStates` and reads every
byte back: what was synced exactly, the rest old or new per page. This is the host's
side; the guest's is :mod:`pytest_folio.mtdtests.guest`. With ``--fs`` the same
two boots run :mod:`pytest_folio.fsx.guest` on the scratch file systems: the
file-system power-cut suite's writes, truncates, renames and fsyncs, then, after the
mount's log recovery, every name, size and page checked.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_folio.vm import VMError
from pytest_folio.vm.guest import Console
from pytest_folio.vm.initramfs import GuestJob, build_initramfs
from pytest_folio.vm.qemu import Machine, qemu_command, run_guest
from pytest_folio.vmabi import CUT_MARK, POWERCUT_ENV

if TYPE_CHECKING:
    from pytest_folio.vm.runner import VMRun

DEFAULT_ARGS = ["--pyargs", "pytest_folio.suites.test_kernel_powercut", "-rP"]
# with --fs xfs|ext4: the scratch file systems' power cut instead of block2mtd's
FS_DEFAULT_ARGS = ["--pyargs", "pytest_folio.suites.test_kernel_fs_powercut", "-rP"]


def default_args(fs: str) -> list[str]:
    """What ``vm --power-cut`` runs when given no pytest arguments: one cut per cycle,
    of block2mtd, or with a scratch ``fs`` of that file system."""
    return list(DEFAULT_ARGS if fs == "ramfs" else FS_DEFAULT_ARGS)


def cut_and_check(run: VMRun, qemu: str, machine: Machine, busybox: Path,
                  modules: list[tuple[str, bytes]], job: GuestJob) -> int:
    """Boot to the cut, kill qemu on the guest's line, boot again to check; the check
    boot's pytest exit status."""
    def initrd(phase: str) -> None:
        phased = dataclasses.replace(job, env={**job.env, POWERCUT_ENV: phase})
        machine.initrd.write_bytes(build_initramfs(busybox, modules, phased))

    initrd("cut")
    accel = run.accelerators()[-1]  # the cut boot takes no KVM fallback: TCG unless asked
    console = Console(run.out, run.err, run.opts.console)
    run.progress(f"power cut: the first boot writes and is killed ({accel.upper()})")
    start = time.monotonic()
    result = run_guest(qemu_command(qemu, dataclasses.replace(machine, accel=accel)),
                       console, timeout=run.opts.timeout, done=console.done,
                       stop=lambda: CUT_MARK in console.marks)
    cut = time.monotonic() - start
    if CUT_MARK not in console.marks:
        if "error" in console.marks:
            raise VMError(f"guest: {console.marks['error'].strip()}")
        raise VMError(f"the cut boot ended ({result.ended}) without reaching the power "
                      f"cut; last console line: {console.last_line()}")
    run.progress(f"power cut: qemu killed {cut:.1f} s after it started "
                 f"({console.marks[CUT_MARK].strip()}); booting again to check")
    initrd("check")
    start = time.monotonic()
    status = run.boot(qemu, machine)
    run.progress(f"power cut: one cut-and-check cycle took {cut + time.monotonic() - start:.1f}"
                 f" s (the cut boot {cut:.1f} s, the check boot "
                 f"{time.monotonic() - start:.1f} s)")
    return status
