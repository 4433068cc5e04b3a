"""The buddy allocator under the page cache: split, merge, views, fragmentation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_folio.model import MAX_PAGECACHE_ORDER, PAGE_SIZE, AddressSpace, PhysicalMemory
from pytest_folio.model.invariants import InvariantError, check_memory

MIB = 1 << 20


def test_fresh_memory_is_whole_max_order_blocks() -> None:
    memory = PhysicalMemory(8 * MIB)
    assert memory.free_area_counts() == [0] * MAX_PAGECACHE_ORDER + [4]
    assert memory.nr_free == memory.nr_pages == 2048
    check_memory(memory)


def test_odd_size_is_carved_into_aligned_blocks() -> None:
    memory = PhysicalMemory(2 * MIB + 3 * PAGE_SIZE)
    assert memory.free_area_counts() == [1, 1] + [0] * (MAX_PAGECACHE_ORDER - 2) + [1]
    check_memory(memory)


def test_allocation_splits_and_free_merges_buddies() -> None:
    memory = PhysicalMemory(2 * MIB)
    pfn = memory.alloc_pages(0)
    assert pfn is not None
    # one order-0 page taken out of a 2 MiB block leaves one free block per lower order
    assert memory.free_area_counts() == [1] * MAX_PAGECACHE_ORDER + [0]
    memory.free_pages(pfn, 0)
    assert memory.free_area_counts() == [0] * MAX_PAGECACHE_ORDER + [1]
    check_memory(memory)


def test_exhaustion_returns_none_and_counts_by_order() -> None:
    memory = PhysicalMemory(16 * PAGE_SIZE)
    blocks = [memory.alloc_pages(2) for _ in range(4)]
    assert None not in blocks
    assert memory.alloc_pages(0) is None
    assert memory.stats.snapshot()["alloc_order_2"] == 4
    with pytest.raises(ValueError, match="not an allocated order-1 block"):
        memory.free_pages(blocks[0], 1)  # type: ignore[arg-type]


def test_page_view_is_a_view_into_the_one_buffer() -> None:
    memory = PhysicalMemory(2 * MIB)
    pfn = memory.alloc_pages(1)
    assert pfn is not None
    view = memory.page_view(pfn, 1)
    assert len(view) == 2 * PAGE_SIZE
    view[10:15] = b"folio"
    start = pfn * PAGE_SIZE
    assert bytes(memory.buffer[start + 10:start + 15]) == b"folio"


@pytest.mark.parametrize("size", [0, 100, PAGE_SIZE + 1, -PAGE_SIZE])
def test_bad_memory_size_names_the_page_size(size: int) -> None:
    with pytest.raises(ValueError, match=f"positive multiple of the page size \\({PAGE_SIZE}\\)"):
        PhysicalMemory(size)


def test_memory_too_small_for_the_minimum_order_names_the_limit() -> None:
    mapping = AddressSpace(PhysicalMemory(64 * 1024))
    with pytest.raises(ValueError, match="64K is too small for order-9 folios: it needs at "
                                         "least 2M"):
        mapping.mapping_set_folio_min_order(9)


def test_fragment_makes_high_orders_scarce_and_unfragment_restores() -> None:
    memory = PhysicalMemory(4 * MIB)
    pinned = memory.fragment(1.0, order=3)
    assert pinned == 4 * MIB // (8 * PAGE_SIZE)
    assert memory.largest_free_order() == 2
    assert memory.alloc_pages(3) is None
    assert memory.alloc_pages(2) is not None
    check_memory(memory)
    memory.unfragment()
    assert memory.largest_free_order() == MAX_PAGECACHE_ORDER
    check_memory(memory)


def test_partial_fragmentation_leaves_some_high_order_blocks() -> None:
    memory = PhysicalMemory(8 * MIB)
    assert memory.fragment(0.5, order=MAX_PAGECACHE_ORDER) == 2
    assert memory.free_area_counts()[MAX_PAGECACHE_ORDER] == 2
    check_memory(memory)


@pytest.mark.parametrize(("fraction", "order"), [(1.5, 2), (-0.1, 2), (0.5, 0), (0.5, 10)])
def test_bad_fragment_arguments(fraction: float, order: int) -> None:
    with pytest.raises(ValueError, match="fragment"):
        PhysicalMemory(2 * MIB).fragment(fraction, order)


def test_check_memory_catches_a_double_booked_page() -> None:
    memory = PhysicalMemory(2 * MIB)
    pfn = memory.alloc_pages(0)
    assert pfn is not None
    memory.free_area[0].add(pfn)          # corrupt: the page is now free and allocated
    memory.nr_free += 1
    with pytest.raises(InvariantError):
        check_memory(memory)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, MAX_PAGECACHE_ORDER)), max_size=60))
def test_random_alloc_free_keeps_the_buddy_invariants(ops: list[tuple[bool, int]]) -> None:
    memory = PhysicalMemory(4 * MIB + 5 * PAGE_SIZE)
    held: list[tuple[int, int]] = []
    for alloc, order in ops:
        if alloc or not held:
            pfn = memory.alloc_pages(order)
            if pfn is not None:
                assert pfn % (1 << order) == 0
                held.append((pfn, order))
        else:
            memory.free_pages(*held.pop(order % len(held)))
        check_memory(memory)
    for pfn, order in held:
        memory.free_pages(pfn, order)
    check_memory(memory)
    assert memory.nr_free == memory.nr_pages
