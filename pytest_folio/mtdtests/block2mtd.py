"""Checks only the reference block2mtd can answer, because they look inside its page cache.

They are what block2mtd.c promises and what the folio conversion must keep: an erase
leaves pages that are already 0xFF alone (nothing dirtied, nothing written back), a write
of the bytes already there dirties nothing, a folio dropped between lookup and lock does
not swallow a write or an erase (the race the series' first patch fixes), and the page
and folio code paths leave identical bytes on the device.
"""

from __future__ import annotations

import random

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.model.block2mtd import APIS, Block2MTD
from pytest_folio.mtdtests.common import MTDTestError, check_data, mtdtest_read
from pytest_folio.mtdtests.stress import run_stresstest
from pytest_folio.targets.mtd import reference_device, resolve_mtd_target


def _dirty_folios(dev: Block2MTD) -> list[int]:
    return [folio.index for folio in dev.mapping.folios() if folio.dirty]


def _expect(what: str, got: object, expected: object) -> None:
    if got != expected:
        raise MTDTestError(f"{what}: got {got}, expected {expected}")


def check_erase_skips_erased_pages(dev: Block2MTD, ebnum: int = 0) -> None:
    """Erase fills only the pages that are not all 0xFF; erasing again dirties nothing."""
    esz = dev.erasesize
    pages = esz // PAGE_SIZE
    base = ebnum * esz
    dev.erase(base, esz)
    dev.sync()
    data_pages = list(range(0, pages, 3))           # every third page holds data
    for p in data_pages:
        dev.write(base + p * PAGE_SIZE, b"\x5a" * PAGE_SIZE)
    dev.sync()
    before = dev.stats.snapshot()
    dev.erase(base, esz)
    delta = dev.stats.delta(before)
    _expect(f"EB {ebnum}: pages an erase filled", delta.get("erase_pages_written", 0),
            len(data_pages))
    _expect(f"EB {ebnum}: already erased pages an erase skipped",
            delta.get("erase_pages_skipped", 0), pages - len(data_pages))
    check_data(f"EB {ebnum} after erase", base, mtdtest_read(dev, base, esz), b"\xff" * esz)
    dev.sync()
    before = dev.stats.snapshot()
    dev.erase(base, esz)
    delta = dev.stats.delta(before)
    _expect(f"EB {ebnum}: pages an erase of an erased block filled",
            delta.get("erase_pages_written", 0), 0)
    _expect(f"EB {ebnum}: folios dirtied by erasing an erased block", _dirty_folios(dev), [])
    before = dev.stats.snapshot()
    dev.sync()
    _expect(f"EB {ebnum}: folios written back after erasing an erased block",
            dev.stats.delta(before).get("writepage", 0), 0)


def check_unchanged_write_dirties_nothing(dev: Block2MTD, ebnum: int = 1,
                                          seed: int = 1) -> None:
    """A write of the bytes already there dirties no folio; one changed byte dirties one."""
    esz = dev.erasesize
    base = ebnum * esz
    data = random.Random(seed).randbytes(esz)
    dev.write(base, data)
    dev.sync()
    _expect("dirty folios after sync", _dirty_folios(dev), [])
    before = dev.stats.snapshot()
    dev.write(base, data)
    _expect(f"EB {ebnum}: folios dirtied by rewriting the same bytes", _dirty_folios(dev), [])
    _expect(f"EB {ebnum}: bytes copied by rewriting the same bytes",
            dev.stats.delta(before).get("bytes_copied", 0), 0)
    changed = base + esz // 2
    dev.write(changed, bytes([data[esz // 2] ^ 0xFF]))
    folio = dev.mapping.filemap_get_folio(changed // PAGE_SIZE)
    _expect(f"EB {ebnum}: folios dirtied by changing one byte", _dirty_folios(dev),
            [] if folio is None else [folio.index])
    dev.sync()


def check_dropped_folio_race(dev: Block2MTD, ebnum: int = 2) -> int:
    """invalidate_bdev() drops the folio between lookup and lock; the write and the erase
    must still land (by retrying). Returns the number of retries the device made."""
    esz = dev.erasesize
    base = ebnum * esz
    retries = 0
    for what, apply, expected in (
            ("write", lambda: dev.write(base, b"\xa5" * PAGE_SIZE), b"\xa5" * PAGE_SIZE),
            ("erase", lambda: dev.erase(base, esz), b"\xff" * PAGE_SIZE)):
        mtdtest_read(dev, base, PAGE_SIZE)     # the folio is cached ...
        dev.sync()                             # ... and clean, so invalidate_bdev drops it
        before = dev.stats.snapshot()
        dev.drop_folio_before_lock(1)
        apply()
        dev.before_lock = None
        retries += dev.stats.delta(before).get("retries", 0)
        got = mtdtest_read(dev, base, PAGE_SIZE)
        if got != expected:
            raise MTDTestError(
                f"{what} at {base:#x} lost: its folio was dropped from the page cache "
                f"between lookup and lock and the {what} went into the dropped folio "
                f"({dev!r})")
    return retries


def check_api_paths_agree(dev: Block2MTD, count: int = 300,
                          seed: int = 1) -> dict[str, dict[str, int]]:
    """The same random operations through the other ``api`` leave the same bytes, in the
    cache and, after sync, on the block device. Returns each api's counter deltas."""
    other_api = next(a for a in APIS if a != dev.api)
    retry = "on" if dev.retry else "off"
    target = resolve_mtd_target(f"reference:api={other_api},retry={retry}")
    deltas: dict[str, dict[str, int]] = {}
    with target.open(size=dev.size, erasesize=dev.erasesize,
                     folio_order=dev.folio_order) as opened:
        other = reference_device(opened)
        assert other is not None
        for d in (dev, other):
            before = d.stats.snapshot()
            run_stresstest(d, count=count, seed=seed)
            d.sync()
            deltas[d.api] = d.stats.delta(before)
        check_data(f"api={other_api} vs api={dev.api}: device contents", 0,
                   other.read(0, dev.size), dev.read(0, dev.size))
        check_data(f"api={other_api} vs api={dev.api}: block device after sync", 0,
                   other.bdev.read_backing(0, dev.size), dev.bdev.read_backing(0, dev.size))
    return deltas
