"""The expected file (fsx's good_buf) and fsx's data pattern."""

from __future__ import annotations

import random

import pytest

from pytest_folio.fsx.expected import (
    PATTERN_CACHE_AFTER,
    PATTERN_CACHE_BYTES,
    DataPattern,
    FileModel,
)


def _gendata(original: bytes, testcalls: int, offset: int, size: int) -> bytes:
    """fsx's gendata(), a byte at a time."""
    c = testcalls % 256
    return bytes((c + (original[i] if i % 2 else 0)) & 0xFF for i in range(offset, offset + size))


def test_gendata_even_bytes_are_the_op_number_odd_bytes_add_the_seeded_byte() -> None:
    original = random.Random(1).randbytes(512)
    pattern = DataPattern(original)
    for testcalls in range(3):
        assert pattern.get(300 + testcalls, 3, 9) == _gendata(original, 300 + testcalls, 3, 9)


def test_gendata_is_the_same_before_and_after_the_whole_pattern_is_built() -> None:
    original = random.Random(2).randbytes(512)
    pattern = DataPattern(original)
    ranges = ((0, 512), (1, 9), (100, 300), (511, 1))
    asked = 0
    while asked <= 512 * PATTERN_CACHE_AFTER:  # translated per call, then built
        for offset, size in ranges:
            assert pattern.get(7, offset, size) == _gendata(original, 7, offset, size)
            asked += size
    for offset, size in ranges:  # sliced from the built pattern, for 263 % 256 too
        assert pattern.get(263, offset, size) == _gendata(original, 7, offset, size)


def test_gendata_past_the_pattern_cache_translates_each_write() -> None:
    original = random.Random(3).randbytes(PATTERN_CACHE_BYTES // 256 + 2)
    pattern = DataPattern(original)
    for _ in range(PATTERN_CACHE_AFTER + 2):
        assert pattern.get(9, 11, len(original) - 11) == _gendata(
            original, 9, 11, len(original) - 11)


def test_write_past_eof_zero_fills_the_hole() -> None:
    model = FileModel(64)
    model.write(0, b"abcd")
    model.truncate(2)
    model.write(6, b"xy")
    assert model.contents() == b"ab\0\0\0\0xy"


def test_truncate_up_after_down_reads_zeroes() -> None:
    model = FileModel(16)
    model.write(0, b"12345678")
    model.truncate(3)
    model.truncate(6)
    assert model.contents() == b"123\0\0\0"


@pytest.mark.parametrize(("keep", "expected"), [(True, b"abcd"), (False, b"abcd\0\0\0\0")])
def test_fallocate_extends_only_without_keep_size(keep: bool, expected: bytes) -> None:
    model = FileModel(16)
    model.write(0, b"abcd")
    model.fallocate(2, 6, keep_size=keep)
    assert model.contents() == expected


def test_punch_zero_collapse_insert_copy() -> None:
    model = FileModel(32)
    model.write(0, b"0123456789")
    model.punch_hole(8, 10)                 # clipped at EOF
    assert model.contents() == b"01234567\0\0"
    model.zero_range(1, 2, keep_size=True)
    assert model.contents() == b"0\0\x0034567\0\0"
    model.zero_range(9, 3, keep_size=False)  # extends
    assert model.size == 12
    model.collapse_range(2, 4)
    assert model.contents() == b"0\x0067\0\0\0\0"
    model.insert_range(1, 2)
    assert model.contents() == b"0\0\0\x0067\0\0\0\0"
    model.copy_range(4, 2, 12)
    assert model.contents() == b"0\0\0\x0067\0\0\0\0\0\x0067"
