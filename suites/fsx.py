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
"""

from __future__ import annotations

from typing import ClassVar

import pytest
from pytest_folio.fixtures.fsx import FsxRunner

from pytest_folio.fsx.config import QUICK, FsxOptions, parse_fsx_args
from pytest_folio.targets.protocols import FileSystem

__all__ = ["FsxSuite"]


class FsxSuite:
    """fsx's random operations against a model, then the Hypothesis form of the same."""

    fsx_options: ClassVar[FsxOptions] = FsxOptions()   # the base options
    fsx_args: ClassVar[str] = ""                       # fsx flags applied on top of them
    fsx_hypothesis_profile: ClassVar[str] = QUICK      # or "fsx-thorough", or your own

    def fsx_settings(self) -> FsxOptions:
        try:
            return parse_fsx_args(self.fsx_args, self.fsx_options)
        except ValueError as exc:
            problem = f"{type(self).__name__}.fsx_args: {exc}"
        pytest.fail(problem, pytrace=False)

    def test_fsx(self, filesystem: FileSystem, fsx: FsxRunner) -> None:
        result = fsx(filesystem, self.fsx_settings())
        assert result.testcalls > 0

    def test_fsx_hypothesis(self, filesystem: FileSystem, fsx: FsxRunner) -> None:
        if fsx.replay is not None:
            pytest.skip("--folio-fsx-replay replays through test_fsx")
        fsx.machine(filesystem, self.fsx_settings(), self.fsx_hypothesis_profile)
