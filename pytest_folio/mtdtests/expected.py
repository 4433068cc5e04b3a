"""The MTD fsx suite's in-memory oracle: what a correct device holds and answers.

A correct device keeps exactly what was last written or erased, answers out-of-range
reads, writes and erases with EINVAL and writes and erases of a read-only device with
EROFS, in the order the MTD core checks them (drivers/mtd/mtdcore.c, as
:mod:`pytest_folio.linux.mtdcore` applies them). Contents are known per eraseblock once
an erase set them: a device's first contents are its own business, so an eraseblock
nobody erased yet is not compared.
"""

from __future__ import annotations

import dataclasses
import errno

from pytest_folio.linux import mtdcore
from pytest_folio.linux.uapi import MTD_WRITEABLE


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one operation gave: an errno, or success (with the bytes a read returned)."""

    error: int | None = None
    data: bytes | None = None

    def describe(self) -> str:
        if self.error is not None:
            return errno.errorcode.get(self.error, str(self.error))
        if self.data is None:
            return "ok"
        head = self.data[:8].hex(" ")
        return f"ok, {len(self.data)} bytes ({head}{' ...' if len(self.data) > 8 else ''})"


OK = Outcome()


class FlashOracle:
    """The image a correct device of ``size`` bytes in ``erasesize`` eraseblocks holds."""

    def __init__(self, size: int, erasesize: int, *, writeable: bool = True) -> None:
        self.size = size
        self.erasesize = erasesize
        self.flags = MTD_WRITEABLE if writeable else 0
        self.image = bytearray(b"\xff") * size
        self.known = bytearray(size // erasesize)     # 1: this eraseblock was erased

    def check(self, kind: str, offset: int, length: int) -> int | None:
        """The errno the MTD core answers for this operation, or None when it is valid."""
        try:
            if kind == "read":
                mtdcore.mtd_check_read(offset, length, self.size)
            elif kind == "write":
                mtdcore.mtd_check_write(offset, length, self.size, self.flags, "oracle")
            elif kind == "erase":
                mtdcore.mtd_check_erase(offset, length, self.size, self.flags, "oracle")
        except OSError as exc:
            return exc.errno
        return None

    def contents(self, offset: int, length: int) -> bytes:
        """What a correct device holds there (0xFF where unknown)."""
        return bytes(self.image[offset:offset + length])

    def known_ranges(self, offset: int, length: int) -> list[tuple[int, int]]:
        """The parts of ``[offset, offset+length)`` in eraseblocks whose contents are known."""
        esz = self.erasesize
        out: list[tuple[int, int]] = []
        pos, end = max(0, offset), min(offset + length, self.size)
        while pos < end:
            stop = min(end, (pos // esz + 1) * esz)
            if self.known[pos // esz]:
                if out and out[-1][1] == pos:
                    out[-1] = (out[-1][0], stop)
                else:
                    out.append((pos, stop))
            pos = stop
        return out

    def write(self, offset: int, data: bytes) -> None:
        self.image[offset:offset + len(data)] = data

    def erase(self, offset: int, length: int) -> None:
        self.image[offset:offset + length] = b"\xff" * length
        esz = self.erasesize
        for block in range(-(-offset // esz), (offset + length) // esz):   # whole blocks
            self.known[block] = 1

    def adopt(self, offset: int, data: bytes) -> None:
        """Take what a device holds as known (a read-only device's contents)."""
        self.image[offset:offset + len(data)] = data
        esz = self.erasesize
        for block in range(-(-offset // esz), (offset + len(data)) // esz):
            self.known[block] = 1

    def is_erased(self, offset: int, length: int) -> bool:
        """Known and all 0xFF (NAND pages may only be programmed then)."""
        ranges = self.known_ranges(offset, length)
        return (ranges == [(offset, offset + length)]
                and self.image[offset:offset + length] == b"\xff" * length)
