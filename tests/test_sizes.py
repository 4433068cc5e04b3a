import pytest

from pytest_folio.sizes import (
    format_kib,
    format_size,
    ilog2,
    is_power_of_two,
    parse_list,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4096", 4096), ("4k", 4096), ("16K", 16384), ("2M", 2 << 20), ("64KiB", 65536),
     ("1g", 1 << 30), ("128KB", 131072), (" 8 k ", 8192), (512, 512)],
)
def test_parse_size_accepts_the_documented_forms(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "k", "4x", "-4k", "1.5M", "4 kk"])
def test_parse_size_rejects_garbage_with_a_message_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


@pytest.mark.parametrize(
    ("n", "short", "long"),
    [(512, "512B", "512 B"), (1024, "1K", "1 KiB"), (4096, "4K", "4 KiB"),
     (131072, "128K", "128 KiB"), (2 << 20, "2M", "2 MiB"), (6144, "6K", "6 KiB"),
     (1536, "1536B", "1536 B")],
)
def test_formats(n: int, short: str, long: str) -> None:
    assert format_size(n) == short
    assert format_kib(n) == long


def test_helpers() -> None:
    assert parse_list("0, 2,,4 9") == ["0", "2", "4", "9"]
    assert [is_power_of_two(n) for n in (0, 1, 3, 4096, 6144)] == [False, True, False, True, False]
    assert ilog2(4096) == 12
