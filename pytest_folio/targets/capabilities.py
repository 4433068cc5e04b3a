"""Every optional call the suites use, what each unlocks, and which a target offers.

A target needs only its protocol (:class:`~.targets.protocols.MTDDevice`,
:class:`~.targets.protocols.FileSystem`); each optional call below adds checks. A target
without one is still tested, with less: :func:`offered` says which it has, the run's
header names what a factory's target lacks, and ``python -m pytest_folio check SPEC``
prints the whole table for one target. docs/architecture.md has the same table.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

from pytest_folio.targets import protocols


@dataclasses.dataclass(frozen=True)
class Capability:
    """One optional call: its name as a user writes it, the protocol the suites ask for
    (by name in :mod:`~.targets.protocols`; an attribute of that name when there is no
    protocol yet), what it unlocks, and what the suites do without it."""

    name: str
    kind: str                       # "mtd" or "fs"
    protocol: str                   # the protocol's name in targets/protocols.py
    attribute: str                  # what isinstance amounts to, without the protocol
    unlocks: str
    without: str


CAPABILITIES = (
    Capability("reopen()", "mtd", "Reopenable", "reopen",
               "fsx for flash closes and opens the device between operations (what was "
               "synced must still be there)",
               "fsx for flash never reopens the device"),
    Capability("power_cut()", "mtd", "PowerCut", "power_cut",
               "the power-cut suites (-k power): what was synced survives a power failure",
               "the power-cut suites skip"),
    Capability("power_cut_unit", "mtd", "PowerCutUnit", "power_cut_unit",
               "the power-cut suites check that a cut leaves each aligned unit of this "
               "size all old or all new (a folio, when written back as one)",
               "a page is promised"),
    Capability("stats.snapshot()", "mtd", "HasStats", "stats",
               "test_speed records the model's counters (compound_head calls, folio "
               "lookups, bytes copied) beside every time",
               "speed rows carry times only"),
    Capability("block_isbad(offset)", "mtd", "HasBadBlocks", "block_isbad",
               "the suites skip bad eraseblocks, as the kernel's mtd tests do",
               "every eraseblock is taken for good"),
    Capability("read_oob(offset, length)", "mtd", "HasOOB", "read_oob",
               "mtd_readtest reads each page's out-of-band bytes too",
               "the read test reads data only"),
    Capability("folio_order", "mtd", "HasFolioOrder", "folio_order",
               "a device's own folio order places fsx for flash's folio boundaries and "
               "labels its measurements when a test has no order",
               "the test's folio order, or none"),
    Capability("is_real_device", "mtd", "RealDevice", "is_real_device",
               "True: suites that erase and write need --folio-allow-destructive",
               "taken for a device that may be written"),
    Capability("readonly=True", "mtd", "", "",
               "the factory makes a read-only device: the read-only checks "
               "(test_readonly_device_refuses_every_write_and_erase)",
               "the read-only checks skip"),
    Capability("mmap_read(), mmap_write()", "fs", "MappedIO", "mmap_read",
               "fsx's mapread and mapwrite, the EOF-page checks, mapped writes in the "
               "semantics suites", "those operations are skipped (fsx counts them)"),
    Capability("fallocate()", "fs", "Fallocate", "fallocate",
               "fsx's fallocate, punch hole, zero, collapse and insert range, the fallocate "
               "and st_blocks checks", "those operations and checks are skipped"),
    Capability("copy_file_range()", "fs", "CopyFileRange", "copy_file_range",
               "fsx's copy range, the copy tests", "those are skipped"),
    Capability("mkdir(), rmdir()", "fs", "Directories", "mkdir",
               "the directory tests of the namespace suites", "those are skipped"),
    Capability("drop_caches(path)", "fs", "DropCaches", "drop_caches",
               "fsx's close and reopen drops the file's cached folios (fsx's echo 3 > "
               "drop_caches), so data lost between the cache and the backing store shows, "
               "at 16K and 64K blocks too",
               "close and reopen keep the cache: writeback and read-in bugs may stay hidden"),
    Capability("power_cut()", "fs", "PowerCut", "power_cut",
               "the power-cut suites (-k power): what was fsync'd survives a power failure",
               "the power-cut suites skip"),
    Capability("umount()", "fs", "Unmountable", "umount",
               "called after each test, also a failed one, so the file system can check "
               "itself and free what it holds",
               "the file system is dropped without a tear-down"),
)


def _has(obj: object, capability: Capability) -> bool:
    protocol = getattr(protocols, capability.protocol, None) if capability.protocol else None
    if protocol is None:
        return hasattr(obj, capability.attribute)
    if capability.kind == "fs":
        # a FileSystemBase's EOPNOTSUPP defaults count as left out
        return protocols.supports(obj, protocol)
    return isinstance(obj, protocol)


def takes_readonly(factory: Callable[..., Any] | None) -> bool:
    """Whether a factory can be asked for a read-only device (``readonly=`` or
    ``**kwargs``; whether it honours it is the read-only checks' to find); None, the
    reference (which can)."""
    if factory is None:
        return True
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "readonly" or p.kind is p.VAR_KEYWORD for p in params)


def offered(obj: object, kind: str,
            factory: Callable[..., Any] | None = None) -> list[tuple[Capability, bool]]:
    """Every capability of ``kind`` (mtd, fs) with whether ``obj`` (made by ``factory``,
    for the factory's own capabilities; None for the reference) offers it."""
    rows = []
    for capability in CAPABILITIES:
        if capability.kind != kind:
            continue
        if capability.name == "readonly=True":
            rows.append((capability, takes_readonly(factory)))
        else:
            rows.append((capability, _has(obj, capability)))
    return rows


def lacking_line(rows: list[tuple[Capability, bool]]) -> str:
    """One line: what a target lacks and what the suites therefore skip."""
    missing = [f"{c.name} ({c.without})" for c, has in rows if not has]
    return "lacks " + "; ".join(missing) if missing else "offers every optional call"


def table(rows: list[tuple[Capability, bool]]) -> str:
    """The capabilities as a text table: name, offered, what it unlocks."""
    width = max(len(c.name) for c, _ in rows)
    lines = [f"{'optional call':<{width}}  offered  unlocks (without it: ...)"]
    for capability, has in rows:
        what = capability.unlocks if has else f"{capability.unlocks} (without it: " \
            f"{capability.without})"
        lines.append(f"{capability.name:<{width}}  {'yes' if has else 'no':<7}  {what}")
    return "\n".join(lines)
