"""The NAND-only mtd tests; on a RAM or NOR target they skip with the kernel's reason."""

from pytest_folio.suites.mtd import MTDNandSuite


class TestMTDNand(MTDNandSuite):
    pass
