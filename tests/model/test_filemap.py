"""One test per kernel rule of the page cache (mm/filemap.c, pagemap.h, truncate.c,
readahead.c) as the model implements them."""

from __future__ import annotations

import errno

import pytest

from pytest_folio.model import (
    FGP_CREAT,
    FGP_LOCK,
    FGP_NOWAIT,
    MAX_PAGECACHE_ORDER,
    PAGE_SIZE,
    AddressSpace,
    FolioDeadlock,
    PhysicalMemory,
    check_mapping,
    check_memory,
    folio_lock,
    folio_mark_dirty,
    folio_put,
    folio_unlock,
    lock_page,
    page_address,
    put_page,
    read_mapping_page,
    set_page_dirty,
    unlock_page,
)
from pytest_folio.model.pagemap import fgf_set_order
from tests.helpers.model import StoreOps, make_mapping, pages

# -- the order range -----------------------------------------------------------------------


def test_new_mapping_has_no_large_folios() -> None:
    mapping = AddressSpace(PhysicalMemory(1 << 20))
    assert (mapping.mapping_min_folio_order(), mapping.mapping_max_folio_order()) == (0, 0)


def test_order_range_is_clamped_to_max_pagecache_order() -> None:
    mapping, _ = make_mapping(0, 0)
    mapping.mapping_set_folio_order_range(12, 15)
    assert mapping.mapping_min_folio_order() == MAX_PAGECACHE_ORDER
    assert mapping.mapping_max_folio_order() == MAX_PAGECACHE_ORDER


@pytest.mark.parametrize(("lo", "hi", "message"), [
    (4, 2, "maximum order must not be below the minimum"),
    (-1, 2, "minimum folio order must be a whole number"),
    (0, -3, "maximum folio order must be a whole number"),
])
def test_bad_order_range_is_a_clear_value_error(lo: int, hi: int, message: str) -> None:
    mapping, _ = make_mapping()
    with pytest.raises(ValueError, match=message):
        mapping.mapping_set_folio_order_range(lo, hi)


def test_order_range_is_fixed_once_folios_are_cached() -> None:
    mapping, _ = make_mapping(0, 2)
    folio_put(mapping.read_mapping_folio(0))
    with pytest.raises(ValueError, match="before the mapping holds folios"):
        mapping.mapping_set_folio_order_range(0, 4)


# -- creation: alignment and order fallback ------------------------------------------------


def test_creation_aligns_the_index_down_to_the_minimum_order() -> None:
    mapping, _ = make_mapping(2, 9)
    folio = mapping.filemap_get_folio_flags(5, FGP_CREAT)
    assert folio is not None
    assert (folio.index, folio.order) == (4, 2)
    assert folio.locked and not folio.uptodate
    assert mapping.mapping_align_index(7) == 4


@pytest.mark.parametrize(("index", "asked", "expected"), [
    (0, 4, (0, 4)),      # aligned: as asked
    (16, 4, (16, 4)),
    (4, 4, (4, 2)),      # index 4 allows order 2 at most (__ffs)
    (24, 9, (24, 3)),
    (3, 4, (0, 4)),      # aligned down to the minimum order (0), where order 4 fits
    (0, 12, (0, 6)),     # clamped to the maximum order
])
def test_creation_lowers_the_order_to_the_index_alignment(
        index: int, asked: int, expected: tuple[int, int]) -> None:
    mapping, _ = make_mapping(2, 6)
    folio = mapping.filemap_get_folio_flags(index, FGP_CREAT, order=asked)
    assert folio is not None
    assert (folio.index, folio.order) == expected
    check_mapping(mapping)


def test_allocation_failure_above_the_minimum_falls_back_one_order_at_a_time() -> None:
    mapping, _ = make_mapping(0, 9, memory_size=4 << 20)
    mapping.memory.fragment(1.0, order=3)          # nothing of order 3 or more is left
    folio = mapping.filemap_get_folio_flags(0, FGP_CREAT, order=6)
    assert folio is not None and folio.order == 2
    assert mapping.stats.alloc_fallbacks == 4      # orders 6, 5, 4, 3 failed
    assert mapping.stats.allocations[2] == 1


def test_fallback_never_goes_below_the_minimum_order() -> None:
    mapping, _ = make_mapping(3, 9, memory_size=4 << 20)
    mapping.memory.fragment(1.0, order=3)
    with pytest.raises(OSError, match="no free order-3 block \\(32K\\) in 4M") as info:
        mapping.filemap_get_folio_flags(0, FGP_CREAT, order=5)
    assert info.value.errno == errno.ENOMEM
    assert mapping.nrpages == 0
    assert mapping.stats.alloc_fallbacks == 2 and mapping.stats.enomem == 1


def test_an_overlapping_cached_folio_makes_creation_fall_back() -> None:
    mapping, _ = make_mapping(0, 9)
    folio_put(mapping.read_mapping_folio(3))              # an order-0 folio at 3
    folio = mapping.filemap_get_folio_flags(0, FGP_CREAT, order=2)
    assert folio is not None and (folio.index, folio.order) == (0, 1)
    check_mapping(mapping)


# -- filemap_add_folio ---------------------------------------------------------------------


def test_add_refuses_an_overlap_with_eexist() -> None:
    mapping, _ = make_mapping(0, 4)
    folio_put(mapping.read_mapping_folio(5))
    big = mapping.filemap_alloc_folio(3)
    assert big is not None
    with pytest.raises(OSError) as info:
        mapping.filemap_add_folio(big, 0)
    assert info.value.errno == errno.EEXIST
    folio_put(big)                                  # the caller's reference frees it
    assert mapping.memory.allocated.get(big.pfn) is None
    check_memory(mapping.memory)


def test_add_of_a_misaligned_or_out_of_range_folio_is_refused() -> None:
    mapping, _ = make_mapping(1, 3)
    folio = mapping.filemap_alloc_folio(2)
    assert folio is not None
    with pytest.raises(ValueError, match="not aligned"):
        mapping.filemap_add_folio(folio, 6)
    small = mapping.filemap_alloc_folio(0)
    assert small is not None
    with pytest.raises(ValueError, match=r"outside the mapping's order range 1\.\.3"):
        mapping.filemap_add_folio(small, 0)


def test_added_folio_is_locked_and_holds_the_cache_reference() -> None:
    mapping, _ = make_mapping(0, 3)
    folio = mapping.filemap_alloc_folio(2)
    assert folio is not None
    mapping.filemap_add_folio(folio, 8)
    assert folio.locked and folio.refcount == 2 and folio.mapping is mapping
    folio_unlock(folio)
    folio_put(folio)
    assert mapping.filemap_get_folio(10) is folio
    check_mapping(mapping)


# -- lookup, read, dirty, writeback --------------------------------------------------------


def test_lookup_finds_the_folio_holding_any_of_its_pages() -> None:
    mapping, _ = make_mapping(0, 9)
    folio = mapping.filemap_get_folio_flags(512, FGP_CREAT, order=9)
    assert folio is not None
    folio_unlock(folio)
    for index in (512, 513, 700, 1023):
        assert mapping.filemap_get_folio(index) is folio
    assert mapping.filemap_get_folio(511) is None
    assert mapping.filemap_get_folio(1024) is None
    assert folio.refcount == 2 + 4                  # cache + creator + 4 lookups


def test_read_mapping_folio_reads_once_through_a_ops() -> None:
    mapping, ops = make_mapping(2, 2)
    ops.store[pages(4):pages(4) + 5] = b"hello"
    folio = mapping.read_mapping_folio(6)
    assert (folio.index, folio.order) == (4, 2)
    assert folio.uptodate and not folio.locked
    assert bytes(folio.data[:5]) == b"hello"
    folio_put(folio)
    folio_put(mapping.read_mapping_folio(5))
    assert ops.reads == [4]
    assert mapping.stats.read_folio == 1


@pytest.mark.parametrize(("order", "folios", "pos", "length"), [
    (1, 8, 100, pages(16) - 200),              # many: gathered as one batch
    (2, 2, pages(2), pages(4)),                # across two large folios only
], ids=["many", "two"])
def test_a_read_over_cached_folios_counts_and_marks_each_one(
        order: int, folios: int, pos: int, length: int) -> None:
    mapping, _ = make_mapping(order, order)
    data = bytes(range(256)) * (folios * pages(1 << order) // 256)
    mapping.generic_perform_write(0, data)
    for folio in mapping.folios():
        folio.referenced = False
    before = mapping.stats.snapshot()
    assert mapping.filemap_read(pos, length) == data[pos:pos + length]
    assert mapping.stats.delta(before) == {"folio_lookups": folios, "bytes_copied": length}
    assert all(folio.referenced for folio in mapping.folios())


def test_a_read_over_a_hole_among_cached_folios_reads_the_hole_as_zeros() -> None:
    mapping, _ = make_mapping(0, 0)
    mapping.generic_perform_write(0, b"a" * pages(3))
    mapping.generic_perform_write(pages(4), b"b" * pages(3))
    assert mapping.filemap_read(0, pages(7)) == (
        b"a" * pages(3) + bytes(pages(1)) + b"b" * pages(3))


def test_partial_write_reads_the_folio_first_full_write_does_not() -> None:
    mapping, ops = make_mapping(2, 2)
    ops.store[:pages(8)] = b"s" * pages(8)
    mapping.generic_perform_write(10, b"new")
    assert ops.reads == [0]
    mapping.generic_perform_write(pages(4), b"w" * pages(4))
    assert ops.reads == [0]
    assert mapping.filemap_read(0, 16) == b"s" * 10 + b"new" + b"s" * 3
    assert mapping.filemap_read(pages(4), pages(4)) == b"w" * pages(4)


def test_write_asks_for_the_order_of_its_length() -> None:
    assert [fgf_set_order(n) for n in (1, 4096, 8191, 8192, 1 << 20, 4 << 20)] == \
        [0, 0, 0, 1, 8, 10]
    mapping, _ = make_mapping(0, 9)
    mapping.generic_perform_write(0, bytes(64 * 1024))
    assert [(f.index, f.order) for f in mapping.folios()] == [(0, 4)]


def test_writeback_writes_dirty_folios_only_and_cleans_them() -> None:
    mapping, ops = make_mapping(0, 0)
    mapping.generic_perform_write(pages(2), b"x" * pages(2))
    folio_put(mapping.read_mapping_folio(7))                  # clean
    mapping.filemap_write_and_wait()
    assert ops.writes == [2, 3]
    assert ops.store[pages(2):pages(4)] == b"x" * pages(2)
    assert not any(f.dirty for f in mapping.folios())
    mapping.filemap_write_and_wait()
    assert mapping.stats.writepage == 2


def test_without_writepage_dirty_folios_stay_dirty() -> None:
    mapping = AddressSpace(PhysicalMemory(1 << 20))
    mapping.generic_perform_write(0, b"ramfs")
    mapping.filemap_write_and_wait()
    assert [f.dirty for f in mapping.folios()] == [True]
    assert mapping.filemap_read(0, 8) == b"ramfs\0\0\0"      # read_folio zero-filled


def test_folio_mark_dirty_reports_the_transition() -> None:
    mapping, _ = make_mapping()
    folio = mapping.read_mapping_folio(0)
    assert folio_mark_dirty(folio) is True
    assert folio_mark_dirty(folio) is False
    folio_put(folio)


# -- truncate and punch --------------------------------------------------------------------


def test_truncate_drops_whole_folios_and_zeroes_the_partial_page() -> None:
    mapping, _ = make_mapping(0, 0)
    mapping.generic_perform_write(0, b"a" * pages(4))
    mapping.truncate_inode_pages(pages(1) + 100)
    assert [f.index for f in mapping.folios()] == [0, 1]
    assert mapping.filemap_read(pages(1), 200) == b"a" * 100 + bytes(100)
    assert mapping.stats.truncated == 2
    check_mapping(mapping)


def test_partial_truncate_splits_a_large_folio_down_to_the_minimum_order() -> None:
    mapping, _ = make_mapping(1, 9)
    mapping.generic_perform_write(0, b"b" * pages(16))        # one order-4 folio
    assert [f.order for f in mapping.folios()] == [4]
    mapping.truncate_inode_pages(pages(3) + 7)
    assert [(f.index, f.order) for f in mapping.folios()] == [(0, 1), (2, 1)]
    assert mapping.stats.splits == 1
    assert mapping.filemap_read(0, pages(4)) == b"b" * (pages(3) + 7) + bytes(pages(1) - 7)
    check_mapping(mapping)


def test_punch_in_the_middle_of_a_2m_folio_keeps_both_ends() -> None:
    mapping, _ = make_mapping(0, 9)
    data = bytes(range(256)) * (pages(512) // 256)
    mapping.generic_perform_write(0, data)
    assert [f.order for f in mapping.folios()] == [9]
    mapping.truncate_inode_pages_range(pages(100) + 1, pages(300) - 2)
    assert {f.order for f in mapping.folios()} == {0}
    assert mapping.nrpages == 512 - 198                       # pages 101..298 are gone
    assert mapping.stats.splits == 1
    check_mapping(mapping)
    expected = bytearray(data)
    expected[pages(100) + 1:pages(300) - 1] = bytes(pages(200) - 2)
    assert mapping.filemap_read(0, len(data)) == bytes(expected)


def test_a_folio_that_cannot_be_split_is_kept_whole_when_dirty() -> None:
    mapping, _ = make_mapping(0, 9)
    mapping.generic_perform_write(0, b"c" * pages(8))         # dirty order-3 folio
    held = mapping.filemap_get_folio(0)                       # an extra reference
    assert held is not None
    mapping.truncate_inode_pages(pages(2))
    assert [(f.index, f.order) for f in mapping.folios()] == [(0, 3)]
    assert mapping.stats.splits == 0
    assert bytes(held.data) == b"c" * pages(2) + bytes(pages(6))
    folio_put(held)


def test_at_the_minimum_order_a_dirty_folio_is_kept_and_a_clean_one_dropped() -> None:
    mapping, _ = make_mapping(2, 9)
    mapping.generic_perform_write(0, b"d" * pages(4))             # dirty, order 2
    folio_put(mapping.read_mapping_folio(4))                      # clean, order 2
    mapping.truncate_inode_pages_range(pages(1), pages(2) - 1)    # inside the dirty one
    mapping.truncate_inode_pages_range(pages(5), pages(6) - 1)    # inside the clean one
    assert [(f.index, f.order) for f in mapping.folios()] == [(0, 2)]
    assert mapping.filemap_read(0, pages(3)) == b"d" * pages(1) + bytes(pages(1)) + \
        b"d" * pages(1)
    assert mapping.stats.splits == 0


def test_truncate_of_a_folio_the_caller_holds_locked_is_a_deadlock() -> None:
    mapping, _ = make_mapping()
    folio = mapping.read_mapping_folio(0)
    folio_lock(folio)
    with pytest.raises(FolioDeadlock):
        mapping.truncate_inode_pages(0)
    folio_unlock(folio)
    folio_put(folio)


# -- invalidate ----------------------------------------------------------------------------


def test_invalidate_drops_only_clean_unlocked_folios_outside_writeback() -> None:
    mapping, _ = make_mapping(0, 0)
    for index in range(5):
        folio_put(mapping.read_mapping_folio(index))
    mapping.generic_perform_write(pages(1), b"dirty")
    locked = mapping.filemap_get_folio_flags(2, FGP_LOCK)
    assert locked is not None
    writeback = mapping.filemap_get_folio(3)
    assert writeback is not None
    writeback.writeback = True
    assert mapping.invalidate_mapping_pages() == 2             # pages 0 and 4
    assert [f.index for f in mapping.folios()] == [1, 2, 3]
    assert mapping.stats.invalidated == 2
    folio_unlock(locked)
    writeback.writeback = False
    folio_put(locked)
    folio_put(writeback)


def test_invalidate_leaves_a_folio_partly_outside_the_range() -> None:
    mapping, _ = make_mapping(2, 2)
    folio_put(mapping.read_mapping_folio(0))
    folio_put(mapping.read_mapping_folio(4))
    assert mapping.invalidate_mapping_pages(2, 7) == 1
    assert [f.index for f in mapping.folios()] == [0]


def test_a_dropped_folio_keeps_its_memory_until_the_last_put() -> None:
    mapping, _ = make_mapping(0, 0)
    folio = mapping.read_mapping_folio(0)
    assert mapping.invalidate_mapping_pages() == 1            # the race block2mtd guards
    assert folio.mapping is None
    folio.data[:4] = b"lost"
    assert folio_mark_dirty(folio) is True                    # only the flag: nobody writes it
    assert mapping.memory.allocated.get(folio.pfn) == 0
    assert mapping.filemap_read(0, 4) == bytes(4)             # a fresh folio, not the lost write
    folio_put(folio)
    assert mapping.memory.allocated.get(folio.pfn) is None
    check_memory(mapping.memory)


# -- memory pressure -----------------------------------------------------------------------


def test_clean_folios_are_reclaimed_oldest_first_before_enomem() -> None:
    mapping, _ = make_mapping(0, 0, memory_size=pages(8))
    for index in range(8):
        folio_put(mapping.read_mapping_folio(index))
    mapping.filemap_read(pages(3), 1)                          # page 3 was used again
    folio_put(mapping.read_mapping_folio(100))
    folio_put(mapping.read_mapping_folio(101))
    assert mapping.stats.reclaims == 2
    assert [f.index for f in mapping.folios()] == [2, 3, 4, 5, 6, 7, 100, 101]
    folio_put(mapping.read_mapping_folio(102))
    folio_put(mapping.read_mapping_folio(103))
    # page 3 got its second chance: 2 and then 4 went instead
    assert [f.index for f in mapping.folios()] == [3, 5, 6, 7, 100, 101, 102, 103]
    check_mapping(mapping)


def test_dirty_folios_are_never_reclaimed_enomem_instead() -> None:
    mapping, _ = make_mapping(0, 0, memory_size=pages(4))
    mapping.generic_perform_write(0, b"z" * pages(4))
    with pytest.raises(OSError) as info:
        mapping.read_mapping_folio(10)
    assert info.value.errno == errno.ENOMEM
    assert "no free order-0 block (4K) in 16K" in str(info.value)
    assert mapping.stats.reclaims == 0 and mapping.stats.enomem == 1
    assert mapping.nrpages == 4


def test_reclaim_spans_mappings_sharing_memory_but_spares_unevictable_ones() -> None:
    memory = PhysicalMemory(pages(4))
    ramfs_like = AddressSpace(memory)
    ramfs_like.unevictable = True
    other = AddressSpace(memory)
    for index in range(2):
        folio_put(ramfs_like.read_mapping_folio(index))
        folio_put(other.read_mapping_folio(index))
    folio_put(other.read_mapping_folio(9))
    folio_put(other.read_mapping_folio(10))
    assert ramfs_like.nrpages == 2 and [f.index for f in other.folios()] == [9, 10]


# -- readahead -----------------------------------------------------------------------------


def test_sequential_reads_grow_the_readahead_order() -> None:
    mapping, _ = make_mapping(0, 9, memory_size=32 << 20, store_size=16 << 20)
    mapping.i_size = 16 << 20
    for pos in range(0, 8 << 20, 128 << 10):
        mapping.filemap_read(pos, 128 << 10)
    folios = mapping.folios()
    orders = [f.order for f in folios]
    assert orders[0] == 2
    # each round adds two orders (lowered only where the index is not aligned enough)
    first_seen = [orders.index(o) for o in (2, 4, 6, 8, MAX_PAGECACHE_ORDER)]
    assert first_seen == sorted(first_seen)
    assert all(f.order == MAX_PAGECACHE_ORDER for f in folios if f.pos >= 6 << 20)
    check_mapping(mapping)


def test_page_cache_ra_order_adds_two_orders_within_the_limits() -> None:
    mapping, _ = make_mapping(1, 6)
    assert mapping.page_cache_ra_order(0, 64, 0) == 2
    assert mapping.page_cache_ra_order(64, 64, 5) == 6     # capped at the maximum
    assert mapping.page_cache_ra_order(128, 4, 4) == 2     # capped by the window
    assert mapping.page_cache_ra_order(256, 64, 6) == 6
    assert mapping.stats.readahead == 16 + 1 + 1 + 1
    check_mapping(mapping)


def test_readahead_stops_at_i_size() -> None:
    mapping, _ = make_mapping(0, 9)
    mapping.i_size = pages(5) + 1
    mapping.page_cache_ra_order(0, 64, 4)
    assert [(f.index, f.order) for f in mapping.folios()] == [(0, 2), (4, 1)]


# -- locking, page wrappers, counters ------------------------------------------------------


def test_locking_a_held_folio_is_a_deadlock_not_a_hang() -> None:
    mapping, _ = make_mapping()
    folio = mapping.read_mapping_folio(0)
    folio_lock(folio)
    with pytest.raises(FolioDeadlock):
        folio_lock(folio)
    with pytest.raises(OSError) as info:
        mapping.filemap_get_folio_flags(0, FGP_LOCK | FGP_NOWAIT)
    assert info.value.errno == errno.EAGAIN
    with pytest.raises(FolioDeadlock):
        mapping.generic_perform_write(0, b"x")
    folio_unlock(folio)
    with pytest.raises(RuntimeError, match="not locked"):
        folio_unlock(folio)
    folio_put(folio)


def test_page_wrappers_count_one_compound_head_each() -> None:
    mapping, _ = make_mapping(2, 2)
    page = read_mapping_page(mapping, 6)
    assert mapping.stats.compound_head == 0            # folio_file_page: arithmetic
    assert page.head.index == 4
    lock_page(page)
    page_address(page)[:3] = b"pg6"
    set_page_dirty(page)
    unlock_page(page)
    put_page(page)
    assert mapping.stats.compound_head == 4
    assert mapping.filemap_read(pages(6), 3) == b"pg6"
    folio = mapping.read_mapping_folio(6)
    folio_lock(folio)
    folio_mark_dirty(folio)
    folio_unlock(folio)
    folio_put(folio)
    assert mapping.stats.compound_head == 4            # the folio API never converts


def _workload() -> dict[str, int]:
    mapping, _ = make_mapping(1, 5, memory_size=pages(64))
    mapping.generic_perform_write(100, bytes(pages(20)))
    mapping.filemap_write_and_wait()
    mapping.truncate_inode_pages_range(pages(3), pages(9))
    for index in range(0, 200, 3):
        folio_put(mapping.read_mapping_folio(index))
    mapping.invalidate_mapping_pages()
    return mapping.stats.snapshot()


def test_stats_are_flat_ints_and_repeatable() -> None:
    first = _workload()
    assert first == _workload()
    assert all(type(v) is int for v in first.values())
    assert {f"alloc_order_{o}" for o in range(MAX_PAGECACHE_ORDER + 1)} <= set(first)
    assert first["reclaims"] > 0 and first["splits"] > 0 and first["writepage"] > 0


def test_stats_reset_and_delta() -> None:
    mapping, _ = make_mapping()
    before = mapping.stats.snapshot()
    folio_put(mapping.read_mapping_folio(0))
    assert mapping.stats.delta(before) == {"folio_lookups": 1, "read_folio": 1,
                                           "alloc_order_0": 1}
    mapping.stats.reset()
    assert set(mapping.stats.snapshot().values()) == {0}


def test_store_ops_helper_matches_the_protocol() -> None:
    ops = StoreOps(PAGE_SIZE)
    mapping = AddressSpace(PhysicalMemory(pages(4)), ops)
    folio_put(mapping.read_mapping_folio(3))                   # beyond the store: zeroes
    assert mapping.filemap_read(pages(3), 4) == bytes(4)


def test_one_put_too_many_is_caught_before_it_frees_cached_memory() -> None:
    mapping, _ = make_mapping()
    folio = mapping.read_mapping_folio(0)
    folio_put(folio)
    with pytest.raises(RuntimeError, match="one put too many"):
        folio_put(folio)
    assert folio.refcount == 1 and mapping.memory.allocated.get(folio.pfn) == 0


def test_split_of_a_locked_folio_leaves_the_lock_on_the_first_piece() -> None:
    mapping, _ = make_mapping(0, 4)
    folio = mapping.filemap_get_folio_flags(0, FGP_CREAT, order=2)   # locked, 2 refs
    assert folio is not None
    assert mapping.split_folio(folio) is False                        # a reference is held
    folio_put(folio)
    assert mapping.split_folio(folio, 1) is True
    assert [(f.index, f.order, f.locked) for f in mapping.folios()] == \
        [(0, 1, True), (2, 1, False)]
    with pytest.raises(ValueError, match="below the mapping's minimum order"):
        mapping.split_folio(mapping.folios()[1], -1)


def test_negative_positions_are_einval() -> None:
    mapping, _ = make_mapping()
    for call in (lambda: mapping.filemap_read(-1, 4),
                 lambda: mapping.generic_perform_write(-4096, b"x")):
        with pytest.raises(OSError) as info:
            call()
        assert info.value.errno == errno.EINVAL
