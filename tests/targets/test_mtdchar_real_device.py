"""The /dev/mtdN target against a real kernel MTD device.

These run only when ``--folio-mtd`` names a real device and ``--folio-allow-destructive``
is given (they erase it), e.g. inside the VM runner, whose guest has block2mtd on a RAM
disk as /dev/mtd0::

    python -m pytest_folio vm -- tests/targets/test_mtdchar_real_device.py -v

Elsewhere they skip with that reason.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
from pathlib import Path

import pytest

from pytest_folio.fixtures.mtd import mtd_target
from pytest_folio.plugin import settings
from pytest_folio.targets import mtd_abi
from pytest_folio.targets.mtdchar import (
    MTDChar,
    list_mtd_devices,
    mtd_index,
    mtd_users,
    read_sysfs_geometry,
)
from pytest_folio.targets.protocols import MTD_CAP_RAM, MTD_RAM


@pytest.fixture
def real(request: pytest.FixtureRequest) -> MTDChar:
    """``mtd_device`` when it is a real device we may erase (asked for only then, so
    the reference is not built, once per folio order, just to be skipped)."""
    config = request.config
    target = mtd_target(config)
    if target.kind != "path":
        pytest.skip("needs a real MTD device: --folio-mtd /dev/mtdN --folio-allow-destructive"
                    " (or python -m pytest_folio vm)")
    if not settings(config).allow_destructive:
        pytest.skip(f"erases {target.spec.text}: needs --folio-allow-destructive")
    device = request.getfixturevalue("mtd_device")
    assert isinstance(device, MTDChar)
    return device


def test_geometry_agrees_with_sysfs_and_proc_mtd(real: MTDChar) -> None:
    index = mtd_index(Path(real.path))
    sysfs = read_sysfs_geometry(index)
    assert sysfs is not None
    assert (real.name, real.type, real.flags, real.size, real.erasesize, real.writesize,
            real.oobsize) == (sysfs.name, sysfs.type, sysfs.flags, sysfs.size,
                              sysfs.erasesize, sysfs.writesize, sysfs.oobsize)
    entry = {e.index: e for e in list_mtd_devices()}[index]
    assert (entry.size, entry.erasesize, entry.name) == (real.size, real.erasesize, real.name)
    assert mtd_users(index, real.name) == []


def test_block2mtd_geometry_is_the_drivers(real: MTDChar) -> None:
    if not real.name.startswith("block2mtd: "):
        pytest.skip(f"{real.name} is not a block2mtd device")
    assert (real.type, real.flags, real.writesize, real.oobsize) == (MTD_RAM, MTD_CAP_RAM,
                                                                      1, 0)


def test_erase_write_read_round_trip(real: MTDChar) -> None:
    ebs = real.erasesize
    last = real.size - ebs
    data = random.Random(5).randbytes(ebs)
    for offset in (0, last):
        real.erase(offset, ebs)
        assert real.read(offset, ebs) == b"\xff" * ebs
        real.write(offset, data)
        assert real.read(offset, ebs) == data
    real.sync()
    real.erase(0, real.size)
    assert real.read(last, ebs) == b"\xff" * ebs


def test_the_kernel_answers_memerase64(real: MTDChar) -> None:
    fcntl.ioctl(real.fd, mtd_abi.MEMERASE64,
                mtd_abi.ERASE_INFO_USER64.pack(0, real.erasesize), False)
    fcntl.ioctl(real.fd, mtd_abi.MEMERASE,
                mtd_abi.ERASE_INFO_USER.pack(real.erasesize, real.erasesize), False)
    buf = bytearray(mtd_abi.MTD_INFO_USER.size)
    fcntl.ioctl(real.fd, mtd_abi.MEMGETINFO, buf, True)
    assert mtd_abi.MTD_INFO_USER.unpack(buf)[3] == real.erasesize


def test_the_kernel_and_the_target_agree_on_range_errors(real: MTDChar) -> None:
    with pytest.raises(OSError) as info:
        real.read(real.size - 1, 2)
    assert info.value.errno == errno.EINVAL
    with pytest.raises(OSError) as info:   # the kernel's own answer, past our check
        fcntl.ioctl(real.fd, mtd_abi.MEMERASE64,
                    mtd_abi.ERASE_INFO_USER64.pack(real.size, real.erasesize), False)
    assert info.value.errno == errno.EINVAL
    assert os.pread(real.fd, 16, real.size) == b""  # mtdchar reads nothing past the end


def test_each_test_holds_the_device_alone(real: MTDChar) -> None:
    """mtd_device holds an flock on the node, so xdist workers take turns."""
    other = os.open(real.path, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)
