"""Deprecated: renamed :mod:`pytest_folio.timing.hostinfo` (host facts, not a state machine)."""

import warnings

from pytest_folio.timing.hostinfo import (
    MEMCPY_BYTES,
    MEMCPY_ROUNDS,
    cpu_model,
    machine_facts,
    memcpy_bandwidth,
    xdist_worker_count,
)

__all__ = ["MEMCPY_BYTES", "MEMCPY_ROUNDS", "cpu_model", "machine_facts", "memcpy_bandwidth",
           "xdist_worker_count"]

warnings.warn("pytest_folio.timing.machine is renamed pytest_folio.timing.hostinfo",
              DeprecationWarning, stacklevel=2)
