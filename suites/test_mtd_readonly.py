"""A read-only device of the ``--folio-mtd`` target (its factory called with
``readonly=True``, or a real device without MTD_WRITEABLE): every write and erase gives
EROFS and nothing changes. A factory that cannot make one skips with its reason."""

from pytest_folio.suites.mtd import MTDReadOnlySuite


class TestMTDReadOnly(MTDReadOnlySuite):
    pass
