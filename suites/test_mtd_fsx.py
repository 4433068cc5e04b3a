"""fsx for flash against the ``--folio-mtd`` target, at every folio order and erasesize:
random reads, writes, erases, syncs and reopens, every answer checked against an oracle
(``--folio-mtd-oracle=reference``: against the reference given the same operations), then
the Hypothesis form, which shrinks a failure to a few operations. A failure prints the
command that replays its log (``--folio-mtd-replay``)."""

from pytest_folio.suites.mtd import MTDFsxSuite


class TestMTDFsx(MTDFsxSuite):
    pass
