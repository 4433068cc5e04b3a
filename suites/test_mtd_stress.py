"""mtd_stresstest against the ``--folio-mtd`` target; the seed is the run's (printed in the
header, set with ``--folio-seed``)."""

from pytest_folio.suites.mtd import MTDStressSuite


class TestMTDStress(MTDStressSuite):
    pass
