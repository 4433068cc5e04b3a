"""Saved runs built from figures, for the timing tests that need no suite to run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_folio.timing.storage import Record, TimingRun

RunFactory = Callable[..., TimingRun]


def make_run(rows: list[tuple[str, str, list[float]]], unit: str = "ms",
             suite: str = "mtd_speedtest", **extra: Any) -> TimingRun:
    """A run with one record per (name, folio, samples)."""
    return TimingRun(records=[
        Record(suite=suite, name=name, unit=unit, samples=samples, params={"folio": folio},
               extra=dict(extra)) for name, folio, samples in rows])
