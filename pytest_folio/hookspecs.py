"""The plugin's own hooks, for listeners and extensions (registered by pytest_addhooks)."""

from __future__ import annotations

import pytest

from pytest_folio.measurement import Measurement


def pytest_folio_measurement(item: pytest.Item, measurement: Measurement) -> None:
    """A suite measured ``measurement`` while running ``item``.

    The timing collector implements this to record samples; a user's conftest can too
    (for example to stream figures to a dashboard).
    """
