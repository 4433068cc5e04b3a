"""Hypothesis: random sequences of page-cache operations keep the invariants and read back
exactly what a flat bytearray says the file holds, at every minimum order 0..9.

The file sits on a bytearray store (like a block-backed file system). Another mapping on
the same memory reads clean folios to create memory pressure, and the memory can be
fragmented, so reclaim, order fallback, splits and readahead all happen under test.
Sizes keep ENOMEM impossible: memory is four times the largest file and fragmentation
only pins pages above the minimum order, so every failure is a model bug.

HYPOTHESIS_PROFILE=thorough runs many more and longer sequences.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from pytest_folio.model import (
    MAX_PAGECACHE_ORDER,
    PAGE_SIZE,
    AddressSpace,
    PhysicalMemory,
    check_mapping,
    check_memory,
    folio_put,
)
from tests.helpers.model import StoreOps

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
SETTINGS = settings(
    max_examples=300 if THOROUGH else 20,
    stateful_step_count=80 if THOROUGH else 40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class PageCacheMachine(RuleBasedStateMachine):
    """One file's page cache against a flat bytearray model of its contents."""

    min_order = 0

    def __init__(self) -> None:
        super().__init__()
        self.span = max(8 << self.min_order, 64) * PAGE_SIZE     # largest file size
        self.memory = PhysicalMemory(4 * self.span)
        self.ops = StoreOps(self.span)
        self.file = AddressSpace(self.memory, self.ops)
        self.filler = AddressSpace(self.memory)                   # clean folios only
        self.filler_next = 0
        self.flat = bytearray()

    @initialize(extra=st.sampled_from(range(MAX_PAGECACHE_ORDER + 1)),
                fill=st.sampled_from([0, 1, 2, 4]), byte=st.integers(1, 255))
    def set_orders_and_fill(self, extra: int, fill: int, byte: int) -> None:
        """The order range, then (usually) a big first write so large folios exist."""
        top = min(self.min_order + extra, MAX_PAGECACHE_ORDER)
        self.file.mapping_set_folio_order_range(self.min_order, top)
        self.filler.mapping_set_folio_order_range(self.min_order, self.min_order)
        if fill:
            self._resize(self.span * fill // 4)
            blob = bytes([byte]) * len(self.flat)
            self.file.generic_perform_write(0, blob)
            self.flat[:] = blob

    def _resize(self, size: int) -> None:
        if size < len(self.flat):
            self.file.truncate_inode_pages(size)
            self.ops.store[size:] = bytes(len(self.ops.store) - size)   # blocks freed
            del self.flat[size:]
        else:
            self.flat.extend(bytes(size - len(self.flat)))
        self.file.i_size = size

    def _span(self, data: st.DataObject, limit: int) -> tuple[int, int]:
        """A position and a length inside [0, limit), often at folio sizes and edges."""
        sizes = st.sampled_from([PAGE_SIZE << k for k in range(MAX_PAGECACHE_ORDER + 1)])
        pos = data.draw(st.one_of(st.integers(0, limit), st.just(0),
                                  sizes.map(lambda e: min(e, limit))))
        length = data.draw(st.one_of(st.integers(0, limit - pos),
                                     sizes.map(lambda e: min(e, limit - pos))))
        return pos, length

    @rule(data=st.data())
    def write(self, data: st.DataObject) -> None:
        pos, length = self._span(data, self.span)
        payload = data.draw(st.binary(min_size=min(length, 1), max_size=min(length, 64)))
        # repeat a short drawn pattern: big writes without big Hypothesis examples
        blob = (payload * (length // max(len(payload), 1) + 1))[:length] if payload else b""
        if pos + len(blob) > len(self.flat):
            self._resize(pos + len(blob))
        assert self.file.generic_perform_write(pos, blob) == len(blob)
        self.flat[pos:pos + len(blob)] = blob

    @precondition(lambda self: len(self.flat) > 0)
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        pos, length = self._span(data, len(self.flat))
        assert self.file.filemap_read(pos, length) == self.flat[pos:pos + length]

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        self._resize(data.draw(st.integers(0, self.span)))

    @precondition(lambda self: len(self.flat) > 0)
    @rule(data=st.data())
    def punch(self, data: st.DataObject) -> None:
        pos, length = self._span(data, len(self.flat))
        if length:
            self.file.truncate_inode_pages_range(pos, pos + length - 1)
            self.ops.store[pos:pos + length] = bytes(length)
            self.flat[pos:pos + length] = bytes(length)

    @precondition(lambda self: any(f.order > self.min_order for f in self.file.folios()))
    @rule(data=st.data())
    def punch_inside_a_large_folio(self, data: st.DataObject) -> None:
        """Aim at the split path: a hole strictly inside one large cached folio."""
        folio = data.draw(st.sampled_from(
            [f for f in self.file.folios() if f.order > self.min_order]))
        start = data.draw(st.integers(folio.pos + 1, folio.pos + folio.size - 2))
        end = data.draw(st.integers(start, folio.pos + folio.size - 2))
        self.file.truncate_inode_pages_range(start, end)
        stop = min(end + 1, len(self.flat))
        if start < stop:
            self.ops.store[start:stop] = bytes(stop - start)
            self.flat[start:stop] = bytes(stop - start)

    @rule(data=st.data())
    def lookup(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, self.span // PAGE_SIZE))
        folio = self.file.filemap_get_folio(index)
        if folio is not None:
            assert folio.index <= index < folio.index + folio.nr_pages
            start = folio.pos
            end = min(start + folio.size, len(self.flat))
            if end > start:
                assert bytes(folio.data[:end - start]) == self.flat[start:end]
            folio_put(folio)

    @precondition(lambda self: len(self.flat) > 0)
    @rule(data=st.data())
    def read_mapping_folio(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, (len(self.flat) - 1) // PAGE_SIZE))
        folio = self.file.read_mapping_folio(index)
        end = min(folio.pos + folio.size, len(self.flat))
        assert bytes(folio.data[:end - folio.pos]) == self.flat[folio.pos:end]
        folio_put(folio)

    @rule(data=st.data())
    def invalidate(self, data: st.DataObject) -> None:
        last = self.span // PAGE_SIZE
        start = data.draw(st.integers(0, last))
        end = data.draw(st.one_of(st.just(-1), st.integers(start, last)))
        self.file.invalidate_mapping_pages(start, end)

    @rule()
    def writeback(self) -> None:
        self.file.filemap_write_and_wait()
        assert not any(f.dirty for f in self.file.folios())

    @rule(n=st.integers(1, 96))
    def pressure(self, n: int) -> None:
        """Another file reads clean folios: once memory is full, reclaim must run."""
        step = 1 << self.min_order
        for _ in range(n):
            folio_put(self.filler.read_mapping_folio(self.filler_next))
            self.filler_next += step

    @precondition(lambda self: self.min_order < MAX_PAGECACHE_ORDER)
    @rule(fraction=st.sampled_from([0.25, 0.5, 1.0]), data=st.data())
    def fragment(self, fraction: float, data: st.DataObject) -> None:
        order = data.draw(st.integers(self.min_order + 1, MAX_PAGECACHE_ORDER))
        self.memory.fragment(fraction, order)

    @rule()
    def unfragment(self) -> None:
        self.memory.unfragment()

    @invariant()
    def invariants_hold(self) -> None:
        check_mapping(self.file)
        check_mapping(self.filler)
        check_memory(self.memory)
        assert all(f.refcount == 1 for f in self.file.folios())   # every get was put

    def teardown(self) -> None:
        assert self.file.filemap_read(0, len(self.flat)) == self.flat
        # what is only in clean folios must also be in the store: drop them, read again
        self.file.invalidate_mapping_pages()
        assert self.file.filemap_read(0, len(self.flat)) == self.flat


@pytest.mark.folio_orders(*range(MAX_PAGECACHE_ORDER + 1))
def test_page_cache_matches_a_flat_file(folio_order: int) -> None:
    machine = type(f"PageCacheMachineOrder{folio_order}", (PageCacheMachine,),
                   {"min_order": folio_order})
    run_state_machine_as_test(machine, settings=SETTINGS)
