"""fsx against the ``--folio-fs`` target, at every ``--folio-block-sizes`` block size::

    pytest -p pytest_folio --pyargs pytest_folio.suites.test_fsx \
        --folio-fs reference:features=full --folio-block-sizes 4k,64k,2M
"""

from pytest_folio.suites.fsx import FsxSuite


class TestFsx(FsxSuite):
    pass
