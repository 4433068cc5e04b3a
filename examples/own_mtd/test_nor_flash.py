"""Tests of the user's device through pytest-folio's ``mtd_device`` fixture."""

from __future__ import annotations

import errno

import pytest

from pytest_folio.targets.protocols import MTD_NORFLASH, MTDDevice


def test_the_fixture_hands_out_the_users_device(mtd_device: MTDDevice) -> None:
    assert mtd_device.type == MTD_NORFLASH
    assert (mtd_device.size, mtd_device.erasesize) == (1 << 20, 64 << 10)


def test_erase_sets_every_bit(mtd_device: MTDDevice) -> None:
    mtd_device.write(0, b"\x00" * 16)
    mtd_device.erase(0, mtd_device.erasesize)
    assert mtd_device.read(0, mtd_device.erasesize) == b"\xff" * mtd_device.erasesize


def test_a_write_can_only_clear_bits(mtd_device: MTDDevice) -> None:
    mtd_device.erase(0, mtd_device.erasesize)
    mtd_device.write(0, b"\x0f")
    mtd_device.write(0, b"\xf3")  # would set bits 4..7 again: NOR cannot
    assert mtd_device.read(0, 1) == b"\x03"


def test_erase_must_cover_whole_eraseblocks(mtd_device: MTDDevice) -> None:
    with pytest.raises(OSError) as info:
        mtd_device.erase(512, mtd_device.erasesize)
    assert info.value.errno == errno.EINVAL
