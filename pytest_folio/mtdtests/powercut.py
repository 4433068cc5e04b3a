"""Power cuts on MTD devices: the states a cut may leave, and runs of random writes,
erases and syncs cut at chosen points, every byte checked after each cut.

The rules (docs/powercut.md): the device is seen in units of ``unit`` bytes (a page, or
a folio where the device promises that a cut never tears one, ``power_cut_unit``). A
unit unchanged since the last sync reads back exactly. A unit changed since then reads
as one of the states it has had since: its synced state or the state after any of the
writes and erases that changed it (background writeback may have stored any of them),
never a mix inside the unit and never anything else. An erase is a write of 0xFF, so it
is done or not per unit. After a cut, what the device reads is its new synced state.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from pytest_folio.bytescmp import first_difference
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.mtdtests.common import MTDTestError
from pytest_folio.mtdtests.engine import Layout, make_data
from pytest_folio.mtdtests.log import Op
from pytest_folio.mtdtests.opgen import OpMaker
from pytest_folio.targets.protocols import MTDDevice, PowerCut, power_cut_unit

SCHEDULES = ("sync", "writes", "erases")
CUT = Op("cut")
SYNC = Op("sync")


class AllowedStates:
    """What each ``unit`` of a byte range may hold after a power cut: for a unit changed
    since the last sync, every state it has had since (the first is the synced one),
    each with how it came about; for the others, exactly what they hold."""

    def __init__(self, content: bytes, unit: int) -> None:
        self.unit = unit
        self.now = bytearray(content)
        self.since: dict[int, list[tuple[bytes, str]]] = {}
        self.synced = "its content before the first operation"

    def change(self, offset: int, data: bytes, how: str) -> None:
        """Bytes [offset, offset + len(data)) now hold ``data`` (``how``: which op)."""
        if not data:
            return
        unit, now, since = self.unit, self.now, self.since
        touched = range(offset // unit, (offset + len(data) - 1) // unit + 1)
        for u in touched:
            if u not in since:
                since[u] = [(bytes(now[u * unit:(u + 1) * unit]), self.synced)]
        now[offset:offset + len(data)] = data
        for u in touched:
            state = bytes(now[u * unit:(u + 1) * unit])
            if state != since[u][-1][0]:
                since[u].append((state, how))

    def sync(self, how: str) -> None:
        """Everything written so far is on the backing store."""
        self.since.clear()
        self.synced = how

    def allowed(self, u: int) -> list[tuple[bytes, str]]:
        unit = self.unit
        return self.since.get(u) or [(bytes(self.now[u * unit:(u + 1) * unit]), self.synced)]

    def check(self, got: bytes) -> str | None:
        """None when every unit of ``got`` is an allowed state, else what is wrong with
        the first unit that is not: the byte, what it read and what was allowed."""
        unit = self.unit
        expected = bytearray(self.now)
        for u, states in self.since.items():
            piece = got[u * unit:(u + 1) * unit]
            if any(piece == state for state, _ in states):
                expected[u * unit:(u + 1) * unit] = piece
        if expected == got:
            return None
        at = first_difference(got, expected)
        u = at // unit
        base = u * unit
        states = self.allowed(u)
        piece = got[base:base + unit]
        for i in range(at - base, unit):
            values = {state[i] for state, _ in states}
            if piece[i] not in values:
                allowed = " or ".join(f"{state[i]:#04x} ({how})" for state, how in
                                      _first_of_each(states, i))
                return f"byte {base + i:#x} read {piece[i]:#04x}, allowed {allowed}"
        # every byte is allowed alone: the unit mixes two states
        first_how = next(how for state, how in states if state[at - base] == piece[at - base])
        other = next(i for i in range(unit) if _state_of(states, first_how)[i] != piece[i])
        return (f"the {unit}-byte unit at {base:#x} mixes its states: byte {at:#x} is "
                f"as {first_how}, byte {base + other:#x} is not (a cut tore a unit the "
                f"device lands whole: its power_cut_unit, else a page; flash that programs "
                f"less at once, a NOR write-buffer line, says so with power_cut_unit)")

    def adopt(self, got: bytes) -> None:
        """After the cut the device holds ``got`` on its store: the new synced state."""
        self.now[:] = got
        self.sync("the power cut before")


def _first_of_each(states: Sequence[tuple[bytes, str]], i: int) -> list[tuple[bytes, str]]:
    seen: dict[int, tuple[bytes, str]] = {}
    for state, how in states:
        seen.setdefault(state[i], (state, how))
    return list(seen.values())


def _state_of(states: Sequence[tuple[bytes, str]], how: str) -> bytes:
    return next(state for state, h in states if h == how)


class PowerCutFailure(MTDTestError):
    """A cut left a state the rules do not allow (or the device failed an operation).

    ``ops`` is the run up to and including the failing cut, ``at`` its index."""

    def __init__(self, summary: str, ops: list[Op], at: int) -> None:
        super().__init__(summary)
        self.summary = summary
        self.ops = list(ops)
        self.at = at


def powercut_ops(layout: Layout, seed: int, rounds: int, schedule: str) -> list[Op]:
    """``rounds`` rounds of random writes and erases over ``layout``, each ending in a
    power cut at the point ``schedule`` names: ``sync``, right after a sync; ``writes``,
    after a sync and one to three more writes or erases (or, one round in four, with no
    sync at all); ``erases``, the same with erases as often as writes. A sync is checked
    by the next cut, before much of it can be overwritten."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}")
    rng = random.Random(seed)
    make = OpMaker(layout, rng)
    erase_share = 0.5 if schedule == "erases" else 0.2

    def changes(low: int, high: int) -> list[Op]:
        return [make.erase() if rng.random() < erase_share else make.rw("write")
                for _ in range(rng.randint(low, high))]

    ops: list[Op] = [last_bytes(layout, rng)]
    for _ in range(rounds):
        ops += changes(2, 6)
        if schedule == "sync" or rng.random() < 0.75:
            ops.append(SYNC)
        if schedule != "sync":
            ops += changes(1, 3)
        ops.append(CUT)
    return ops


def last_bytes(layout: Layout, rng: random.Random) -> Op:
    """A write that ends at the device's last byte, whatever the seed: the first
    round's sync (or the writeback before a cut) must take it to the store whole."""
    n = min(layout.size, rng.choice((1, 2, PAGE_SIZE + 1, layout.folio, layout.erasesize)))
    end = layout.size
    start = end - n
    if layout.writesize > 1:                    # whole pages of the flash
        start = start // layout.writesize * layout.writesize
    return Op("write", start, end - start, "rand", rng.getrandbits(32))


def apply_op(dev: MTDDevice | None, states: AllowedStates, layout: Layout, i: int,
             op: Op, sync: Callable[[], None] | None = None) -> None:
    """Apply the write, erase or sync ``op`` (number ``i`` of its run) to ``dev`` and to
    ``states``; with ``dev`` None to ``states`` alone (a run whose cut happened in another
    process, checked after). ``sync`` replaces ``dev.sync`` where a device syncs otherwise
    (``/dev/mtdN`` syncs at close)."""
    how = f"op {i}: {op}"
    if op.kind == "write":
        current = bytes(states.now[op.offset:op.offset + op.length])
        data = make_data(op, current, layout.clear_only)
        if dev is not None:
            dev.write(op.offset, data)
        states.change(op.offset, data, how)
    elif op.kind == "erase":
        if dev is not None:
            dev.erase(op.offset, op.length)
        states.change(op.offset, b"\xff" * op.length, how)
    elif op.kind == "sync":
        if sync is not None:
            sync()
        elif dev is not None:
            dev.sync()
        states.sync(f"synced by op {i}")
    else:
        raise ValueError(f"a power-cut run has no {op.kind!r} operation")


def run_powercut(dev: MTDDevice, layout: Layout, ops: Sequence[Op]) -> int:
    """Apply ``ops`` to ``dev`` (all ``layout.size`` bytes of it), cutting its power at
    each ``cut`` and checking every byte; raise :class:`PowerCutFailure` at the first
    state not allowed. Returns how many cuts were checked."""
    if not isinstance(dev, PowerCut):
        raise TypeError(f"{dev.name} has no power_cut()")
    size = layout.size
    states = AllowedStates(dev.read(0, size), power_cut_unit(dev))
    cuts = 0
    for i, op in enumerate(ops):
        try:
            if op.kind == "cut":
                dev.power_cut()
                got = dev.read(0, size)
                problem = states.check(got)
                if problem is not None:
                    after = ops[i - 1] if i else None
                    where = f"after op {i - 1} ({after})" if after else "before any op"
                    raise PowerCutFailure(f"power cut at op {i}, {where}: {problem}",
                                          list(ops[:i + 1]), i)
                states.adopt(got)
                cuts += 1
            else:
                apply_op(dev, states, layout, i, op)
        except OSError as exc:
            raise PowerCutFailure(f"op {i} ({op}) failed: {exc}",
                                  list(ops[:i + 1]), i) from None
    return cuts


POWERCUT_SIZE = 4 << 20    # the largest device a power-cut run opens (each cut reads it all)


def powercut_size(dev_size: int, erasesize: int, folio: int) -> int:
    """The size of the device a power-cut run opens, all of which it writes and reads
    back at every cut: the run's device, or at most :data:`POWERCUT_SIZE` of whole
    eraseblocks (past 1 MiB, and never less than a folio), one eraseblock shorter where
    eraseblocks are smaller than a folio, so that the last folio is a partial one (a
    geometry block2mtd allows and writeback gets wrong at the end)."""
    size = dev_size
    if size > POWERCUT_SIZE:
        size = max(POWERCUT_SIZE, folio) // erasesize * erasesize or erasesize
    if erasesize < folio and size - erasesize >= folio and size % folio == 0:
        size -= erasesize
    return size
