"""mtd_test-style suites as base classes, in the pattern of fsspec's abstract tests.

Subclass them in a ``test_*.py`` module and provide an ``mtd_device`` fixture that returns
your :class:`~pytest_folio.targets.protocols.MTDDevice`::

    import pytest
    from pytest_folio.suites.mtd import MTDTests

    class TestMyFlash(MTDTests):
        stress_count = 500          # tune the class attributes below as you like

        @pytest.fixture
        def mtd_device(self):
            dev = MyFlash(size=8 << 20, erasesize=64 << 10)
            yield dev
            dev.close()

Without an own fixture, the plugin's ``mtd_device`` (the ``--folio-mtd`` target) is used.
Suites that write skip on a real device unless ``--folio-allow-destructive`` is given, and
skip on a device without MTD_WRITEABLE (the read-only check runs there instead).
"""

from pytest_folio.suites.mtd.base import destructive_allowed, require_destructive
from pytest_folio.suites.mtd.block2mtd import Block2MTDChecks
from pytest_folio.suites.mtd.fsx import MTDFsxSuite, MTDReadOnlySuite
from pytest_folio.suites.mtd.powercut import MTDPowerCutSuite
from pytest_folio.suites.mtd.race import InvalidateRaceSuite
from pytest_folio.suites.mtd.runners import (
    MTDNandSuite,
    MTDReadSuite,
    MTDSpeedSuite,
    MTDStressSuite,
    MTDTortureSuite,
)

__all__ = [
    "Block2MTDChecks",
    "InvalidateRaceSuite",
    "MTDFsxSuite",
    "MTDNandSuite",
    "MTDPowerCutSuite",
    "MTDReadOnlySuite",
    "MTDReadSuite",
    "MTDSpeedSuite",
    "MTDStressSuite",
    "MTDTests",
    "MTDTortureSuite",
    "destructive_allowed",
    "require_destructive",
]


class MTDTests(MTDReadSuite, MTDSpeedSuite, MTDStressSuite, MTDTortureSuite, MTDNandSuite,
               MTDFsxSuite, MTDReadOnlySuite, MTDPowerCutSuite):
    """Every MTD suite; subclass it with your ``mtd_device`` fixture."""
