"""Helpers shared by the model's tests."""

from __future__ import annotations

from pytest_folio.model import PAGE_SIZE, AddressSpace, Folio, PhysicalMemory


class StoreOps:
    """address_space_operations over a bytearray: what a simple block-backed file does."""

    def __init__(self, size: int) -> None:
        self.store = bytearray(size)
        self.reads: list[int] = []       # folio indices read
        self.writes: list[int] = []      # folio indices written back

    def read_folio(self, folio: Folio) -> None:
        self.reads.append(folio.index)
        chunk = self.store[folio.pos:folio.pos + folio.size]
        folio.data[:len(chunk)] = chunk
        folio.data[len(chunk):] = bytes(folio.size - len(chunk))

    def writepage(self, folio: Folio) -> None:
        self.writes.append(folio.index)
        n = max(0, min(folio.size, len(self.store) - folio.pos))
        self.store[folio.pos:folio.pos + n] = folio.data[:n]


def make_mapping(min_order: int = 0, max_order: int = 9, memory_size: int = 16 << 20,
                 store_size: int | None = None) -> tuple[AddressSpace, StoreOps]:
    """A mapping on its own memory with a bytearray store (1 MiB unless given)."""
    ops = StoreOps(1 << 20 if store_size is None else store_size)
    mapping = AddressSpace(PhysicalMemory(memory_size), ops)
    mapping.mapping_set_folio_order_range(min_order, max_order)
    return mapping, ops


def pages(n: int) -> int:
    return n * PAGE_SIZE
