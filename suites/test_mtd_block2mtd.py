"""block2mtd's own promises, checked inside the reference model (other targets skip):
erase skips erased pages, unchanged writes dirty nothing, the dropped-folio race loses
nothing (fails with ``--folio-mtd reference:retry=off``), both api paths agree."""

from pytest_folio.suites.mtd import Block2MTDChecks


class TestBlock2MTD(Block2MTDChecks):
    pass
