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
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from pytest_folio.files import write_file
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
    # what was measured with: package version, git commit, options (see collector)
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    complete: bool = True           # False: the run was interrupted (Ctrl-C)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "created": self.created,
            "complete": self.complete,
            "meta": self.meta,
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


def check_save_path(path: str | os.PathLike[str]) -> None:
    """Refuse, with one line, a path a run must not be written to: a directory, a device
    node, FIFO or socket, a symlink (replacing it would not write where it points), or a
    path in a directory that is missing or not writable."""
    where = os.fspath(path)
    target = Path(path)
    try:
        info = target.lstat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise TimingFileError(f"{where}: {exc.strerror or exc}") from None
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise TimingFileError(f"{where}: is a symlink; name the file itself")
        if stat.S_ISDIR(info.st_mode):
            raise TimingFileError(f"{where}: is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise TimingFileError(f"{where}: is not a regular file (a device, FIFO or "
                                  "socket); timings go to a regular file")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise TimingFileError(f"{where}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise TimingFileError(f"{where}: directory {parent} is not writable")


def _write_new(run: TimingRun, target: Path, publish: Any) -> None:
    """Write ``run`` beside ``target`` and ``publish(tmp, target)`` it (see files)."""
    write_file(target, json.dumps(run.to_dict(), indent=1, allow_nan=False) + "\n", publish)


def save_run(run: TimingRun, path: str | os.PathLike[str]) -> None:
    """Write ``run`` to ``path`` atomically: the old file stays whole until the new one is."""
    _write_new(run, Path(path), os.replace)


def save_new(run: TimingRun, path: str | os.PathLike[str]) -> None:
    """Write ``run`` to ``path`` atomically, only if nothing is there (FileExistsError)."""
    _write_new(run, Path(path), os.link)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check(where: str, name: str, value: Any, ok: bool, what: str) -> None:
    """One line naming the file and the field when a hand-edited value has the wrong type."""
    if not ok:
        raise TimingFileError(f"{where}: {name!r} is not {what} ({value!r:.40})")


def _record(data: Any, index: int, where: str) -> Record:
    if not isinstance(data, dict):
        raise TimingFileError(f"{where}: measurement {index} is not an object")
    for key in ("suite", "name", "unit"):
        if not isinstance(data.get(key), str):
            raise TimingFileError(f"{where}: measurement {index} has no {key!r} string")
    at = f"{where}: measurement {index} ({data['name']})"
    for key in ("params", "counters", "extra"):
        if not isinstance(data.get(key, {}), dict):
            raise TimingFileError(f"{at}: {key!r} is not an object")
    _check(at, "target", data.get("target", ""), isinstance(data.get("target", ""), str),
           "a string")
    for key, value in data.get("params", {}).items():
        _check(at, f"params.{key}", value, isinstance(value, str) or _is_number(value),
               "a string or number")
    for key, value in data.get("counters", {}).items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise TimingFileError(f"{at}: counter {key!r} is not a whole number ({value!r:.40})")
    try:
        samples = check_samples(data.get("samples"))
    except ValueError as exc:
        raise TimingFileError(f"{at}: {exc}") from None
    record = Record.from_dict(data)
    record.samples = samples
    return record


def _check_header(data: dict[str, Any], where: str) -> None:
    """The run's own fields, as :class:`TimingRun` and its readers use them."""
    for key in ("machine", "hosts", "settings", "meta"):
        _check(where, key, data.get(key), isinstance(data.get(key, {}), dict), "an object")
    _check(where, "created", data.get("created"), isinstance(data.get("created", ""), str),
           "a string")
    _check(where, "complete", data.get("complete"),
           isinstance(data.get("complete", True), bool), "true or false")
    for host, facts in data.get("hosts", {}).items():
        _check(where, f"hosts.{host}", facts, isinstance(facts, dict), "an object")
    for facts, name in ((data.get("machine", {}), "machine"),
                        *((f, f"hosts.{h}") for h, f in data.get("hosts", {}).items())):
        gbps = facts.get("memcpy_gbps")
        _check(where, f"{name}.memcpy_gbps", gbps, gbps is None or (
            _is_number(gbps) and math.isfinite(gbps) and gbps > 0), "a positive number")
        for key in ("host", "cpu"):
            _check(where, f"{name}.{key}", facts.get(key),
                   isinstance(facts.get(key, ""), str), "a string")
    meta = data.get("meta", {})
    _check(where, "meta.version", meta.get("version"),
           isinstance(meta.get("version", ""), str), "a string")
    git = meta.get("git", {})
    _check(where, "meta.git", git, isinstance(git, dict), "an object")
    _check(where, "meta.git.commit", git.get("commit"),
           isinstance(git.get("commit", ""), str), "a string")
    _check(where, "meta.git.dirty", git.get("dirty"),
           isinstance(git.get("dirty", False), bool), "true or false")


def load_run(path: str | os.PathLike[str]) -> TimingRun:
    """Read a saved run; any problem is a one-line TimingFileError naming the file."""
    where = os.fspath(path)
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise TimingFileError(f"{where}: is a directory, not a timing file")
        if not stat.S_ISREG(mode):      # a FIFO would block the read for ever
            raise TimingFileError(f"{where}: is not a regular file (a device, FIFO or "
                                  "socket), not a timing file")
        text = Path(path).read_text(encoding="utf-8")
    except TimingFileError:
        raise
    except FileNotFoundError:
        raise TimingFileError(f"{where}: no such timing file") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:     # ValueError: a NUL in it
        raise TimingFileError(f"{where}: cannot read timing file: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "empty" if not text.strip() else "truncated or corrupt"
        raise TimingFileError(
            f"{where}: {what} timing file (invalid JSON at line {exc.lineno}, "
            f"column {exc.colno})") from None
    except RecursionError:
        raise TimingFileError(f"{where}: not a pytest-folio timing file (JSON nested too "
                              "deeply)") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TimingFileError(f"{where}: not a pytest-folio timing file")
    version = data.get("version")
    if type(version) is not int or version != VERSION:    # true == 1 in Python
        raise TimingFileError(
            f"{where}: timing format version {version!r}, this pytest-folio reads "
            f"version {VERSION}; re-run with --folio-save to write it again")
    measurements = data.get("measurements")
    if not isinstance(measurements, list):
        raise TimingFileError(f"{where}: no measurements list")
    _check_header(data, where)
    return TimingRun(
        records=[_record(m, i, where) for i, m in enumerate(measurements)],
        machine=data.get("machine", {}),
        hosts=data.get("hosts", {}),
        settings=data.get("settings", {}),
        created=str(data.get("created", "")),
        meta=data.get("meta", {}),
        complete=data.get("complete", True),
    )
