"""mtd_readtest and the interface checks against the ``--folio-mtd`` target (never writes
a real device without ``--folio-allow-destructive``)."""

from pytest_folio.suites.mtd import MTDReadSuite


class TestMTDRead(MTDReadSuite):
    pass
