"""What every mtd_test-style runner shares (drivers/mtd/tests/mtd_test.c's helpers).

The runners are plain functions over an :class:`~pytest_folio.targets.protocols.MTDDevice`;
they raise :class:`MTDTestError` with a kernel-like message when the device misbehaves, so
they work inside pytest, in a script, or in a user's own harness alike.
"""

from __future__ import annotations

import dataclasses
import errno
from collections.abc import Callable

from pytest_folio.bytescmp import first_difference
from pytest_folio.linux.uapi import MTD_MLCNANDFLASH, MTD_NANDFLASH, MTD_WRITEABLE
from pytest_folio.targets.protocols import ChunkedMTD, HasBadBlocks, MTDDevice

# The kernel tests assume 512-byte "pages" on devices whose writesize is 1 (RAM, NOR).
NOT_NAND_PAGE_SIZE = 512

NAND_REQUIRED = "this test requires NAND flash"


class MTDTestError(AssertionError):
    """The device did something an mtd test does not accept (wrong data, short I/O, ...)."""


class MTDParameterError(ValueError):
    """A runner parameter that does not fit the device (eb, pgcnt, passes, ...)."""


@dataclasses.dataclass(frozen=True)
class Geometry:
    """The numbers every kernel mtd test prints first: page size and block counts."""

    size: int
    erasesize: int
    pgsize: int
    ebcnt: int
    pgcnt: int
    oobsize: int

    @classmethod
    def of(cls, dev: MTDDevice) -> Geometry:
        pgsize = NOT_NAND_PAGE_SIZE if dev.writesize == 1 else dev.writesize
        if dev.erasesize <= 0 or dev.erasesize % pgsize:
            raise MTDTestError(
                f"eraseblock size {dev.erasesize} is not a multiple of the page size {pgsize}")
        return cls(size=dev.size, erasesize=dev.erasesize, pgsize=pgsize,
                   ebcnt=dev.size // dev.erasesize, pgcnt=dev.erasesize // pgsize,
                   oobsize=dev.oobsize)

    def describe(self) -> str:
        return (f"MTD device size {self.size}, eraseblock size {self.erasesize}, "
                f"page size {self.pgsize}, count of eraseblocks {self.ebcnt}, "
                f"pages per eraseblock {self.pgcnt}, OOB size {self.oobsize}")


def is_nand(dev: MTDDevice) -> bool:
    """mtd_type_is_nand(): SLC or MLC NAND."""
    return dev.type in (MTD_NANDFLASH, MTD_MLCNANDFLASH)


def is_writeable(dev: MTDDevice) -> bool:
    return bool(dev.flags & MTD_WRITEABLE)


def scan_for_bad_eraseblocks(dev: MTDDevice, ebcnt: int) -> list[bool]:
    """mtdtest_scan_for_bad_eraseblocks(): a device without ``block_isbad`` has none."""
    if not isinstance(dev, HasBadBlocks):
        return [False] * ebcnt
    return [bool(dev.block_isbad(i * dev.erasesize)) for i in range(ebcnt)]


def mtdtest_read(dev: MTDDevice, addr: int, length: int) -> bytes:
    """Read and insist on the full length, as mtdtest_read() does (a short read is -EIO)."""
    data = dev.read(addr, length)
    if len(data) != length:
        raise MTDTestError(
            f"error: read returned {len(data)} bytes of {length} at {addr:#x}, "
            f"but no error reported")
    return bytes(data)


def mtdtest_write(dev: MTDDevice, addr: int, data: bytes) -> None:
    dev.write(addr, data)


class PieceByPiece:
    """:class:`ChunkedMTD`'s calls on a device without them: one read or write per
    chunk, each read held to its full length as :func:`mtdtest_read` does."""

    def __init__(self, dev: MTDDevice) -> None:
        self.dev = dev

    def read_into(self, offset: int, buf: bytearray | memoryview, chunk: int = 0) -> None:
        n = len(buf)
        step = chunk or max(n, 1)
        for off in range(0, max(n, 1), step):   # a zero-length read is still one call
            m = min(step, n - off)
            buf[off:off + m] = mtdtest_read(self.dev, offset + off, m)

    def write_from(self, offset: int, data: bytes | bytearray | memoryview,
                   chunk: int = 0) -> None:
        n = len(data)
        step = chunk or max(n, 1)
        for off in range(0, max(n, 1), step):
            mtdtest_write(self.dev, offset + off, bytes(data[off:off + min(step, n - off)]))


def chunked_io(dev: MTDDevice) -> ChunkedMTD:
    """The device's own chunked calls, or :class:`PieceByPiece` over it."""
    return dev if isinstance(dev, ChunkedMTD) else PieceByPiece(dev)


def mtdtest_erase_eraseblock(dev: MTDDevice, ebnum: int, blocks: int = 1) -> None:
    dev.erase(ebnum * dev.erasesize, blocks * dev.erasesize)


def mtdtest_erase_good_eraseblocks(dev: MTDDevice, bbt: list[bool], eb: int = 0,
                                   count: int | None = None) -> None:
    """Erase the good eraseblocks eb..eb+count-1 one at a time (``bbt`` covers the device)."""
    end = len(bbt) if count is None else eb + count
    for i in range(eb, end):
        if not bbt[i]:
            mtdtest_erase_eraseblock(dev, i)


def check_data(what: str, addr: int, got: bytes, expected: bytes) -> None:
    """Raise a one-line MTDTestError naming the first bad byte, like the kernel's dumps."""
    if got == expected:
        return
    at = first_difference(got, expected)
    bad = sum(1 for a, b in zip(got, expected, strict=False) if a != b)
    shown_got = got[at:at + 8].hex(" ")
    shown_exp = expected[at:at + 8].hex(" ")
    raise MTDTestError(
        f"{what}: read wrong data at {addr + at:#x} ({bad} of {len(expected)} bytes differ "
        f"from {addr:#x}): read {shown_got}, expected {shown_exp}")


def expect_errno(code: int, what: str, fn: Callable[[], object]) -> None:
    """Run ``fn`` and insist it fails with OSError(code)."""
    try:
        fn()
    except OSError as exc:
        if exc.errno != code:
            raise MTDTestError(
                f"{what}: expected {errno.errorcode[code]}, got "
                f"{errno.errorcode.get(exc.errno or 0, exc.errno)}: {exc}") from None
        return
    raise MTDTestError(f"{what}: succeeded, expected {errno.errorcode[code]}")
