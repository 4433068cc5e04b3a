"""What a test's parameters mean, decoded in one place.

The plugin parametrizes ``folio_order`` and ``block_size`` directly, and ``mtd_device`` /
``filesystem`` indirectly when a test asks for them alone: ``mtd_device``'s parameter is
an :class:`MTDParam` (a folio order, and an erasesize when the test runs at several),
``filesystem``'s a block size. The timing collector, the suites' measurements and the
replay commands all read a test's geometry through :func:`item_params`, so a new
parameter is labelled the same everywhere.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_folio.constants import PAGE_SIZE
from pytest_folio.sizes import format_size


@dataclasses.dataclass(frozen=True)
class MTDParam:
    """``mtd_device``'s indirect parameter: the folio order, and the erasesize when the
    test runs at more than one (None: the run's ``--folio-erasesize``)."""

    folio_order: int
    erasesize: int | None = None

    @property
    def id(self) -> str:
        """``64K`` or ``64K-eb16K``: the folio size, then the eraseblock size."""
        folio = format_size(PAGE_SIZE << self.folio_order)
        return folio if self.erasesize is None else f"{folio}-eb{format_size(self.erasesize)}"


@dataclasses.dataclass(frozen=True)
class FsParam:
    """``filesystem``'s indirect parameter when the run bounds the cache of a factory
    that takes ``cache_bytes``: the block size, and the bound."""

    block_size: int
    cache_bytes: int

    @property
    def id(self) -> str:
        """``4K-cache64K``: the block size, then the cache bound."""
        return f"{format_size(self.block_size)}-cache{format_size(self.cache_bytes)}"


def cache_bound(block_size: int) -> int:
    """The cache a bounded run gives a factory: 16 blocks (64K at 4K blocks), small
    enough that every suite's files are pushed through it and evicted."""
    return 16 * block_size


@dataclasses.dataclass(frozen=True)
class ItemParams:
    """A test's geometry: each field is None when the test does not run at one."""

    folio_order: int | None = None
    erasesize: int | None = None
    block_size: int | None = None
    cache_bytes: int | None = None       # the factory's bounded cache, when the run has one

    def labels(self) -> dict[str, str]:
        """As tables and saved runs show them: ``{"folio": "16K", "eb": "4K"}``."""
        out = {}
        if self.folio_order is not None:
            out["folio"] = format_size(PAGE_SIZE << self.folio_order)
        if self.erasesize is not None:
            out["eb"] = format_size(self.erasesize)
        if self.block_size is not None:
            out["bs"] = format_size(self.block_size)
        if self.cache_bytes is not None:
            out["cache"] = format_size(self.cache_bytes)
        return out


def decode_params(given: dict[str, Any]) -> ItemParams:
    """The geometry in a callspec's ``params``."""
    order: Any = given.get("folio_order")
    erasesize = None
    device = given.get("mtd_device")
    if isinstance(device, MTDParam):
        order, erasesize = device.folio_order, device.erasesize
    elif order is None and isinstance(device, int):   # a user's own indirect order
        order = device
    block_size: Any = given.get("block_size", given.get("filesystem"))
    cache_bytes = None
    if isinstance(block_size, FsParam):
        cache_bytes, block_size = block_size.cache_bytes, block_size.block_size
    return ItemParams(folio_order=order if isinstance(order, int) else None,
                      erasesize=erasesize,
                      block_size=block_size if isinstance(block_size, int) else None,
                      cache_bytes=cache_bytes)


def item_params(item: object) -> ItemParams:
    """The geometry of a pytest item (or a fixture request's node)."""
    callspec = getattr(item, "callspec", None)
    return decode_params(callspec.params if callspec is not None else {})


def default_erasesizes(folio_order: int, erasesize: int, size: int) -> tuple[int, ...]:
    """Eraseblocks smaller than, equal to and larger than the folio, where the device
    allows them: block2mtd takes any erasesize from PAGE_SIZE up that divides the size.

    Smaller is a quarter folio (never below PAGE_SIZE), larger the run's ``erasesize``
    when it is larger, else twice the folio.
    """
    folio = PAGE_SIZE << folio_order
    larger = erasesize if erasesize > folio else 2 * folio
    wanted = (max(PAGE_SIZE, folio // 4), folio, larger)
    return tuple(sorted({e for e in wanted if e <= size and size % e == 0}))
