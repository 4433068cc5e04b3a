"""What a suite hands to listeners (the timing collector) when it has measured something.

Suites create :class:`Measurement` objects and announce them through the
``pytest_folio_measurement`` hook; they never import the timing collector. Everything in a
measurement is primitive data so it can travel from an xdist worker to the controller.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class Measurement:
    """Raw samples of one measured item, with what is needed to compare it across runs."""

    suite: str                      # e.g. "mtd_speedtest", "ramfs_write"
    name: str                       # e.g. "Eraseblock read (128 KiB)"
    unit: str                       # unit of the samples, e.g. "ms"
    samples: list[float]            # raw samples, one per pass
    params: dict[str, Any] = dataclasses.field(default_factory=dict)  # {"folio": "16K"}
    target: str = ""                # e.g. "reference:api=folio", "/dev/mtd0"
    counters: dict[str, int] = dataclasses.field(default_factory=dict)  # model counters
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)     # {"bytes": 268435456}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})
