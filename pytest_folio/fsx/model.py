"""Deprecated: renamed :mod:`pytest_folio.fsx.expected` (the expected file, not the model)."""

import warnings

from pytest_folio.fsx.expected import (
    PATTERN_CACHE_AFTER,
    PATTERN_CACHE_BYTES,
    DataPattern,
    FileModel,
)

__all__ = ["PATTERN_CACHE_AFTER", "PATTERN_CACHE_BYTES", "DataPattern", "FileModel"]

warnings.warn("pytest_folio.fsx.model is renamed pytest_folio.fsx.expected",
              DeprecationWarning, stacklevel=2)
