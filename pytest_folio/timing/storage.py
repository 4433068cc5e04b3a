"""Saved timing runs: one JSON document per run, with a format version, written atomically.

A run is written once, by the process that merged every worker's measurements, through a
temporary file in the same directory and ``os.replace``; a crash while saving leaves any
earlier file at that path whole. Loading checks the format and version and turns every
kind of bad file into one :class:`TimingFileError` line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from pytest_folio.measurement import Measurement

FORMAT = "pytest-folio-timing"
VERSION = 1


class TimingFileError(ValueError):
    """A timing file that cannot be used; the message is one line naming the file."""


@dataclasses.dataclass
class Record(Measurement):
    """A measurement as saved: where it ran (test id, xdist worker, host)."""

    nodeid: str = ""
    worker: str = ""
    host: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        return cast(Record, super().from_dict(data))


@dataclasses.dataclass
class TimingRun:
    """One saved run: machine facts, the run's settings and every record in test order.

    ``machine`` is the controller's; ``hosts`` has the facts of every other host whose
    xdist workers measured something (``--tx ssh=...``), by host name.
    """

    records: list[Record]
    machine: dict[str, Any] = dataclasses.field(default_factory=dict)
    hosts: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    created: str = dataclasses.field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "created": self.created,
            "machine": self.machine,
            "hosts": self.hosts,
            "settings": self.settings,
            "measurements": [r.to_dict() for r in self.records],
        }


def check_samples(samples: Any) -> list[float]:
    """Samples as finite floats; ValueError otherwise (JSON has no NaN, a bug should say so)."""
    if not isinstance(samples, list | tuple) or not samples:
        raise ValueError("samples must be a non-empty list of numbers")
    values = []
    for s in samples:
        if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s):
            raise ValueError(f"sample {s!r} is not a finite number")
        values.append(float(s))
    return values


def save_run(run: TimingRun, path: str | os.PathLike[str]) -> None:
    """Write ``run`` to ``path`` atomically: the old file stays whole until the new one is."""
    target = Path(path)
    text = json.dumps(run.to_dict(), indent=1, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(dir=target.parent or Path("."), prefix=f".{target.name}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _record(data: Any, index: int, where: str) -> Record:
    if not isinstance(data, dict):
        raise TimingFileError(f"{where}: measurement {index} is not an object")
    for key in ("suite", "name", "unit"):
        if not isinstance(data.get(key), str):
            raise TimingFileError(f"{where}: measurement {index} has no {key!r} string")
    for key in ("params", "counters", "extra"):
        if not isinstance(data.get(key, {}), dict):
            raise TimingFileError(f"{where}: measurement {index}: {key!r} is not an object")
    try:
        samples = check_samples(data.get("samples"))
    except ValueError as exc:
        raise TimingFileError(f"{where}: measurement {index} ({data['name']}): {exc}") from None
    record = Record.from_dict(data)
    record.samples = samples
    return record


def load_run(path: str | os.PathLike[str]) -> TimingRun:
    """Read a saved run; any problem is a one-line TimingFileError naming the file."""
    where = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TimingFileError(f"{where}: no such timing file") from None
    except IsADirectoryError:
        raise TimingFileError(f"{where}: is a directory, not a timing file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TimingFileError(f"{where}: cannot read timing file: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "empty" if not text.strip() else "truncated or corrupt"
        raise TimingFileError(
            f"{where}: {what} timing file (invalid JSON at line {exc.lineno}, "
            f"column {exc.colno})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TimingFileError(f"{where}: not a pytest-folio timing file")
    version = data.get("version")
    if version != VERSION:
        raise TimingFileError(
            f"{where}: timing format version {version!r}, this pytest-folio reads "
            f"version {VERSION}; re-run with --folio-save to write it again")
    measurements = data.get("measurements")
    if not isinstance(measurements, list):
        raise TimingFileError(f"{where}: no measurements list")
    for key in ("machine", "hosts", "settings"):
        if not isinstance(data.get(key, {}), dict):
            raise TimingFileError(f"{where}: {key!r} is not an object")
    return TimingRun(
        records=[_record(m, i, where) for i, m in enumerate(measurements)],
        machine=data.get("machine", {}),
        hosts=data.get("hosts", {}),
        settings=data.get("settings", {}),
        created=str(data.get("created", "")),
    )
