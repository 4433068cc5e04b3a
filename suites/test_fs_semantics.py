"""Linux file semantics against the ``--folio-fs`` target, at every ``--folio-block-sizes``
block size (a directory target runs once, at its own)::

    pytest -p pytest_folio --pyargs pytest_folio.suites.test_fs_semantics \
        --folio-fs=mypkg.fs:factory
"""

from pytest_folio.suites.fs import FsSuite


class TestFsSemantics(FsSuite):
    pass
