"""A NOR-like flash on one bytearray with a write buffer in front of it: a write lands
in a 4 KiB buffered page (programming only clears bits: the page keeps ``old & new``),
``sync`` programs the buffered pages into the array, a power cut loses the buffer but
for the pages the controller had already programmed (the first few, in the order they
were dirtied). Erases go by whole eraseblocks, straight to the array. Reads answer a
bytearray; writes answer the count.
"""

from __future__ import annotations

import errno

from pytest_folio.linux.uapi import MTD_CAP_NORFLASH, MTD_NORFLASH, MTD_WRITEABLE

BUF_PAGE = 4096


class BufferedNor:
    type = MTD_NORFLASH
    writesize = 1
    oobsize = 0

    def __init__(self, size: int, erasesize: int, readonly: bool = False) -> None:
        self.name = "fresh2-bufnor"
        self.size, self.erasesize = size, erasesize
        self.flags = MTD_CAP_NORFLASH & ~MTD_WRITEABLE if readonly else MTD_CAP_NORFLASH
        self.array = bytearray(b"\xff" * size)
        self.buffer: dict[int, bytearray] = {}     # dirtied order kept by dict order
        self.cuts = 0

    def _range(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise OSError(errno.EINVAL, "out of range")

    def read(self, offset: int, length: int) -> bytearray:
        self._range(offset, length)
        out = bytearray(self.array[offset:offset + length])
        if not self.buffer:
            return out
        for idx in range(offset // BUF_PAGE, -(-(offset + length) // BUF_PAGE)):
            page = self.buffer.get(idx)
            if page is None:
                continue
            lo, hi = max(offset, idx * BUF_PAGE), min(offset + length, (idx + 1) * BUF_PAGE)
            if lo < hi:
                out[lo - offset:hi - offset] = page[lo - idx * BUF_PAGE:hi - idx * BUF_PAGE]
        return out

    def write(self, offset: int, data: bytes) -> int:
        if not self.flags & MTD_WRITEABLE:
            raise OSError(errno.EROFS, "read-only")
        self._range(offset, len(data))
        pos = 0
        while pos < len(data):
            idx, at = divmod(offset + pos, BUF_PAGE)
            take = min(BUF_PAGE - at, len(data) - pos)
            page = self.buffer.get(idx)
            if page is None:
                start = idx * BUF_PAGE
                page = self.buffer[idx] = bytearray(self.array[start:start + BUF_PAGE])
            old = int.from_bytes(page[at:at + take], "big")
            new = old & int.from_bytes(data[pos:pos + take], "big")
            page[at:at + take] = new.to_bytes(take, "big")
            pos += take
        return len(data)

    def _program(self, idx: int) -> None:
        page = self.buffer.pop(idx)
        start = idx * BUF_PAGE
        self.array[start:start + len(page)] = page[:self.size - start]

    def erase(self, offset: int, length: int) -> None:
        if offset < 0 or offset >= self.size or length < 0 or length > self.size - offset:
            raise OSError(errno.EINVAL, "out of range")
        if not self.flags & MTD_WRITEABLE:
            raise OSError(errno.EROFS, "read-only")
        if not length:
            return
        if offset % self.erasesize or length % self.erasesize:
            raise OSError(errno.EINVAL, "NOR erases whole eraseblocks")
        for idx in range(offset // BUF_PAGE, -(-(offset + length) // BUF_PAGE)):
            self.buffer.pop(idx, None)  # buffered programming of an erased block is moot
        self.array[offset:offset + length] = b"\xff" * length

    def sync(self) -> None:
        for idx in list(self.buffer):
            self._program(idx)

    def reopen(self) -> None:
        self.sync()

    def power_cut(self) -> None:
        self.cuts += 1
        done = self.cuts * 7 % (len(self.buffer) + 1)
        for idx in list(self.buffer)[:done]:
            self._program(idx)
        self.buffer.clear()

    def close(self) -> None:
        self.sync()


def factory(size: int, erasesize: int, readonly: bool = False) -> BufferedNor:
    return BufferedNor(size, erasesize, readonly)
