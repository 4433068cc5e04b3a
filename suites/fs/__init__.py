"""Linux file semantics beyond fsx, as base classes (xfstests' generic tests and
pjdfstest in spirit): one behaviour per test, on the paths where folio-cached file
systems go wrong. Subclass :class:`FsSuite` (or one of its parts) in a ``test_*.py``
module and provide a ``filesystem`` fixture, or run the ready module
``pytest_folio.suites.test_fs_semantics`` against ``--folio-fs``::

    import pytest
    from pytest_folio.suites.fs import FsSuite

    class TestMyFs(FsSuite):
        large_file = 16 << 20          # bytes; the default is 6 MiB

        @pytest.fixture
        def filesystem(self, tmp_path):
            return MyFs(root=tmp_path)

Optional calls (mapped I/O, fallocate and its modes, copy_file_range, directories) are
used only when the target has them (:func:`pytest_folio.targets.capabilities.features_of`);
a test that needs a missing one skips and names it. Where Linux
versions give different errnos, the tests accept each one Linux has documented, and say
so. Every file is written with data that has no zero byte, so stale data can never pass
for the zeroes a hole or an extension must read as.
"""

from pytest_folio.suites.fs.accounting import FsAccounting
from pytest_folio.suites.fs.base import pattern
from pytest_folio.suites.fs.differential import FsDifferential
from pytest_folio.suites.fs.names import FsNames
from pytest_folio.suites.fs.namespace import FsNamespace
from pytest_folio.suites.fs.persistence import FsLargeFiles, FsPersistence
from pytest_folio.suites.fs.powercut import FsPowerCut
from pytest_folio.suites.fs.ranges import FsCopyRange, FsFallocate
from pytest_folio.suites.fs.readwrite import FsOpenFlags, FsReadWrite

__all__ = ["FsAccounting", "FsCopyRange", "FsDifferential", "FsFallocate", "FsLargeFiles",
           "FsNames", "FsNamespace", "FsOpenFlags", "FsPersistence", "FsPowerCut", "FsReadWrite",
           "FsSuite", "pattern"]


class FsSuite(FsLargeFiles, FsPersistence, FsAccounting, FsFallocate, FsCopyRange,
              FsNamespace, FsNames, FsOpenFlags, FsReadWrite):
    """Every part: the ready module's class. (pytest collects the bases last to
    first: the small, specific tests run first and the large files last.)"""
