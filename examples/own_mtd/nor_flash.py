"""A user's own MTD device: a NOR-like flash held in memory.

It behaves like NOR: a write can only clear bits (the cell keeps ``old & new``), only an
erase sets bits back, to 0xFF, and erases go by whole eraseblocks. pytest-folio runs its
suites against it with ``--folio-mtd nor_flash:factory``.
"""

from __future__ import annotations

import errno

from pytest_folio.targets.protocols import MTD_CAP_NORFLASH, MTD_NORFLASH


class NorFlash:
    """Satisfies pytest_folio.targets.protocols.MTDDevice."""

    type = MTD_NORFLASH
    flags = MTD_CAP_NORFLASH
    writesize = 1
    oobsize = 0

    def __init__(self, size: int, erasesize: int) -> None:
        if size % erasesize:
            raise ValueError(f"erasesize {erasesize} does not divide the size {size}")
        self.name = f"nor-example ({size >> 20} MiB)"
        self.size = size
        self.erasesize = erasesize
        self.cells = bytearray(b"\xff") * size
        self.erases = [0] * (size // erasesize)  # wear, per eraseblock

    def _check(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise OSError(errno.EINVAL, f"{offset}+{length} is outside the flash")

    def read(self, offset: int, length: int) -> bytes:
        self._check(offset, length)
        return bytes(self.cells[offset:offset + length])

    def write(self, offset: int, data: bytes) -> None:
        self._check(offset, len(data))
        old = int.from_bytes(self.cells[offset:offset + len(data)], "little")
        new = old & int.from_bytes(data, "little")  # programming only clears bits
        self.cells[offset:offset + len(data)] = new.to_bytes(len(data), "little")

    def erase(self, offset: int, length: int) -> None:
        self._check(offset, length)
        if offset >= self.size:    # the MTD core: an erase must start inside, even of nothing
            raise OSError(errno.EINVAL, "erase starts past the end")
        if not length:             # ... and then does nothing, without asking the driver
            return
        if offset % self.erasesize or length % self.erasesize:
            raise OSError(errno.EINVAL, "NOR erases whole eraseblocks only")
        self.cells[offset:offset + length] = b"\xff" * length
        for block in range(offset // self.erasesize, (offset + length) // self.erasesize):
            self.erases[block] += 1

    def sync(self) -> None:
        pass  # nothing is cached

    def close(self) -> None:
        self.cells = bytearray()


def factory(size: int, erasesize: int, **_ignored: object) -> NorFlash:
    """What ``--folio-mtd nor_flash:factory`` calls once per test. pytest-folio passes
    ``size``, ``erasesize`` and ``folio_order``; a flash chip has no folio order."""
    return NorFlash(size, erasesize)
