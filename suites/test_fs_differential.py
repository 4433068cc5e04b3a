"""Differential mode: the ``--folio-fs`` target against ``--folio-fs-oracle`` (the
reference or a directory), at every ``--folio-block-sizes`` block size; skipped when no
oracle is given::

    pytest -p pytest_folio --pyargs pytest_folio.suites.test_fs_differential \
        --folio-fs=mypkg.fs:factory --folio-fs-oracle=reference
"""

from pytest_folio.suites.fs import FsDifferential


class TestFsDifferential(FsDifferential):
    pass
