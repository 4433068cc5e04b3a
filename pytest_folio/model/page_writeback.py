"""Dirtying and writing back folios (mm/page-writeback.c).

A folio is marked dirty with :func:`folio_mark_dirty`, whether or not it is still in a
mapping (the flag alone, as ``noop_dirty_folio`` would leave it, once it was dropped:
nothing will write it back then). :func:`do_writepages` writes a mapping's dirty folios
through ``a_ops.writepage``; without one (ramfs) they stay dirty. Each folio goes
through the kernel's steps: :func:`folio_clear_dirty_for_io`, :func:`folio_start_writeback`,
the I/O, :func:`folio_end_writeback`; a power cut between the start and the end leaves
the store holding whatever part of the I/O the device had done (see
``BlockDevice.power_cut``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pytest_folio.model.constants import PAGE_SHIFT
from pytest_folio.model.folio import Folio, FolioDeadlock

if TYPE_CHECKING:
    from pytest_folio.model.filemap import AddressSpace


def folio_mark_dirty(folio: Folio) -> bool:
    """Mark a folio dirty; True if it was clean."""
    if folio.dirty:
        return False
    folio.dirty = True
    return True


def folio_clear_dirty_for_io(folio: Folio) -> bool:
    """Clear the dirty flag before the folio's I/O is started; True if it was set."""
    if not folio.dirty:
        return False
    folio.dirty = False
    return True


def folio_start_writeback(folio: Folio) -> None:
    folio.writeback = True


def folio_end_writeback(folio: Folio) -> None:
    folio.writeback = False


def writeback_folio(mapping: AddressSpace, folio: Folio,
                    writepage: Callable[[Folio], None]) -> None:
    """Write one dirty folio of ``mapping`` back through its ``writepage`` (dirty again
    if that fails)."""
    if folio.locked:
        raise FolioDeadlock(f"writeback of folio at index {folio.index}, which "
                            "the caller holds locked")
    folio_clear_dirty_for_io(folio)
    folio_start_writeback(folio)
    mapping.stats.writepage += 1
    try:
        writepage(folio)
    except BaseException:
        folio.dirty = True
        raise
    finally:
        folio_end_writeback(folio)


def do_writepages(mapping: AddressSpace, lstart: int, lend: int) -> None:
    """Write back every dirty folio overlapping bytes [lstart, lend] (lend -1: to the
    end), each cleared of its dirty flag and under writeback while ``writepage`` runs
    (dirty again if it fails). Without ``writepage`` nothing happens."""
    writepage = getattr(mapping.a_ops, "writepage", None)
    if writepage is None:
        return
    last = (1 << 63) if lend < 0 else lend >> PAGE_SHIFT
    for folio in mapping.filemap_get_folios(lstart >> PAGE_SHIFT, last):
        if folio.dirty:
            writeback_folio(mapping, folio, writepage)
