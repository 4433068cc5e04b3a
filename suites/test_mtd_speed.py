"""mtd_speedtest against the ``--folio-mtd`` target, at every folio order of the reference.

Each row goes to the timing collector as a Measurement (``--folio-save``, ``--folio-compare``).
"""

from pytest_folio.suites.mtd import MTDSpeedSuite


class TestMTDSpeed(MTDSpeedSuite):
    pass
