"""The fsx-style suite as a base class, in the pattern of fsspec's abstract tests.

Subclass it in a ``test_*.py`` module and provide a ``filesystem`` fixture that returns
your :class:`~pytest_folio.targets.protocols.FileSystem`::

    import pytest
    from pytest_folio.suites.fsx import FsxSuite

    class TestMyFs(FsxSuite):
        fsx_args = "-l 1m -o 128k -c 4"     # fsx's own flags, if the defaults do not suit

        @pytest.fixture
        def filesystem(self, tmp_path):
            fs = MyFs(root=tmp_path)
            yield fs
            fs.umount()

Without an own fixture, the plugin's ``filesystem`` (the ``--folio-fs`` target, at every
``--folio-block-sizes`` block size) is used. ``--folio-fsx-ops`` and ``--folio-fsx-seed``
set the length and seed of every run (they override ``-N``/``-S`` in ``fsx_args``);
``--folio-fsx-replay FILE.fsxops`` replays a log instead.

Besides fsx's own defaults (byte-aligned operations on a 256 KiB file, closed and
reopened after 1 in 16 operations), these runs reach the paths those rarely do: every
operation page aligned (the whole-page fast paths), every operation aligned to the block
size over a file of at least 8 blocks (whole-folio writes and truncates), and a file of
``fsx_large_file`` bytes (6 MiB: more than a small cache holds, so dirty folios are
evicted and read back) with 256 KiB operations, a fifth as many of them. A fourth run,
of a twentieth as many, takes operations of any length up to 5 MiB - 1 over an 8 MiB
file: transfers over 1 MiB whose length is no multiple of it, across 64K, 1M and 2M.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from pytest_folio.fixtures.fsx import FsxRunner
from pytest_folio.fsx.config import FsxOptions, parse_fsx_args
from pytest_folio.fsx.log import FL_SKIPPED
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.targets.protocols import AnyFileSystem

__all__ = ["FsxSuite"]


class FsxSuite:
    """fsx's random operations against a model, then the Hypothesis form of the same."""

    fsx_options: ClassVar[FsxOptions] = FsxOptions()   # the base options
    fsx_args: ClassVar[str] = ""                       # fsx flags applied on top of them
    # None: the run's --folio-hypothesis level; or "fsx-thorough", or a profile of yours
    fsx_hypothesis_profile: ClassVar[str | None] = None
    fsx_large_file: ClassVar[int] = 6 << 20            # test_fsx_large_file's file size
    fsx_long_file: ClassVar[int] = 8 << 20             # test_fsx_long_transfers' file size
    fsx_long_transfer: ClassVar[int] = (5 << 20) - 1   # ... and its longest operation

    def fsx_settings(self) -> FsxOptions:
        try:
            return parse_fsx_args(self.fsx_args, self.fsx_options)
        except ValueError as exc:
            problem = f"{type(self).__name__}.fsx_args: {exc}"
        pytest.fail(problem, pytrace=False)

    @staticmethod
    def _operations_to_complete(fsx: FsxRunner, numops: int | None = None) -> int:
        """How many operations a passing run completed: the replayed log's (skip lines are
        not replayed), or the run's count; a run that stops short without failing is a bug."""
        replay = fsx.replay
        if replay is None:
            return fsx.options(numops=numops).numops
        return sum(not entry.flags & FL_SKIPPED for entry in replay[1])

    def test_fsx(self, filesystem: AnyFileSystem, fsx: FsxRunner) -> None:
        result = fsx(filesystem, self.fsx_settings())
        assert result.testcalls == self._operations_to_complete(fsx)

    def test_fsx_page_aligned(self, filesystem: AnyFileSystem, fsx: FsxRunner) -> None:
        opts = self.fsx_settings().replace(readbdy=PAGE_SIZE, truncbdy=PAGE_SIZE,
                                           writebdy=PAGE_SIZE)
        assert fsx(filesystem, opts).testcalls == self._operations_to_complete(fsx)

    def test_fsx_block_aligned(self, filesystem: AnyFileSystem, fsx: FsxRunner) -> None:
        bs = filesystem.blocksize
        base = self.fsx_settings()
        opts = base.replace(readbdy=bs, truncbdy=bs, writebdy=bs,
                            maxfilelen=max(base.maxfilelen, 8 * bs),
                            maxoplen=max(base.maxoplen, bs))
        assert fsx(filesystem, opts).testcalls == self._operations_to_complete(fsx)

    def test_fsx_large_file(self, filesystem: AnyFileSystem, fsx: FsxRunner) -> None:
        opts = self.fsx_settings().replace(maxfilelen=self.fsx_large_file, maxoplen=256 << 10)
        numops = max(1, fsx.settings.fsx_ops // 5)
        result = fsx(filesystem, opts, numops=numops)
        assert result.testcalls == self._operations_to_complete(fsx, numops)

    def test_fsx_long_transfers(self, filesystem: AnyFileSystem, fsx: FsxRunner) -> None:
        """Operations of any length up to ``fsx_long_transfer`` over a file of
        ``fsx_long_file``: reads and writes over 1 MiB of lengths no power of two
        divides, crossing 64K, 1M and 2M, a twentieth as many of them."""
        opts = self.fsx_settings().replace(maxfilelen=self.fsx_long_file,
                                           maxoplen=self.fsx_long_transfer)
        numops = max(1, fsx.settings.fsx_ops // 20)
        result = fsx(filesystem, opts, numops=numops)
        assert result.testcalls == self._operations_to_complete(fsx, numops)

    def test_fsx_hypothesis(self, filesystem: AnyFileSystem, fsx: FsxRunner) -> None:
        if fsx.replay is not None:
            pytest.skip("--folio-fsx-replay replays through test_fsx")
        fsx.machine(filesystem, self.fsx_settings(), self.fsx_hypothesis_profile)
