"""mtd_stresstest against the ``--folio-mtd`` target; the seed is the run's (printed in the
header as the fsx seed, set with ``--folio-fsx-seed``)."""

from pytest_folio.suites.mtd import MTDStressSuite


class TestMTDStress(MTDStressSuite):
    pass
