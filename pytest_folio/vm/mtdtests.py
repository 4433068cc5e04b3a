"""Deprecated: moved to :mod:`pytest_folio.mtdtests.kernel_modules` (guest-side code
belongs below the suites, which import it; the VM runner only names its variables)."""

import warnings

from pytest_folio.mtdtests.kernel_modules import *  # noqa: F403

warnings.warn("pytest_folio.vm.mtdtests moved to pytest_folio.mtdtests.kernel_modules",
              DeprecationWarning, stacklevel=2)
