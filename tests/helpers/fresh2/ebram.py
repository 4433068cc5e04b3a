"""A RAM-like MTD (as mtdram: writes overwrite, erases by whole eraseblocks, EINVAL
otherwise) kept as a dict of eraseblocks (an erased one is absent: all 0xFF), with a
small write-back cache of eraseblocks in front (LRU, 8 of them): ``sync`` writes the
dirty ones back, ``drop_caches`` forgets the clean ones, ``reopen`` does both, a power
cut loses the dirty ones. Each eraseblock is written back whole, so a cut leaves each
one all old or all new (``power_cut_unit``). Errors carry only their errno.
"""

from __future__ import annotations

import errno
from collections import OrderedDict

from pytest_folio.linux.uapi import MTD_CAP_RAM, MTD_RAM, MTD_WRITEABLE

CACHED = 8


class EraseblockRam:
    type = MTD_RAM
    writesize = 1
    oobsize = 0

    def __init__(self, size: int, erasesize: int, readonly: bool = False) -> None:
        self.name = f"fresh2-ebram {size >> 10}K"
        self.size, self.erasesize = size, erasesize
        self.power_cut_unit = erasesize
        self.flags = MTD_CAP_RAM & ~MTD_WRITEABLE if readonly else MTD_CAP_RAM
        self.blocks: dict[int, bytes] = {}                 # the medium
        self.cache: OrderedDict[int, tuple[bytearray, bool]] = OrderedDict()

    def _check(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise OSError(errno.EINVAL)

    def _block(self, n: int) -> bytearray:
        if n in self.cache:
            self.cache.move_to_end(n)
            return self.cache[n][0]
        buf = bytearray(self.blocks.get(n, b"\xff" * self.erasesize))
        self.cache[n] = (buf, False)
        while len(self.cache) > CACHED:
            old, (data, dirty) = self.cache.popitem(last=False)
            if dirty:
                self._store(old, data)
        return buf

    def _store(self, n: int, data: bytearray) -> None:
        if data.count(0xFF) == len(data):
            self.blocks.pop(n, None)
        else:
            self.blocks[n] = bytes(data)

    def _pieces(self, offset: int, length: int):  # type: ignore[no-untyped-def]
        es = self.erasesize
        pos = offset
        while pos < offset + length:
            n, at = divmod(pos, es)
            take = min(es - at, offset + length - pos)
            yield n, at, take, pos - offset
            pos += take

    def read(self, offset: int, length: int) -> bytes:
        self._check(offset, length)
        out = bytearray(length)
        for n, at, take, done in self._pieces(offset, length):
            if n in self.cache:
                out[done:done + take] = self._block(n)[at:at + take]
            else:
                stored = self.blocks.get(n)
                out[done:done + take] = (stored[at:at + take] if stored is not None
                                         else b"\xff" * take)
        return bytes(out)

    def write(self, offset: int, data: bytes) -> None:
        if not self.flags & MTD_WRITEABLE:
            raise OSError(errno.EROFS)
        self._check(offset, len(data))
        for n, at, take, done in self._pieces(offset, len(data)):
            buf = self._block(n)
            buf[at:at + take] = data[done:done + take]
            self.cache[n] = (buf, True)

    def erase(self, offset: int, length: int) -> None:
        if offset < 0 or offset >= self.size or length < 0 or length > self.size - offset:
            raise OSError(errno.EINVAL)
        if not self.flags & MTD_WRITEABLE:
            raise OSError(errno.EROFS)
        if length == 0:
            return
        if offset % self.erasesize or length % self.erasesize:
            raise OSError(errno.EINVAL)
        for n in range(offset // self.erasesize, (offset + length) // self.erasesize):
            self.cache.pop(n, None)
            self.blocks.pop(n, None)

    def sync(self) -> None:
        for n, (data, dirty) in list(self.cache.items()):
            if dirty:
                self._store(n, data)
                self.cache[n] = (data, False)

    def drop_caches(self) -> None:
        for n in [n for n, (_, dirty) in self.cache.items() if not dirty]:
            del self.cache[n]

    def reopen(self) -> None:
        self.sync()
        self.cache.clear()

    def power_cut(self) -> None:
        self.cache.clear()

    def close(self) -> None:
        self.sync()


def factory(size: int, erasesize: int, **options: object) -> EraseblockRam:
    return EraseblockRam(size, erasesize, readonly=bool(options.get("readonly")))
