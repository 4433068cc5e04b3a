"""The block2mtd folio cover letter's benchmark: mtd_speedtest over a 256 MiB device.

The ready-made suite with more passes per row (5 a side is the fewest at which a
Mann-Whitney U test can call a change significant at p < 0.05). Run by block2mtd.sh.
"""

from pytest_folio.suites.mtd import MTDSpeedSuite


class TestBlock2mtdSpeed(MTDSpeedSuite):
    speed_passes = 5
