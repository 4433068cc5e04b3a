"""mtd_test-style runners (drivers/mtd/tests): speed, read, stress, torture and the NAND tests.

Each runner is a plain function over an MTDDevice that returns its results and raises
:class:`MTDTestError` when the device misbehaves; the pytest suites in
``pytest_folio.suites.mtd`` wrap them.
"""

from pytest_folio.mtdtests.checks import check_bounds, check_readonly
from pytest_folio.mtdtests.common import (
    NAND_REQUIRED,
    Geometry,
    MTDParameterError,
    MTDTestError,
    is_nand,
    is_writeable,
)
from pytest_folio.mtdtests.nand import NAND_TESTS, nand_skip_reason, run_pagetest
from pytest_folio.mtdtests.read import ReadResult, run_readtest
from pytest_folio.mtdtests.speed import SpeedResult, format_results, row_names, run_speedtest
from pytest_folio.mtdtests.stress import StressResult, run_stresstest
from pytest_folio.mtdtests.torture import TortureResult, run_torturetest
from pytest_folio.targets.protocols import is_real_device

__all__ = [
    "NAND_REQUIRED",
    "NAND_TESTS",
    "Geometry",
    "MTDParameterError",
    "MTDTestError",
    "ReadResult",
    "SpeedResult",
    "StressResult",
    "TortureResult",
    "check_bounds",
    "check_readonly",
    "format_results",
    "is_nand",
    "is_real_device",
    "is_writeable",
    "nand_skip_reason",
    "row_names",
    "run_pagetest",
    "run_readtest",
    "run_speedtest",
    "run_stresstest",
    "run_torturetest",
]
