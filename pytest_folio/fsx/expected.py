"""The in-memory file fsx checks the target against, and the data fsx writes.

:class:`FileModel` is fsx's ``good_buf`` and ``file_size``: each operation is applied to
it with fsx's semantics, and every read of the target is compared with it. Bytes past the
size are left stale, as in fsx, and zeroed when the file grows over them again.

:class:`DataPattern` is fsx's ``gendata``: the byte at an even offset is the operation
number mod 256, the byte at an odd offset adds a seeded random byte to it, so a bad byte
usually tells which operation wrote it (fsx's "operation# (mod 256) for the bad data may
be ...").
"""

from __future__ import annotations

# An operation number's whole-file pattern is built once the bytes asked of it reach
# PATTERN_CACHE_AFTER whole patterns' worth: until then each write translates just its
# own range (as fsx's gendata() does), after it a write is a slice of the built pattern.
# That is the rent-or-buy rule: buy once the rent paid equals the price. The price is a
# translation of the whole pattern into memory the process has never touched, and each
# new page of that is a page fault (about 2.3 us here, half the cost of translating
# it), while a write's own translation reuses memory just freed: so the price is about
# two patterns' rent, and runs of 10,000 operations (about 200 KiB asked of each
# pattern) translate almost every write, runs of 100,000 mostly slice. Only while all 256
# patterns fit in PATTERN_CACHE_BYTES (64 MiB for the default 256 KiB file).
PATTERN_CACHE_AFTER = 2
PATTERN_CACHE_BYTES = 64 << 20

_ADD = tuple(bytes((i + c) & 0xFF for i in range(256)) for c in range(256))


class DataPattern:
    """gendata(): the bytes operation ``testcalls`` writes at any offset below ``length``."""

    def __init__(self, original: bytes | bytearray) -> None:
        odd = bytearray(len(original))
        odd[1::2] = original[1::2]
        self._odd = bytes(odd)
        self._cache: dict[int, bytes] = {}
        # the bytes asked of each operation number's pattern so far
        self._uses = [0] * 256 if len(original) * 256 <= PATTERN_CACHE_BYTES else None

    def __len__(self) -> int:
        return len(self._odd)

    def get(self, testcalls: int, offset: int, size: int) -> bytes:
        c = testcalls & 0xFF
        whole = self._cache.get(c)
        if whole is not None:
            return whole[offset:offset + size]
        uses = self._uses
        if uses is not None:
            uses[c] += size
            if uses[c] > PATTERN_CACHE_AFTER * len(self._odd):
                whole = self._cache[c] = self._odd.translate(_ADD[c])
                return whole[offset:offset + size]
        return self._odd[offset:offset + size].translate(_ADD[c])


# Zeroes to copy from: a slice of this is no allocation (most zeroed ranges are below it).
_ZEROES = memoryview(bytes(1 << 20))


def _zeroes(n: int) -> memoryview | bytes:
    return _ZEROES[:n] if n <= len(_ZEROES) else bytes(n)


class FileModel:
    """fsx's good_buf and file_size, with each operation's effect on them.

    Ranges are copied through ``_view``, a memoryview of ``buf``: a bytearray slice
    assignment first copies a source that is not a bytearray, a memoryview's copies once
    (and moves overlapping ranges as memmove does)."""

    def __init__(self, maxfilelen: int) -> None:
        self.buf = bytearray(maxfilelen)
        self._view = memoryview(self.buf)
        self.size = 0

    def _reserve(self, end: int) -> None:
        if end > len(self.buf):
            self._view.release()  # a bytearray with a view exported cannot grow
            self.buf.extend(bytes(end - len(self.buf)))
            self._view = memoryview(self.buf)

    def contents(self) -> bytes:
        return bytes(self._view[:self.size])

    def update_file_size(self, offset: int, size: int) -> None:
        """The file now ends at offset + size; a gap after the old EOF reads as zeroes."""
        self._reserve(offset + size)
        if offset > self.size:
            self._view[self.size:offset] = _zeroes(offset - self.size)
        self.size = offset + size

    def write(self, offset: int, data: memoryview | bytes) -> None:
        end = offset + len(data)
        if end > len(self.buf):
            self._reserve(end)
        self._view[offset:end] = data
        if end > self.size:
            self.update_file_size(offset, len(data))

    def truncate(self, size: int) -> None:
        self.update_file_size(size, 0)

    def zero(self, offset: int, length: int) -> None:
        self._reserve(offset + length)
        self._view[offset:offset + length] = _zeroes(length)

    def punch_hole(self, offset: int, length: int) -> None:
        """FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: zeroes, clipped at EOF."""
        start = min(offset, self.size)
        self.zero(start, min(length, self.size - start))

    def fallocate(self, offset: int, length: int, keep_size: bool) -> None:
        """Allocation reads as zeroes; only a non-KEEP_SIZE call past EOF changes anything."""
        end = 0 if keep_size else offset + length
        if end > self.size:
            self.update_file_size(end, 0)

    def zero_range(self, offset: int, length: int, keep_size: bool) -> None:
        if not keep_size and offset + length > self.size:
            self.update_file_size(offset, length)
        self.zero(offset, length)

    def collapse_range(self, offset: int, length: int) -> None:
        end = offset + length
        view = self._view
        view[offset:self.size - length] = view[end:self.size]
        self.size -= length

    def insert_range(self, offset: int, length: int) -> None:
        self._reserve(self.size + length)
        view = self._view
        view[offset + length:self.size + length] = view[offset:self.size]
        view[offset:offset + length] = _zeroes(length)
        self.size += length

    def copy_range(self, offset: int, length: int, dest: int) -> None:
        if dest + length > self.size:
            self.update_file_size(dest, length)
        view = self._view
        view[dest:dest + length] = view[offset:offset + length]
