"""A power cut of a real kernel, the guest's side (``vm --power-cut``): the cut boot's
writes, erases and syncs on every block2mtd device and its log, and the check boot's
replay of that log against what the devices read back. The host's side (two boots, qemu
killed at the cut) is :mod:`pytest_folio.vm.powercut`; the suite is
``suites/test_kernel_powercut.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.mtdtests.common import MTDTestError
from pytest_folio.mtdtests.engine import Layout
from pytest_folio.mtdtests.kernel_modules import KernelDevice
from pytest_folio.mtdtests.log import Op, parse_op
from pytest_folio.mtdtests.powercut import AllowedStates, apply_op, powercut_ops
from pytest_folio.powercut import CheckResult, read_cut_log, write_cut_log
from pytest_folio.sizes import format_size, parse_size
from pytest_folio.targets.mtdchar import MTDChar, open_mtd_char

LOG_NAME = "powercut.json"
ROUNDS = 4           # rounds of the suite's "writes" schedule, the cuts between left out


def cut_ops(layout: Layout, seed: int) -> list[Op]:
    """The cut boot's operations: :data:`ROUNDS` rounds of writes and erases, most
    ending in a sync and a few more changes; one boot makes one cut, at the end."""
    return [op for op in powercut_ops(layout, seed, ROUNDS, "writes") if op.kind != "cut"]


def device_layout(dev: MTDChar, folio_order: int) -> Layout:
    """The whole device, its end included."""
    return Layout.of(dev, PAGE_SIZE << folio_order)


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
    write_cut_log(out / LOG_NAME, log)
    return opened


def check_after_cut(folio: str, out: Path) -> CheckResult:
    """The check boot: replay the cut boot's log of the device with ``folio``-sized
    folios (its label, "16K") on the model and read the device back."""
    log = read_cut_log(out / LOG_NAME)
    if log is None:
        raise MTDTestError(f"no {LOG_NAME} on the results share: the cut boot wrote no log")
    entry = log["devices"].get(folio)
    if entry is None:
        raise MTDTestError(f"the cut boot wrote no {folio} device (it had "
                      f"{', '.join(log['devices']) or 'none'})")
    ops = [parse_op(line) for line in entry["ops"]]
    dev = open_mtd_char(entry["path"])
    try:
        layout = Layout.of(dev, parse_size(folio))
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
