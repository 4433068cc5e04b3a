"""The timing tests' helper fixture: saved runs built from figures, without a suite."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pytest_folio.timing.storage import Record, TimingRun

RunFactory = Callable[..., TimingRun]


def _make_run(rows: list[tuple[str, str, list[float]]], unit: str = "ms",
             suite: str = "mtd_speedtest", **extra: Any) -> TimingRun:
    """A run with one record per (name, folio, samples)."""
    return TimingRun(records=[
        Record(suite=suite, name=name, unit=unit, samples=samples, params={"folio": folio},
               extra=dict(extra)) for name, folio, samples in rows])


@pytest.fixture
def make_run() -> RunFactory:
    """``make_run([(name, folio, samples), ...], unit="ms")``: a run, one record a row."""
    return _make_run
