"""Power cuts against the ``--folio-fs`` target at every block size: random writes,
truncates, fsyncs and renames, a cut at the end of each round, then every name, size and
byte checked (fsync'd data, sizes and names survive, the rest reads old or new, nothing
is invented). Needs a target that offers ``power_cut()``: the reference ramfs has no
backing store and skips, as a directory does. Select them with ``-k power``::

    pytest -p pytest_folio --pyargs pytest_folio.suites -k power --folio-fs=mypkg.fs:factory
"""

from pytest_folio.suites.fs import FsPowerCut


class TestFsPowerCut(FsPowerCut):
    pass
