"""Every rule of the reference block2mtd, on both code paths and several folio sizes."""

from __future__ import annotations

import errno
import random
from collections.abc import Callable

import pytest

from pytest_folio.model.block2mtd import Block2MTD, make_reference_block2mtd
from pytest_folio.model.blockdev import BlockDevice
from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.targets.protocols import (
    MTD_CAP_RAM,
    MTD_RAM,
    MTD_WRITEABLE,
    MTDDevice,
)

EBS = 128 << 10
SIZE = 1 << 20
PAGES_PER_EB = EBS // PAGE_SIZE
PATTERN = bytes(random.Random(3).randrange(255) for _ in range(EBS))  # never a 0xFF page

APIS = ["page", "folio"]
ORDERS = [0, 2, 4]

Make = Callable[..., Block2MTD]


@pytest.fixture
def make() -> Make:
    def make(api: str = "folio", order: int = 0, retry: bool = True,
             size: int = SIZE) -> Block2MTD:
        return make_reference_block2mtd(size=size, erasesize=EBS, folio_order=order,
                                         api=api, retry=retry)
    return make


def _dirty(dev: Block2MTD) -> list[int]:
    return [f.index for f in dev.mapping.folios() if f.dirty]


# -- geometry --------------------------------------------------------------------------

@pytest.mark.parametrize("api", APIS)
def test_geometry_is_the_drivers(make: Make, api: str) -> None:
    dev = make(api)
    assert isinstance(dev, MTDDevice)
    assert (dev.type, dev.flags) == (MTD_RAM, MTD_CAP_RAM)
    assert (dev.size, dev.erasesize) == (SIZE, EBS)
    assert (dev.writesize, dev.writebufsize, dev.oobsize) == (1, PAGE_SIZE, 0)
    assert dev.name == "block2mtd: ram-4k"


def test_size_is_cut_to_whole_pages_and_erasesize_must_divide_the_device() -> None:
    bdev = BlockDevice(3 * PAGE_SIZE + 1024, logical_block_size=512, name="sdz")
    dev = Block2MTD(bdev, 512)
    assert dev.size == 3 * PAGE_SIZE and dev.name == "block2mtd: sdz"
    with pytest.raises(ValueError, match="must be a divisor of the device size"):
        Block2MTD(BlockDevice(SIZE), 3 * PAGE_SIZE)
    with pytest.raises(ValueError, match="api must be one of folio, page"):
        Block2MTD(BlockDevice(SIZE), EBS, api="pages")


def test_read_only_device_gives_erofs_and_still_reads() -> None:
    dev = Block2MTD(BlockDevice(SIZE, read_only=True), EBS)
    assert dev.flags == MTD_CAP_RAM & ~MTD_WRITEABLE
    for call in (lambda: dev.write(0, b"x"), lambda: dev.erase(0, EBS)):
        with pytest.raises(OSError) as info:
            call()
        assert info.value.errno == errno.EROFS
    assert dev.read(0, 4) == bytes(4)


@pytest.mark.parametrize("api", APIS)
def test_out_of_range_is_einval(make: Make, api: str) -> None:
    dev = make(api)
    for call in (lambda: dev.read(SIZE - 1, 2), lambda: dev.read(-1, 1),
                 lambda: dev.write(SIZE, b"x"), lambda: dev.write(SIZE - 1, b"xy"),
                 lambda: dev.erase(SIZE, EBS), lambda: dev.erase(EBS, SIZE)):
        with pytest.raises(OSError) as info:
            call()
        assert info.value.errno == errno.EINVAL
    assert dev.read(SIZE, 0) == b""
    dev.write(SIZE - 1, b"z")
    assert dev.read(SIZE - 1, 1) == b"z"


# -- data rules ----------------------------------------------------------------------

@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("api", APIS)
def test_unaligned_writes_and_reads_round_trip(make: Make, api: str, order: int) -> None:
    dev = make(api, order)
    rng = random.Random(order)
    shadow = bytearray(SIZE)
    for _ in range(40):
        offset = rng.randrange(SIZE)
        data = rng.randbytes(rng.randrange(1, min(SIZE - offset, 3 * EBS) + 1))
        dev.write(offset, data)
        shadow[offset:offset + len(data)] = data
    assert dev.read(0, SIZE) == shadow
    offset = rng.randrange(SIZE - 70000)
    assert dev.read(offset, 70000) == shadow[offset:offset + 70000]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("api", APIS)
def test_erase_writes_only_pages_that_are_not_erased(make: Make, api: str,
                                                     order: int) -> None:
    dev = make(api, order)
    dev.erase(0, SIZE)                        # a fresh device holds zeroes: every page
    assert dev.stats.erase_pages_written == SIZE // PAGE_SIZE
    assert dev.read(0, SIZE) == b"\xff" * SIZE
    dev.sync()
    dev.stats.reset()
    dev.erase(0, SIZE)                        # already erased: nothing written or dirtied
    assert (dev.stats.erase_pages_written, dev.stats.erase_pages_skipped) == (
        0, SIZE // PAGE_SIZE)
    assert _dirty(dev) == []
    dev.write(EBS + 5 * PAGE_SIZE + 7, b"\x00")  # one page of the second block
    dev.sync()
    dev.stats.reset()
    dev.erase(EBS, EBS)
    assert (dev.stats.erase_pages_written, dev.stats.erase_pages_skipped) == (
        1, PAGES_PER_EB - 1)
    folio_pages = 1 << order
    assert _dirty(dev) == [(EBS // PAGE_SIZE + 5) & ~(folio_pages - 1)]
    assert dev.read(EBS, EBS) == b"\xff" * EBS


@pytest.mark.parametrize("api", APIS)
def test_erase_is_page_granular_as_the_driver(make: Make, api: str) -> None:
    dev = make(api, 2)
    dev.write(0, bytes(3 * PAGE_SIZE))
    dev.erase(100, 2 * PAGE_SIZE)             # to >> PAGE_SHIFT, len >> PAGE_SHIFT: pages 0, 1
    assert dev.read(0, 3 * PAGE_SIZE) == b"\xff" * (2 * PAGE_SIZE) + bytes(PAGE_SIZE)
    dev.erase(0, PAGE_SIZE - 1)               # less than a page: nothing
    assert dev.stats.erase_pages_written == 2


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("api", APIS)
def test_a_write_of_the_same_bytes_dirties_nothing(make: Make, api: str, order: int) -> None:
    dev = make(api, order)
    dev.write(1000, PATTERN)
    assert _dirty(dev)
    dev.sync()
    assert _dirty(dev) == []
    dev.stats.reset()
    dev.write(1000, PATTERN)
    assert _dirty(dev) == []
    assert dev.stats.bytes_copied == 0
    dev.write(1000 + EBS - 1, b"\x00" if PATTERN[-1] else b"\x01")  # one byte changes
    assert len(_dirty(dev)) == 1


@pytest.mark.parametrize("api", APIS)
def test_sync_writes_back_to_the_block_device(make: Make, api: str) -> None:
    dev = make(api, 2)
    dev.write(PAGE_SIZE, b"hello")
    assert dev.bdev.read_backing(PAGE_SIZE, 5) == bytes(5)
    dev.sync()
    assert dev.bdev.read_backing(PAGE_SIZE, 5) == b"hello"
    dev.erase(0, EBS)
    dev.close()                               # as module exit: synced before it goes
    assert dev.bdev.read_backing(PAGE_SIZE, 5) == b"\xff" * 5


@pytest.mark.parametrize("order", ORDERS)
def test_both_paths_are_byte_identical(make: Make, order: int) -> None:
    devs = [make("page", order), make("folio", order)]
    rng = random.Random(1000 + order)
    for _ in range(120):
        op = rng.choice(["write", "write", "erase", "read", "sync"])
        if op == "write":
            offset = rng.randrange(SIZE)
            data = rng.choice([rng.randbytes, lambda n: b"\xff" * n])(
                rng.randrange(1, min(SIZE - offset, 2 * EBS) + 1))
            for dev in devs:
                dev.write(offset, data)
        elif op == "erase":
            block = rng.randrange(SIZE // EBS)
            count = rng.randrange(1, SIZE // EBS - block + 1)
            for dev in devs:
                dev.erase(block * EBS, count * EBS)
        elif op == "read":
            offset = rng.randrange(SIZE)
            length = rng.randrange(SIZE - offset + 1)
            assert devs[0].read(offset, length) == devs[1].read(offset, length)
        else:
            for dev in devs:
                dev.sync()
    for dev in devs:
        dev.sync()
    assert devs[0].read(0, SIZE) == devs[1].read(0, SIZE)
    assert devs[0].bdev.read_backing(0, SIZE) == devs[1].bdev.read_backing(0, SIZE)
    page, folio = (d.stats.snapshot() for d in devs)
    # the same folios get dirty and written back (bytes_copied may differ: a folio whose
    # bytes changed in one page is copied whole by the folio path)
    for counter in ("erase_pages_written", "erase_pages_skipped", "writepage"):
        assert page[counter] == folio[counter], counter


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("api", APIS)
def test_a_batch_leaves_what_the_step_by_step_loop_leaves(make: Make, api: str,
                                                          order: int) -> None:
    """Writes and erases of cached pages run as one batch; with a hook between lookup
    and lock (here one that does nothing) they loop step by step as the driver does.
    Both leave the same bytes, dirty folios and counters."""
    batched, looped = make(api, order), make(api, order)
    looped.before_lock = lambda folio: None

    def no_loop(*args: object) -> None:
        raise AssertionError("a cached, unlocked range looped instead of batching")

    rng = random.Random(2000 + order)
    for dev in (batched, looped):
        dev.read(0, SIZE)                     # every page cached: every op can batch
    batched._write = batched._erase = no_loop  # type: ignore[method-assign,assignment]
    for _ in range(150):
        op = rng.choice(["write", "rewrite", "erase", "sync"])
        if op in ("write", "rewrite"):
            offset = rng.randrange(SIZE)
            length = rng.randrange(1, min(SIZE - offset, 2 * EBS) + 1)
            data = bytearray(rng.randbytes(length))
            if op == "rewrite":               # what is there, one byte changed
                data[:] = batched.read(offset, length)
                assert looped.read(offset, length) == data
                data[rng.randrange(length)] ^= 0x5A
            for dev in (batched, looped):
                dev.write(offset, bytes(data))
        elif op == "erase":
            block = rng.randrange(SIZE // EBS)
            count = rng.randrange(1, SIZE // EBS - block + 1)
            for dev in (batched, looped):
                dev.erase(block * EBS, count * EBS)
        else:
            for dev in (batched, looped):
                dev.sync()
        assert _dirty(batched) == _dirty(looped), op
    assert batched.read(0, SIZE) == looped.read(0, SIZE)
    assert batched.stats.snapshot() == looped.stats.snapshot()


# -- compound_head: what the conversion removes -------------------------------------

def _compound_heads_per_pass(dev: Block2MTD) -> dict[str, int]:
    def each_block(op: Callable[[int], object]) -> Callable[[], None]:
        def run() -> None:
            for offset in range(0, SIZE, EBS):
                op(offset)
        return run

    passes: dict[str, Callable[[], object]] = {
        "write": each_block(lambda o: dev.write(o, PATTERN)),
        "rewrite": each_block(lambda o: dev.write(o, PATTERN)),
        "read": each_block(lambda o: dev.read(o, EBS)),
        "erase data": each_block(lambda o: dev.erase(o, EBS)),
        "erase erased": each_block(lambda o: dev.erase(o, EBS)),
        "2-page write": lambda: dev.write(PAGE_SIZE - 512, bytes(1024)),
        "2-page read": lambda: dev.read(PAGE_SIZE - 512, 1024),
    }
    dev.erase(0, SIZE)
    seen = {}
    for name, run in passes.items():
        before = dev.stats.compound_head
        run()
        seen[name] = dev.stats.compound_head - before
    return seen


@pytest.mark.parametrize("order", ORDERS)
def test_compound_head_counts_per_pass(make: Make, order: int) -> None:
    """Page path: one per page read (put_page), four per page written or erased
    (lock_page, set_page_dirty, unlock_page, put_page), one per page an erase or an
    unchanged write only looks at. Folio path: none, whatever the folio size."""
    pages = SIZE // PAGE_SIZE
    assert _compound_heads_per_pass(make("page", order)) == {
        "write": 4 * pages, "rewrite": pages, "read": pages, "erase data": 4 * pages,
        "erase erased": pages, "2-page write": 8, "2-page read": 2}
    assert set(_compound_heads_per_pass(make("folio", order)).values()) == {0}


# -- the lookup/lock race ------------------------------------------------------------

@pytest.mark.parametrize("order", [0, 2])
@pytest.mark.parametrize("api", APIS)
def test_a_dropped_folio_loses_the_write_without_the_retry(make: Make, api: str,
                                                            order: int) -> None:
    dev = make(api, order, retry=False)
    dev.drop_folio_before_lock()
    dev.write(PAGE_SIZE + 10, b"lost")
    assert dev.before_lock is None            # the window was used once
    assert dev.stats.retries == 0
    assert dev.read(PAGE_SIZE + 10, 4) == bytes(4)  # the write went into a dropped folio
    dev.sync()
    assert dev.bdev.read_backing(PAGE_SIZE + 10, 4) == bytes(4)


@pytest.mark.parametrize("order", [0, 2])
@pytest.mark.parametrize("api", APIS)
def test_the_retry_keeps_the_write(make: Make, api: str, order: int) -> None:
    dev = make(api, order)
    dev.drop_folio_before_lock()
    dev.write(PAGE_SIZE + 10, b"kept")
    assert dev.stats.retries == 1
    assert dev.read(PAGE_SIZE + 10, 4) == b"kept"
    dev.sync()
    assert dev.bdev.read_backing(PAGE_SIZE + 10, 4) == b"kept"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("retry", [True, False])
def test_the_race_in_erase(make: Make, api: str, retry: bool) -> None:
    dev = make(api, 2, retry=retry)
    dev.write(0, PATTERN)
    dev.sync()                                # clean, so invalidate_bdev can drop it
    dev.drop_folio_before_lock(times=3)
    dev.erase(0, EBS)
    erased = dev.read(0, EBS) == b"\xff" * EBS
    assert erased is retry
    assert dev.stats.retries == (3 if retry else 0)


@pytest.mark.parametrize("api", APIS)
def test_retries_cost_compound_heads_on_the_page_path_only(make: Make, api: str) -> None:
    dev = make(api)
    dev.drop_folio_before_lock()
    dev.write(0, b"x")
    # page path: lock, unlock, put for the dropped page; then lock, dirty, unlock, put
    assert dev.stats.compound_head == (7 if api == "page" else 0)


def test_a_dirty_folio_is_not_dropped_so_there_is_no_race(make: Make) -> None:
    dev = make("page", retry=False)
    dev.write(0, b"first")                    # dirty now: invalidate_bdev leaves it
    dev.drop_folio_before_lock()
    dev.write(0, b"again")
    assert dev.read(0, 5) == b"again"


def test_stats_snapshot_has_the_erase_counters(make: Make) -> None:
    dev = make()
    before = dev.stats.snapshot()
    dev.erase(0, EBS)
    assert dev.stats.delta(before)["erase_pages_written"] == PAGES_PER_EB
    assert dev.stats.snapshot()["compound_head"] == 0
    dev.stats.reset()
    assert dev.stats.snapshot()["erase_pages_written"] == 0


@pytest.mark.parametrize("order", ORDERS)
def test_the_reference_caches_folios_of_its_order(make: Make, order: int) -> None:
    dev = make("folio", order)
    dev.read(0, SIZE)
    assert {f.order for f in dev.mapping.folios()} == {order} == {dev.folio_order}
    assert dev.bdev.logical_block_size == PAGE_SIZE << order
