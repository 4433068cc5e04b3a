"""Power cuts: the reference block2mtd's (its page cache lost, the folio under writeback
torn as its knob says) and the checker's rules of what a cut may leave."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_folio.model.block2mtd import Block2MTD, make_reference_block2mtd
from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.model.truncate import truncate_inode_pages
from pytest_folio.mtdtests.engine import Layout
from pytest_folio.mtdtests.log import Op
from pytest_folio.mtdtests.powercut import (
    CUT,
    POWERCUT_SIZE,
    SCHEDULES,
    SYNC,
    AllowedStates,
    PowerCutFailure,
    powercut_ops,
    powercut_size,
    run_powercut,
)
from pytest_folio.targets.protocols import PowerCut, PowerCutUnit, power_cut_unit

EBS = 64 << 10
SIZE = 1 << 20


def ref(order: int, torn: str = "prefix") -> Block2MTD:
    return make_reference_block2mtd(size=SIZE, erasesize=EBS, folio_order=order, torn=torn)


def test_the_reference_offers_power_cut_and_its_unit() -> None:
    dev = ref(2)
    assert isinstance(dev, PowerCut) and isinstance(dev, PowerCutUnit)
    assert power_cut_unit(dev) == PAGE_SIZE
    assert power_cut_unit(ref(2, "whole")) == power_cut_unit(ref(2, "none")) == 4 * PAGE_SIZE


@pytest.mark.parametrize("torn", ["prefix", "whole", "none"])
def test_a_power_cut_keeps_what_was_synced_and_empties_the_cache(torn: str) -> None:
    dev = ref(2, torn)
    dev.write(0, b"\x11" * SIZE)
    dev.sync()
    dev.power_cut()
    assert not dev.mapping.folios()
    assert dev.read(0, SIZE) == b"\x11" * SIZE
    dev.write(PAGE_SIZE, b"\x22")              # still usable
    assert dev.read(PAGE_SIZE, 2) == b"\x22\x11"


@pytest.mark.parametrize("torn", ["prefix", "whole", "none"])
def test_unsynced_folios_land_old_or_new_and_only_the_torn_mode_splits_one(
        torn: str) -> None:
    """Over many cuts each 16K folio of unsynced data reads old or new per page; only
    torn=prefix ever leaves a folio part old, part new."""
    split = False
    landed = lost = 0
    for cut in range(40):
        dev = ref(2, torn)
        dev.power_cuts = cut
        dev.write(0, b"\x33" * SIZE)
        dev.power_cut()
        for folio in range(0, SIZE, 4 * PAGE_SIZE):
            pages = {dev.read(folio + p * PAGE_SIZE, PAGE_SIZE) for p in range(4)}
            assert pages <= {bytes(PAGE_SIZE), b"\x33" * PAGE_SIZE}
            split |= len(pages) == 2
            landed += b"\x33" * PAGE_SIZE in pages
            lost += bytes(PAGE_SIZE) in pages
    assert landed and lost
    assert split == (torn == "prefix")


def test_a_read_only_device_survives_a_power_cut() -> None:
    dev = make_reference_block2mtd(size=SIZE, erasesize=EBS, folio_order=0, read_only=True)
    dev.read(0, PAGE_SIZE)
    dev.power_cut()
    assert dev.read(0, PAGE_SIZE) == bytes(PAGE_SIZE)


def test_the_reference_knob_rejects_an_unknown_torn_mode() -> None:
    with pytest.raises(ValueError, match="torn must be one of prefix, whole, none"):
        ref(0, "half")


# -- the rules ------------------------------------------------------------------------

def test_a_synced_unit_must_read_back_exactly() -> None:
    states = AllowedStates(bytes(2 * PAGE_SIZE), PAGE_SIZE)
    states.change(10, b"\x01", "op 0: write")
    states.sync("synced by op 1")
    got = bytearray(2 * PAGE_SIZE)
    assert states.check(bytes(got)) == (
        "byte 0xa read 0x00, allowed 0x01 (synced by op 1)")
    got[10] = 1
    assert states.check(bytes(got)) is None


def test_an_unsynced_unit_reads_any_state_it_had_since_the_sync() -> None:
    states = AllowedStates(bytes(PAGE_SIZE), PAGE_SIZE)
    states.change(0, b"\x01", "op 0")
    states.change(0, b"\x02", "op 1")
    for value in (0, 1, 2):
        assert states.check(bytes([value]) + bytes(PAGE_SIZE - 1)) is None
    assert states.check(b"\x03" + bytes(PAGE_SIZE - 1)) == (
        "byte 0x0 read 0x03, allowed 0x00 (its content before the first operation) or "
        "0x01 (op 0) or 0x02 (op 1)")


def test_a_unit_mixing_two_of_its_states_is_torn() -> None:
    states = AllowedStates(bytes(PAGE_SIZE), PAGE_SIZE)
    states.change(0, b"\x01" * PAGE_SIZE, "op 0")
    mixed = b"\x01" * 100 + bytes(PAGE_SIZE - 100)
    problem = states.check(mixed)
    assert problem is not None and "mixes its states" in problem


def test_a_cut_names_the_op_it_followed_and_stops_the_run() -> None:
    class LosesSyncs(Block2MTD):
        def sync(self) -> None:
            pass

        def power_cut(self) -> None:        # the flusher never got to it
            truncate_inode_pages(self.mapping, 0)

    dev = LosesSyncs(ref(0).bdev, EBS)
    layout = dataclasses.replace(Layout.of(dev, PAGE_SIZE), size=SIZE)
    ops = [Op("write", 0, 5, "ff"), SYNC, CUT, Op("write", 0, 5, "00")]
    with pytest.raises(PowerCutFailure) as failure:
        run_powercut(dev, layout, ops)
    assert failure.value.at == 2 and failure.value.ops == ops[:3]
    assert failure.value.summary == (
        "power cut at op 2, after op 1 (sync): byte 0x0 read 0x00, allowed 0xff "
        "(synced by op 1)")


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_each_schedule_ends_every_round_with_a_cut_where_it_says(schedule: str) -> None:
    dev = ref(2)
    layout = Layout.of(dev, 4 * PAGE_SIZE)
    ops = powercut_ops(layout, 3, 10, schedule)
    cuts = [i for i, op in enumerate(ops) if op.kind == "cut"]
    assert len(cuts) == 10 and cuts[-1] == len(ops) - 1
    before = {ops[i - 1].kind for i in cuts}
    assert before == {"sync"} if schedule == "sync" else "sync" not in before
    assert run_powercut(dev, layout, ops) == 10


def test_a_run_opens_the_whole_device_with_a_partial_last_folio_where_it_can() -> None:
    mib = 1 << 20
    assert powercut_size(2 * mib, 128 << 10, 16 << 10) == 2 * mib          # eb >= folio
    assert powercut_size(2 * mib, 4 << 10, 16 << 10) == 2 * mib - (4 << 10)  # partial
    assert powercut_size(16 * mib, 128 << 10, 16 << 10) == POWERCUT_SIZE
    assert powercut_size(16 * mib, 16 << 10, 64 << 10) == POWERCUT_SIZE - (16 << 10)
    assert powercut_size(64 << 10, 64 << 10, 2 << 20) == 64 << 10      # no smaller one


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_every_run_writes_the_devices_last_byte_first_and_reaches_past_1_mib(
        schedule: str) -> None:
    dev = make_reference_block2mtd(size=2 << 20, erasesize=4096, folio_order=2)
    layout = Layout.of(dev, 4 * PAGE_SIZE)
    for seed in range(5):
        ops = powercut_ops(layout, seed, 12, schedule)
        first = ops[0]
        assert first.kind == "write" and first.offset + first.length == dev.size
        assert max(op.offset + op.length for op in ops if op.kind != "sync") > 1 << 20
