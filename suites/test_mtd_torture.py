"""mtd_torturetest against the ``--folio-mtd`` target (a few erase cycles)."""

from pytest_folio.suites.mtd import MTDTortureSuite


class TestMTDTorture(MTDTortureSuite):
    pass
