"""Sizes as users write them (``4k``, ``16K``, ``2M``, ``64KiB``) and as test ids show them."""

from __future__ import annotations

import re

from pytest_folio.linux.constants import MAX_PAGECACHE_ORDER, PAGE_SHIFT, PAGE_SIZE

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str | int) -> int:
    """Parse ``4096``, ``4k``, ``16K``, ``2M`` or ``64KiB`` into bytes (binary units)."""
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size must not be negative: {text}")
        return text
    match = _SIZE_RE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r} (use e.g. 4096, 4k, 16K, 2M, 64KiB)")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def format_size(n: int) -> str:
    """The short form used in ids and tables: 4K, 16K, 2M, 512B."""
    for suffix, unit in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return f"{n}B"


def format_kib(n: int) -> str:
    """The long form mtd_speedtest and the seeds use in row names: 512 B, 1 KiB, 128 KiB."""
    for suffix, unit in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {suffix}"
    return f"{n} B"


def parse_list(text: str) -> list[str]:
    """Split a comma- or space-separated option value, dropping empty items."""
    return [part for part in re.split(r"[,\s]+", text.strip()) if part]


def is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def ilog2(n: int) -> int:
    """log2 of a power of two."""
    return n.bit_length() - 1


def blocksize_order(logical_block_size: int) -> int:
    """The minimum folio order a block size needs (0 up to PAGE_SIZE): a page cache over
    blocks of that size holds folios of at least one block."""
    return max(0, ilog2(logical_block_size) - PAGE_SHIFT)


def ffs0(n: int) -> int:
    """The kernel's ``__ffs``: the index of the lowest set bit (n > 0)."""
    return (n & -n).bit_length() - 1


MIN_BLOCKSIZE = PAGE_SIZE
MAX_BLOCKSIZE = PAGE_SIZE << MAX_PAGECACHE_ORDER


def parse_block_size(value: int | str) -> int:
    """The ``blocksize`` mount option: a power of two from 4K to 2M, as bytes or a size
    such as ``"16k"``. The seed patch clamps anything else silently; we refuse it."""
    size = value if isinstance(value, int) else parse_size(value)
    if not is_power_of_two(size) or not MIN_BLOCKSIZE <= size <= MAX_BLOCKSIZE:
        raise ValueError(f"block size {size} must be a power of two from "
                         f"{format_size(MIN_BLOCKSIZE)} to {format_size(MAX_BLOCKSIZE)}")
    return size
