"""What every part of the file-semantics suite shares: data without zero bytes, the
feature check, errno expectations, and the helpers of :class:`_Base`."""

from __future__ import annotations

import errno
import os
import random
from collections.abc import Callable

import pytest

from pytest_folio.bytescmp import first_difference
from pytest_folio.errors import errno_of
from pytest_folio.fixtures.fs import REPRODUCE
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.targets.capabilities import supports, working_features
from pytest_folio.targets.protocols import AnyFileSystem, Directories

RDWR_CREAT = os.O_RDWR | os.O_CREAT
FALLOC_FL_UNKNOWN = 0x100   # a mode bit no kernel defines


def pattern(n: int, tag: int) -> bytes:
    """``n`` reproducible bytes without a zero byte (``tag`` picks the sequence)."""
    return random.Random(tag).randbytes(n).replace(b"\0", b"\x5a")


def need(fs: AnyFileSystem, *features: str) -> None:
    have = working_features(fs)
    missing = [f for f in features if f not in have]
    if missing:
        pytest.skip(f"{type(fs).__name__} does not support {', '.join(missing)}")


def name(code: int | None) -> str:
    return "success" if code is None else errno.errorcode.get(code, str(code))


def expect_errno(call: Callable[[], object], *codes: int) -> None:
    got = errno_of(call)
    assert got in codes, f"expected {' or '.join(map(name, codes))}, got {name(got)}"


class _Base:
    """Helpers shared by the parts of the suite."""

    @pytest.fixture(autouse=True)
    def _reproduce(self, request: pytest.FixtureRequest) -> None:
        """A failure ends with the command that runs the test again."""
        request.node.stash[REPRODUCE] = True

    @staticmethod
    def make_dir(fs: AnyFileSystem, path: str) -> None:
        """mkdir, or skip the test: a target without the Directories calls (or whose
        mkdir answers EOPNOTSUPP) has no directories."""
        if not supports(fs, Directories):
            pytest.skip(f"{type(fs).__name__} has no mkdir/rmdir: it has no directories")
        try:
            fs.mkdir(path)
        except OSError as exc:
            if exc.errno != errno.EOPNOTSUPP:
                raise
            pytest.skip(f"{type(fs).__name__}.mkdir raises EOPNOTSUPP: it has no directories")

    def create(self, fs: AnyFileSystem, path: str, data: bytes) -> int:
        """A new file holding ``data``, open read-write."""
        fd = fs.open(path, RDWR_CREAT | os.O_TRUNC)
        self.write_all(fs, fd, data, 0)
        return fd

    @staticmethod
    def write_all(fs: AnyFileSystem, fd: int, data: bytes, offset: int,
                  chunk: int = 1 << 20) -> None:
        for start in range(0, len(data), chunk):
            piece = data[start:start + chunk]
            n = fs.pwrite(fd, piece, offset + start)
            assert n == len(piece), f"pwrite at {offset + start} wrote {n} of {len(piece)}"

    @staticmethod
    def read_all(fs: AnyFileSystem, fd: int, chunk: int = 1 << 20) -> bytes:
        """The whole file by fstat's size, in reads of ``chunk``."""
        size = fs.fstat(fd).st_size
        out = bytearray()
        while len(out) < size:
            piece = fs.pread(fd, min(chunk, size - len(out)), len(out))
            assert piece, f"pread at {len(out)} returned nothing before EOF ({size})"
            out += piece
        return bytes(out)

    def reopen(self, fs: AnyFileSystem, fd: int, path: str, flags: int = os.O_RDWR) -> int:
        fs.close(fd)
        return fs.open(path, flags)

    def assert_contents(self, fs: AnyFileSystem, fd: int, expected: bytes | bytearray) -> None:
        got = self.read_all(fs, fd)
        if len(got) != len(expected):
            raise AssertionError(f"the file holds {len(got)} bytes, expected {len(expected)}")
        if got != expected:
            first = first_difference(got, expected)
            bs = fs.blocksize
            raise AssertionError(
                f"first bad byte at offset {first:#x} (block {first // bs}, {first % bs:#x} "
                f"into it): {got[first:first + 8].hex()} instead of "
                f"{expected[first:first + 8].hex()}")

    @staticmethod
    def boundaries(fs: AnyFileSystem) -> list[int]:
        """Offsets on and next to the page and block boundaries of the first blocks."""
        bs = fs.blocksize
        points = {1, PAGE_SIZE - 1, PAGE_SIZE, PAGE_SIZE + 1, bs - 1, bs, bs + 1,
                  bs + PAGE_SIZE - 1, 2 * bs - 1, 2 * bs, 2 * bs + 1}
        return sorted(points)
