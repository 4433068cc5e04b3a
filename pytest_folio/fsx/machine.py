"""Deprecated: renamed :mod:`pytest_folio.fsx.fsx_machine` (which machine it holds)."""

import warnings

from pytest_folio.fsx.fsx_machine import (
    QUICK,
    THOROUGH,
    FsxMachine,
    FsxStateFailure,
    fsx_machine,
    run_fsx_machine,
)

__all__ = ["QUICK", "THOROUGH", "FsxMachine", "FsxStateFailure", "fsx_machine",
           "run_fsx_machine"]

warnings.warn("pytest_folio.fsx.machine is renamed pytest_folio.fsx.fsx_machine",
              DeprecationWarning, stacklevel=2)
