"""``vm --power-cut``: a power cut of the guest, checked on the kernel's block2mtd.

Two boots on the same disk images. The first (the *cut* boot) writes, erases and syncs
the first eraseblocks of every block2mtd device from the run's seed (the operations of
the MTD power-cut suite, :func:`~pytest_folio.mtdtests.powercut.powercut_ops`, with the
cut at the end), keeps every ``/dev/mtdN`` open (closing one syncs it), records the
operations on the results share and says so on the console; the host kills qemu on that
line, so the guest's page cache, dirty folios included, is lost, while what the guest
had written to its virtual disks stays (qemu's ``cache=unsafe`` writes are in the
host's page cache, which outlives qemu). The second (the *check* boot) replays the
operations on :class:`~pytest_folio.mtdtests.powercut.AllowedStates` and reads every
byte back: what was synced exactly, the rest old or new per page.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_folio.constants import PAGE_SIZE
from pytest_folio.mtdtests.kernel_modules import KernelDevice
from pytest_folio.mtdtests.mtdops import Op, parse_op
from pytest_folio.mtdtests.ops import Layout
from pytest_folio.mtdtests.powercut import AllowedStates, apply_op, powercut_ops, region_size
from pytest_folio.sizes import format_size
from pytest_folio.targets.mtdchar import MTDChar, open_mtd_char
from pytest_folio.vm import VMError
from pytest_folio.vm.guest import Console
from pytest_folio.vm.initramfs import MARK, GuestJob, build_initramfs
from pytest_folio.vm.qemu import Machine, qemu_command, run_guest

if TYPE_CHECKING:
    from pytest_folio.vm.runner import VMRun

POWERCUT_ENV = "PYTEST_FOLIO_POWERCUT"  # "cut" in the first boot, "check" in the second
PHASES = ("cut", "check")
CUT_MARK = "powercut"                   # the console line the host kills qemu on
LOG_NAME = "powercut.json"
ROUNDS = 4           # rounds of the suite's "writes" schedule, the cuts between left out
CUT_WAIT = 600.0     # how long the cut boot waits to be killed before it fails
DEFAULT_ARGS = ["--pyargs", "pytest_folio.suites.test_kernel_powercut", "-rP"]


def cut_ops(layout: Layout, seed: int) -> list[Op]:
    """The cut boot's operations: :data:`ROUNDS` rounds of writes and erases, most
    ending in a sync and a few more changes; one boot makes one cut, at the end."""
    return [op for op in powercut_ops(layout, seed, ROUNDS, "writes") if op.kind != "cut"]


def device_layout(dev: MTDChar, folio_order: int) -> Layout:
    folio = PAGE_SIZE << folio_order
    return dataclasses.replace(Layout.of(dev, folio), size=region_size(dev, folio))


def run_until_cut(devices: Sequence[KernelDevice], seed: int, out: Path) -> list[MTDChar]:
    """The cut boot: run :func:`cut_ops` on every block2mtd device and write the log
    (``out``: the results share). The devices are returned open: closing ``/dev/mtdN``
    syncs block2mtd, so they must stay open until the power goes."""
    log: dict[str, object] = {"seed": seed, "devices": {}}
    opened = []
    for d in devices:
        if d.folio_order is None:
            continue
        dev = open_mtd_char(d.path, allow_destructive=True)
        opened.append(dev)
        layout = device_layout(dev, d.folio_order)
        before = dev.read(0, layout.size)
        saved = out / f"powercut-mtd{d.number}.before"
        saved.write_bytes(before)
        states = AllowedStates(before, PAGE_SIZE)
        ops = cut_ops(layout, seed)
        for i, op in enumerate(ops):
            # /dev/mtdN has no fsync: its close syncs block2mtd (sync_blockdev)
            apply_op(dev, states, layout, i, op, sync=dev.reopen)
        devices_log = log["devices"]
        assert isinstance(devices_log, dict)
        devices_log[format_size(PAGE_SIZE << d.folio_order)] = {
            "path": d.path, "size": layout.size, "before": saved.name,
            "ops": [str(op) for op in ops]}
    with (out / LOG_NAME).open("w") as f:
        json.dump(log, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    return opened


def announce_cut(text: str, console: str = "/dev/console") -> None:
    """Tell the host to cut the power now (one MARK line on the console), then wait for
    it; raise when it never comes (the test was run outside ``vm --power-cut``)."""
    fd = os.open(console, os.O_WRONLY | os.O_NOCTTY)
    try:
        os.write(fd, f"\n{MARK} {CUT_MARK} {text}\n".encode())
    finally:
        os.close(fd)
    time.sleep(CUT_WAIT)
    raise AssertionError(f"the power was not cut within {CUT_WAIT:g} s of asking")


@dataclasses.dataclass
class CheckResult:
    """What one device read back after the cut: the first state not allowed (None when
    every page is allowed) and what the pages read, for the report."""

    problem: str | None
    summary: str


def check_after_cut(folio: str, device: KernelDevice, out: Path) -> CheckResult:
    """The check boot: replay the cut boot's log of the device with ``folio``-sized
    folios on the model and read the device back."""
    log_path = out / LOG_NAME
    if not log_path.is_file():
        raise VMError(f"no {LOG_NAME} on the results share: the cut boot wrote no log")
    log = json.loads(log_path.read_text())
    entry = log["devices"].get(folio)
    if entry is None:
        raise VMError(f"the cut boot wrote no {folio} device (it had "
                      f"{', '.join(log['devices']) or 'none'})")
    ops = [parse_op(line) for line in entry["ops"]]
    dev = open_mtd_char(entry["path"])
    try:
        assert device.folio_order is not None
        layout = device_layout(dev, device.folio_order)
        states = AllowedStates((out / entry["before"]).read_bytes(), PAGE_SIZE)
        for i, op in enumerate(ops):
            apply_op(None, states, layout, i, op)
        got = dev.read(0, entry["size"])
    finally:
        dev.close()
    problem = states.check(got)
    if problem is not None:
        problem = (f"power cut after op {len(ops) - 1} ({ops[-1]}) of seed "
                   f"{log['seed']}: {problem}")
    return CheckResult(problem, _summary(entry["path"], folio, states, got, len(ops)))


def _summary(path: str, folio: str, states: AllowedStates, got: bytes, nops: int) -> str:
    unit = states.unit
    counts = {"synced": 0, "last": 0, "between": 0}
    for u, allowed in states.since.items():
        piece = got[u * unit:(u + 1) * unit]
        if piece == allowed[0][0]:
            counts["synced"] += 1
        elif piece == allowed[-1][0]:
            counts["last"] += 1
        elif any(piece == state for state, _ in allowed):
            counts["between"] += 1
    exact = len(got) // unit - len(states.since)
    return (f"{path} ({folio} folios): {nops} operations, then the power cut; "
            f"{format_size(len(got))} read back in {format_size(unit)} pages: {exact} "
            f"unchanged since the last sync read exactly; of {len(states.since)} changed "
            f"since, {counts['synced']} read as synced (the change lost), "
            f"{counts['last']} as their last change, {counts['between']} as an earlier one")


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
