"""Interface checks every MTD device must pass: range errors and read-only refusal.

They write only bytes the device already holds (read first, write the same back), so a
correct device changes nothing, and a buggy one that accepts the write or wraps it to
another offset still loses nothing: the check fails on the missing error instead.
"""

from __future__ import annotations

import errno

from pytest_folio.mtdtests.common import (
    Geometry,
    MTDTestError,
    check_data,
    expect_errno,
    is_writeable,
    mtdtest_read,
)
from pytest_folio.targets.protocols import MTDDevice


def check_bounds(dev: MTDDevice, write: bool = True) -> None:
    """Out-of-range read, write and erase are EINVAL (``write`` also tries write/erase)."""
    geo = Geometry.of(dev)
    end, pg = geo.size, geo.pgsize
    expect_errno(errno.EINVAL, f"read of {pg} bytes at the device size {end:#x}",
                 lambda: dev.read(end, pg))
    expect_errno(errno.EINVAL, f"read of {2 * pg} bytes across the end at {end - pg:#x}",
                 lambda: dev.read(end - pg, 2 * pg))
    if not write:
        return
    tail, head = mtdtest_read(dev, end - pg, pg), mtdtest_read(dev, 0, pg)
    # The bytes a wrapping device would put at the end and at offset 0 are those already
    # there, so even a device that wraps instead of failing keeps its data.
    expect_errno(errno.EINVAL, f"write of {2 * pg} bytes across the end at {end - pg:#x}",
                 lambda: dev.write(end - pg, tail + head))
    expect_errno(errno.EINVAL, f"erase of one eraseblock at the device size {end:#x}",
                 lambda: dev.erase(end, geo.erasesize))


def check_readonly(dev: MTDDevice, erase: bool = False) -> None:
    """A device without MTD_WRITEABLE refuses write (and, if ``erase``, erase) with EROFS.

    The write puts back what the first page holds; the erase, which cannot be made
    harmless, is tried only when the caller allows it.
    """
    if is_writeable(dev):
        raise ValueError(f"{dev.name} is writeable (MTD_WRITEABLE is set)")
    geo = Geometry.of(dev)
    before = mtdtest_read(dev, 0, geo.pgsize)
    expect_errno(errno.EROFS, "write to a read-only device", lambda: dev.write(0, before))
    if erase:
        expect_errno(errno.EROFS, "erase of a read-only device",
                     lambda: dev.erase(0, geo.erasesize))
    after = mtdtest_read(dev, 0, geo.pgsize)
    if after != before:
        check_data("read-only device changed", 0, after, before)
        raise MTDTestError("read-only device changed")
