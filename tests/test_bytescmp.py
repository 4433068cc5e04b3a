"""first_difference agrees with a byte-at-a-time scan on every kind of pair."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_folio.bytescmp import CHUNK, first_difference


def scan(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


@given(st.binary(max_size=3 * CHUNK + 5), st.data())
def test_it_finds_what_a_byte_scan_finds(base: bytes, data: st.DataObject) -> None:
    other = bytearray(base)
    for at in data.draw(st.lists(st.integers(0, max(len(base) - 1, 0)), max_size=3)):
        if base:
            other[at] ^= data.draw(st.integers(1, 255))
    cut = data.draw(st.integers(0, len(other)))
    other = other[:cut] + data.draw(st.binary(max_size=CHUNK + 3))
    assert first_difference(base, bytes(other)) == scan(base, bytes(other))


def test_a_difference_on_each_side_of_a_chunk_boundary_is_found_exactly() -> None:
    a = bytes(4 * CHUNK)
    for at in (0, CHUNK - 1, CHUNK, 3 * CHUNK + 7, 4 * CHUNK - 1):
        b = bytearray(a)
        b[at] = 1
        assert first_difference(a, b) == at


def test_equal_strings_and_prefixes_give_the_shorter_length() -> None:
    a = bytes(range(256)) * 40
    assert first_difference(a, a) == len(a)
    assert first_difference(a, a[:5000]) == 5000
    assert first_difference(b"", a) == 0
