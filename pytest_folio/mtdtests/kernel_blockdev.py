"""The block device under a kernel block2mtd, as the invalidate race suite drops its cache.

block2mtd (drivers/mtd/devices/block2mtd.c) looks a page up in its block device's page
cache (``read_mapping_page``/``read_mapping_folio``, which takes a reference), compares,
and only then locks it to change it. Three ways to drop that cache run from other threads
while it writes:

- ``BLKFLSBUF`` on the block device (sync, then ``invalidate_bdev()``) and
  ``echo 1 > /proc/sys/vm/drop_caches``: both end in ``invalidate_mapping_pages()``, whose
  ``mapping_evict_folio()`` leaves a folio alone while anyone else holds a reference to it,
  so they cannot take the folio block2mtd has looked up;
- ``BLKZEROOUT`` of one 512-byte sector: with block2mtd holding the device exclusively,
  ``truncate_bdev_range()`` cannot claim it and falls back to
  ``invalidate_inode_pages2_range()`` over the pages of that sector, which removes a clean
  folio whatever its reference count (``folio_unmap_invalidate()``), then zeroes the
  sector (on a disk of logical blocks above 512 bytes, the VM's, it refuses the partial
  block with EINVAL after the drop). That is the window the seed's first patch closes: a
  write or erase between the lookup and the lock goes into a folio no longer in the page
  cache, and is lost. The sector's bytes may be lost too, so the suite keeps those
  sectors out of its data.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct

from pytest_folio.mtdtests.kernel_modules import block2mtd_blockdev

BLKFLSBUF = 0x1261   # _IO(0x12, 97)
BLKZEROOUT = 0x127F  # _IO(0x12, 127): u64 range[2] = {start, len}
SECTOR = 512
DROP_CACHES = "/proc/sys/vm/drop_caches"


class BackingDevice:
    """The block device a kernel block2mtd device sits on, opened beside it (not
    exclusively: block2mtd holds it so), for the cache-dropping threads."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)

    @classmethod
    def of(cls, mtd_name: str) -> BackingDevice | None:
        """The device under an MTD device named ``block2mtd: /dev/vdX``; None when it is
        not block2mtd's or cannot be opened here (not root, another machine's path)."""
        path = block2mtd_blockdev(mtd_name)
        if path is None:
            return None
        try:
            return cls(path)
        except OSError:
            return None

    def flush(self) -> None:
        """BLKFLSBUF: sync the device's page cache, then drop what is clean and unused."""
        fcntl.ioctl(self.fd, BLKFLSBUF)

    def zero_sector(self, offset: int) -> bool:
        """BLKZEROOUT of the sector at ``offset``: drops the page holding it from the page
        cache even while block2mtd holds it, then zeroes the sector, or on a disk whose
        logical blocks are larger than a sector refuses to (EINVAL, after the drop).
        False when the page was dirty (EBUSY: only clean pages are invalidated)."""
        try:
            fcntl.ioctl(self.fd, BLKZEROOUT, struct.pack("=QQ", offset, SECTOR))
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                return False
            if exc.errno != errno.EINVAL:
                raise
        return True

    def close(self) -> None:
        os.close(self.fd)


def drop_caches() -> None:
    """``echo 1 > /proc/sys/vm/drop_caches``: every clean, unused page cache page goes."""
    with open(DROP_CACHES, "w") as f:
        f.write("1\n")
