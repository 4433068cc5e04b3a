"""Power cuts against the ``--folio-mtd`` target at every folio order: random writes,
erases and syncs, the power cut after every sync, between writes and among erases, and
every byte checked against what the cut may leave (synced data exactly, the rest old or
new per page, or per folio where the device promises it). The reference's ``torn`` knob
says what a cut does to the folio under writeback; a device without ``power_cut()``
skips. Select them with ``-k power``."""

from pytest_folio.suites.mtd import MTDPowerCutSuite


class TestMTDPowerCut(MTDPowerCutSuite):
    pass
