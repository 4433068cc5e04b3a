"""A NAND-like flash: 2 KiB pages with 64 bytes of out-of-band data each, written in
whole pages only (EINVAL for anything else, as nand_base's alignment check), programming
clears bits, erases by whole eraseblocks. The OOB of a programmed page holds a
checksum of its data after the bad-block marker; an erased page's OOB is all 0xFF.
Pages are kept in a dict (an absent page is erased). ``sync`` commits the pages
programmed since the last one to the "medium"; a power cut keeps only committed pages,
and a page being programmed at the cut is never half written. No bad blocks, but it
answers ``block_isbad``. Reads answer a memoryview of a copy.
"""

from __future__ import annotations

import errno
import hashlib

from pytest_folio.linux.uapi import MTD_CAP_NANDFLASH, MTD_NANDFLASH, MTD_WRITEABLE

PAGE, OOB = 2048, 64


class Nand:
    type = MTD_NANDFLASH
    writesize = PAGE
    oobsize = OOB

    def __init__(self, size: int, erasesize: int, readonly: bool = False) -> None:
        if erasesize % PAGE or size % erasesize:
            raise ValueError("geometry")
        self.name = "fresh2-nand"
        self.size, self.erasesize = size, erasesize
        self.flags = MTD_CAP_NANDFLASH & ~MTD_WRITEABLE if readonly else MTD_CAP_NANDFLASH
        self.committed: dict[int, bytes] = {}
        self.pending: dict[int, bytes | None] = {}     # None: erased since the last sync

    def _page(self, n: int) -> bytes | None:
        if n in self.pending:
            return self.pending[n]
        return self.committed.get(n)

    def _check(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise OSError(errno.EINVAL, "beyond the device")

    def read(self, offset: int, length: int) -> memoryview:
        self._check(offset, length)
        out = bytearray()
        pos = offset
        while pos < offset + length:
            n, at = divmod(pos, PAGE)
            take = min(PAGE - at, offset + length - pos)
            data = self._page(n)
            out += data[at:at + take] if data is not None else b"\xff" * take
            pos += take
        return memoryview(bytes(out))

    def read_oob(self, offset: int, length: int) -> bytes:
        self._check(offset, 0)
        out = bytearray()
        n = offset // PAGE
        while len(out) < length:
            data = self._page(n)
            if data is None:
                out += b"\xff" * OOB
            else:
                out += b"\xff\xff" + hashlib.sha256(data).digest()[:24] + b"\xff" * 38
            n += 1
        return bytes(out[:length])

    def block_isbad(self, offset: int) -> bool:
        self._check(offset, 0)
        return False

    def write(self, offset: int, data: bytes) -> None:
        if not self.flags & MTD_WRITEABLE:
            raise OSError(errno.EROFS, "read-only")
        self._check(offset, len(data))
        if not data:            # nand_do_write_ops: nothing to write, before alignment
            return
        if offset % PAGE or len(data) % PAGE:
            raise OSError(errno.EINVAL, "NAND writes whole pages")
        for i in range(0, len(data), PAGE):
            n = (offset + i) // PAGE
            old = self._page(n)
            new = bytes(data[i:i + PAGE])
            if old is not None:
                new = (int.from_bytes(old, "big") & int.from_bytes(new, "big")).to_bytes(
                    PAGE, "big")
            self.pending[n] = None if new == b"\xff" * PAGE else new

    def erase(self, offset: int, length: int) -> None:
        if offset < 0 or offset >= self.size or length < 0 or length > self.size - offset:
            raise OSError(errno.EINVAL, "beyond the device")
        if not self.flags & MTD_WRITEABLE:
            raise OSError(errno.EROFS, "read-only")
        if not length:
            return
        if offset % self.erasesize or length % self.erasesize:
            raise OSError(errno.EINVAL, "NAND erases whole eraseblocks")
        for n in range(offset // PAGE, (offset + length) // PAGE):
            self.pending[n] = None

    def sync(self) -> None:
        for n, data in self.pending.items():
            if data is None:
                self.committed.pop(n, None)
            else:
                self.committed[n] = data
        self.pending.clear()

    def reopen(self) -> None:
        self.sync()

    def power_cut(self) -> None:
        self.pending.clear()

    def close(self) -> None:
        self.sync()


def factory(size: int, erasesize: int, folio_order: int = 0,
            readonly: bool = False) -> Nand:
    return Nand(size, erasesize, readonly)
