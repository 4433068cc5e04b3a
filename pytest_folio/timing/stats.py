"""Deprecated: renamed :mod:`pytest_folio.timing.statistics` (one ``stats.py`` is enough:
the model's counters keep that name)."""

import warnings

from pytest_folio.timing.statistics import (
    ALPHA,
    EXACT_MAX_PAIRS,
    METHOD,
    STATISTICS,
    Significance,
    can_reach,
    center,
    mann_whitney_u,
    significance,
    u_distribution,
)

__all__ = ["ALPHA", "EXACT_MAX_PAIRS", "METHOD", "STATISTICS", "Significance", "can_reach",
           "center", "mann_whitney_u", "significance", "u_distribution"]

warnings.warn("pytest_folio.timing.stats is renamed pytest_folio.timing.statistics",
              DeprecationWarning, stacklevel=2)
