"""Fixtures shared by the project's tests; what they share besides fixtures (catalogues,
builders) is the package tests.helpers."""

from __future__ import annotations

import pytest

from tests.helpers import subprocess_env
from tests.helpers import timing as timing_helpers
from tests.helpers.timing import RunFactory


@pytest.fixture
def make_run() -> RunFactory:
    """``make_run([(name, folio, samples), ...], unit="ms")``: a run, one record a row."""
    return timing_helpers.make_run


@pytest.fixture
def helpers_in_subprocesses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes the test starts (``runpytest_subprocess``, a printed rerun command) import
    ``tests.helpers`` as this one does."""
    monkeypatch.setenv("PYTHONPATH", subprocess_env()["PYTHONPATH"])
