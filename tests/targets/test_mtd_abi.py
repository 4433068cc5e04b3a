"""The ioctl numbers and struct layouts of mtd_abi.py against the installed mtd-abi.h.

A small C program, compiled with the machine's cc, prints what the compiler makes of the
header; Python's values must be the same.
"""

from __future__ import annotations

import errno
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from pytest_folio.linux import mtdcore
from pytest_folio.targets import mtd_abi, protocols

HEADER = Path("/usr/include/mtd/mtd-abi.h")

C_PROGRAM = r"""
#include <stdio.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <mtd/mtd-abi.h>
#define SHOW(x) printf(#x " %llu\n", (unsigned long long)(x))
int main(void) {
    SHOW(MEMGETINFO); SHOW(MEMERASE); SHOW(MEMERASE64);
    SHOW(sizeof(struct mtd_info_user));
    SHOW(offsetof(struct mtd_info_user, type));
    SHOW(offsetof(struct mtd_info_user, flags));
    SHOW(offsetof(struct mtd_info_user, size));
    SHOW(offsetof(struct mtd_info_user, erasesize));
    SHOW(offsetof(struct mtd_info_user, writesize));
    SHOW(offsetof(struct mtd_info_user, oobsize));
    SHOW(offsetof(struct mtd_info_user, padding));
    SHOW(sizeof(struct erase_info_user));
    SHOW(offsetof(struct erase_info_user, length));
    SHOW(sizeof(struct erase_info_user64));
    SHOW(offsetof(struct erase_info_user64, length));
    SHOW(MTD_ABSENT); SHOW(MTD_RAM); SHOW(MTD_ROM); SHOW(MTD_NORFLASH);
    SHOW(MTD_NANDFLASH); SHOW(MTD_DATAFLASH); SHOW(MTD_UBIVOLUME); SHOW(MTD_MLCNANDFLASH);
    SHOW(MTD_WRITEABLE); SHOW(MTD_BIT_WRITEABLE); SHOW(MTD_NO_ERASE);
    SHOW(MTD_CAP_ROM); SHOW(MTD_CAP_RAM); SHOW(MTD_CAP_NORFLASH); SHOW(MTD_CAP_NANDFLASH);
    return 0;
}
"""


@pytest.fixture(scope="module")
def c_values(tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc, gcc or clang) to build the mtd-abi.h probe")
    if not HEADER.exists():
        pytest.skip(f"{HEADER} is not installed (Debian: linux-libc-dev)")
    directory = tmp_path_factory.mktemp("mtdabi")
    source = directory / "probe.c"
    source.write_text(C_PROGRAM)
    binary = directory / "probe"
    subprocess.run([cc, "-o", str(binary), str(source)], check=True, capture_output=True)
    output = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    pairs = (line.rsplit(maxsplit=1) for line in output.splitlines())
    return {name: int(value) for name, value in pairs}


def _offsets(layout: str) -> list[int]:
    """Byte offsets of each field of a native ``struct`` format, as C lays them out."""
    offsets, fmt = [], "@"
    for code in layout:
        # the offset of the next field is the aligned size of everything before plus it
        offsets.append(struct.calcsize(fmt + code) - struct.calcsize("@" + code))
        fmt += code
    return offsets


def test_ioctl_numbers_match_the_header(c_values: dict[str, int]) -> None:
    assert c_values["MEMGETINFO"] == mtd_abi.MEMGETINFO
    assert c_values["MEMERASE"] == mtd_abi.MEMERASE
    assert c_values["MEMERASE64"] == mtd_abi.MEMERASE64


def test_struct_layouts_match_the_header(c_values: dict[str, int]) -> None:
    assert mtd_abi.MTD_INFO_USER.size == c_values["sizeof(struct mtd_info_user)"]
    fields = ["type", "flags", "size", "erasesize", "writesize", "oobsize", "padding"]
    assert _offsets(mtd_abi.MTD_INFO_USER.format[1:]) == [
        c_values[f"offsetof(struct mtd_info_user, {f})"] for f in fields]
    assert mtd_abi.ERASE_INFO_USER.size == c_values["sizeof(struct erase_info_user)"]
    assert _offsets("II")[1] == c_values["offsetof(struct erase_info_user, length)"]
    assert mtd_abi.ERASE_INFO_USER64.size == c_values["sizeof(struct erase_info_user64)"]
    assert _offsets("QQ")[1] == c_values["offsetof(struct erase_info_user64, length)"]


def test_type_and_flag_constants_match_the_header(c_values: dict[str, int]) -> None:
    for name in ["MTD_ABSENT", "MTD_RAM", "MTD_ROM", "MTD_NORFLASH", "MTD_NANDFLASH",
                 "MTD_DATAFLASH", "MTD_UBIVOLUME", "MTD_MLCNANDFLASH", "MTD_WRITEABLE",
                 "MTD_BIT_WRITEABLE", "MTD_NO_ERASE", "MTD_CAP_ROM", "MTD_CAP_RAM",
                 "MTD_CAP_NORFLASH", "MTD_CAP_NANDFLASH"]:
        assert getattr(protocols, name) == c_values[name], name


def test_mtd_info_user_round_trip() -> None:
    packed = mtd_abi.MTD_INFO_USER.pack(4, 0x400, 1 << 30, 128 << 10, 2048, 64, 0)
    assert mtd_abi.MTD_INFO_USER.unpack(packed) == (4, 0x400, 1 << 30, 128 << 10, 2048, 64, 0)


# The MTD core's checks, shared by block2mtd and the real device.

def test_read_range() -> None:
    mtdcore.mtd_check_read(0, 100, 100)
    mtdcore.mtd_check_read(100, 0, 100)
    for offset, length in [(-1, 1), (1, 100), (100, 1), (0, -1)]:
        with pytest.raises(OSError) as info:
            mtdcore.mtd_check_read(offset, length, 100)
        assert info.value.errno == errno.EINVAL


def test_write_checks_erofs_before_range() -> None:
    with pytest.raises(OSError) as info:
        mtdcore.mtd_check_write(1000, 1, 100, protocols.MTD_CAP_ROM, "rom")
    assert info.value.errno == errno.EROFS
    with pytest.raises(OSError) as info:
        mtdcore.mtd_check_write(99, 2, 100, protocols.MTD_CAP_RAM, "ram")
    assert info.value.errno == errno.EINVAL
    mtdcore.mtd_check_write(99, 1, 100, protocols.MTD_CAP_RAM, "ram")


def test_erase_checks_range_before_erofs() -> None:
    with pytest.raises(OSError) as info:
        mtdcore.mtd_check_erase(100, 0, 100, protocols.MTD_CAP_ROM, "rom")
    assert info.value.errno == errno.EINVAL  # addr must be below the size, even for len 0
    with pytest.raises(OSError) as info:
        mtdcore.mtd_check_erase(0, 10, 100, protocols.MTD_CAP_ROM, "rom")
    assert info.value.errno == errno.EROFS
    mtdcore.mtd_check_erase(0, 100, 100, protocols.MTD_CAP_NORFLASH, "nor")
