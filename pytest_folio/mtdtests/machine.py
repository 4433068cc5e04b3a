"""Deprecated: renamed :mod:`pytest_folio.mtdtests.mtd_machine` (which machine it holds)."""

import warnings

from pytest_folio.mtdtests.mtd_machine import (
    QUICK,
    THOROUGH,
    MTDMachineFailure,
    mtd_machine,
    run_mtd_machine,
)

__all__ = ["QUICK", "THOROUGH", "MTDMachineFailure", "mtd_machine", "run_mtd_machine"]

warnings.warn("pytest_folio.mtdtests.machine is renamed pytest_folio.mtdtests.mtd_machine",
              DeprecationWarning, stacklevel=2)
