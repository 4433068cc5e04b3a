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

# An operation number's pattern is translated one PATTERN_CHUNK at a time, the first time
# a write asks for bytes in that chunk, and kept: a write is then a join of kept chunks.
# Every byte of every pattern is translated at most once (fsx's gendata() computes each
# write's bytes afresh), and only the chunks some write touched ever are (at 10,000
# operations about two thirds of them; at 100,000 all). Only while all 256 patterns fit
# in PATTERN_CACHE_BYTES (64 MiB for the default 256 KiB file); past that each write
# translates its own range.
PATTERN_CHUNK_SHIFT = 12
PATTERN_CHUNK = 1 << PATTERN_CHUNK_SHIFT
PATTERN_CACHE_BYTES = 64 << 20

_ADD = tuple(bytes((i + c) & 0xFF for i in range(256)) for c in range(256))


class DataPattern:
    """gendata(): the bytes operation ``testcalls`` writes at any offset below ``length``."""

    def __init__(self, original: bytes) -> None:
        odd = bytearray(len(original))
        odd[1::2] = original[1::2]
        self._odd = bytes(odd)
        chunks = -(-len(original) // PATTERN_CHUNK)
        # per operation number mod 256, its translated chunks (None: not asked for yet)
        self._chunks: list[list[bytes | None]] | None = (
            [[None] * chunks for _ in range(256)]
            if len(original) * 256 <= PATTERN_CACHE_BYTES else None)

    def __len__(self) -> int:
        return len(self._odd)

    def get(self, testcalls: int, offset: int, size: int) -> bytes:
        c = testcalls & 0xFF
        end = min(offset + size, len(self._odd))
        if self._chunks is None or end <= offset:
            return self._odd[offset:end].translate(_ADD[c])
        row = self._chunks[c]
        first, last = offset >> PATTERN_CHUNK_SHIFT, (end - 1) >> PATTERN_CHUNK_SHIFT
        for k in range(first, last + 1):
            if row[k] is None:
                row[k] = self._odd[k << PATTERN_CHUNK_SHIFT:
                                   (k + 1) << PATTERN_CHUNK_SHIFT].translate(_ADD[c])
        head = offset - (first << PATTERN_CHUNK_SHIFT)
        tail = end - (last << PATTERN_CHUNK_SHIFT)
        if first == last:
            return row[first][head:tail]  # type: ignore[index]
        parts: list[bytes | memoryview] = row[first:last + 1]  # type: ignore[assignment]
        parts[0] = memoryview(parts[0])[head:]
        parts[-1] = memoryview(parts[-1])[:tail]
        return b"".join(parts)


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
