"""fsx's -X, -e and -f: read the whole file back after every operation, pollute the EOF
page before size changes, flush and drop the cache after every operation."""

from __future__ import annotations

import pytest

from pytest_folio.fsx.config import FsxOptions, parse_fsx_args
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from tests.helpers.fsx_broken import PassThrough
from tests.helpers.fsx_memfs import MemFS


def test_fsx_letters_turn_the_checks_on() -> None:
    opts = parse_fsx_args("-X -e 1 -f")
    assert (opts.check_file, opts.pollute_eof, opts.flush) == (True, True, True)
    assert not parse_fsx_args("-e 0").pollute_eof
    with pytest.raises(ValueError, match="fsx -e takes 0 or 1, not '2'"):
        parse_fsx_args("-e 2")


class Counting(PassThrough):
    """A correct file system that counts fsyncs and cache drops."""

    def __init__(self) -> None:
        super().__init__(MemFS())
        self.fsyncs = self.drops = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        super().fsync(fd)

    def drop_caches(self, path: str) -> None:
        self.drops += 1


def test_flush_syncs_and_drops_the_cache_after_every_operation() -> None:
    fs = Counting()
    engine = FsxEngine(fs, parse_fsx_args("-f -c 0", FsxOptions(numops=300, seed=3)))
    engine.run()
    done = sum(engine.done.values())
    assert fs.drops >= done > 100 and fs.fsyncs >= done


class MappedTailExposedByExtension(PassThrough):
    """Keeps what was stored through a mapping past EOF (as a page cache does) and does
    not zero it when the file grows over it."""

    def __init__(self) -> None:
        super().__init__(MemFS())
        self.tail: dict[int, bytes] = {}

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        size = self.size(fd)
        if offset >= size:
            self.tail[offset] = bytes(data)
            return
        super().mmap_write(fd, offset, data)

    def _expose(self, fd: int, old: int, new: int) -> None:
        for at, data in list(self.tail.items()):
            if at == old and new > old:
                self.inner.pwrite(fd, data[:new - old], old)      # bug: not zeroed
        self.tail.clear()

    def ftruncate(self, fd: int, length: int) -> None:
        old = self.size(fd)
        super().ftruncate(fd, length)
        self._expose(fd, old, length)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        old = self.size(fd)
        n = super().pwrite(fd, data, offset)
        if offset > old:
            self._expose(fd, old, offset)
        else:
            self.tail.clear()
        return n


def test_eof_pollution_finds_an_extension_that_exposes_stale_bytes() -> None:
    opts = FsxOptions(numops=3000, seed=1)
    FsxEngine(MappedTailExposedByExtension(), opts).run()          # unseen without -e
    with pytest.raises(FsxFailure, match=r"READ BAD DATA|Size error"):
        FsxEngine(MappedTailExposedByExtension(), parse_fsx_args("-e 1", opts)).run()

