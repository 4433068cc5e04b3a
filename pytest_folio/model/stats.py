"""Exact event counters of one model.

Every counter is an integer bumped by the code path that does the work, never sampled
or timed, so the same operations always give the same numbers: tests can assert them
and the timing collector can store them beside the times they explain.
"""

from __future__ import annotations

import dataclasses

from pytest_folio.model.constants import MAX_PAGECACHE_ORDER


@dataclasses.dataclass
class Stats:
    """Counters shared by every object of one model (memory, mappings, devices)."""

    compound_head: int = 0      # page -> head folio conversions (the page wrappers)
    folio_lookups: int = 0      # page-cache lookups by index
    alloc_fallbacks: int = 0    # allocations above the minimum order that failed and fell back
    enomem: int = 0             # allocations that failed at the minimum order after reclaim
    bytes_copied: int = 0       # bytes copied between callers' buffers and folios
    splits: int = 0             # large folios split (truncate, punch)
    reclaims: int = 0           # clean folios reclaimed under memory pressure
    retries: int = 0            # lookups repeated because the cache changed under the caller
    read_folio: int = 0         # a_ops.read_folio calls (zero-fill included)
    writepage: int = 0          # a_ops.writepage calls
    readahead: int = 0          # folios created by readahead
    invalidated: int = 0        # clean folios dropped by invalidate_mapping_pages
    truncated: int = 0          # folios removed by truncate / punch
    allocations: list[int] = dataclasses.field(
        default_factory=lambda: [0] * (MAX_PAGECACHE_ORDER + 1))  # buddy allocations by order

    def snapshot(self) -> dict[str, int]:
        """A flat dict of plain ints (``alloc_order_N`` for each order): safe to send
        from an xdist worker or write to JSON."""
        flat = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "allocations"}
        flat.update({f"alloc_order_{o}": n for o, n in enumerate(self.allocations)})
        return flat

    def reset(self) -> None:
        """Zero every counter (the same object stays shared by the model)."""
        for f in dataclasses.fields(self):
            if f.name != "allocations":
                setattr(self, f.name, 0)
        self.allocations[:] = [0] * len(self.allocations)

    def delta(self, before: dict[str, int]) -> dict[str, int]:
        """What changed since an earlier :meth:`snapshot` (zero entries left out)."""
        now = self.snapshot()
        return {k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)}
