"""Expensive results computed once per test session, whichever xdist worker needs them
first (``SessionResults``).

A session-scoped fixture runs once per worker: under ``-n 2`` an inner run that many tests
read (a catalogue group) ran on both workers, since xdist hands items out round-robin.
Here each result is a JSON file in the directory every worker's base temp shares, written
by whoever takes its lock first; a worker that finds a result being computed elsewhere
computes another one the session still needs meanwhile, so the two workers share the work
instead of one waiting. Each session has its own base temp, so nothing outlives it.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest


class SessionResults:
    """``results.get(key)``: ``compute(key)``'s JSON-able value, computed once per session.

    ``keys`` are those the session's selected tests need, in the order to compute them
    when a worker has nothing better to do.
    """

    def __init__(self, tmp_path_factory: pytest.TempPathFactory, name: str,
                 compute: Callable[[str], Any], keys: Iterable[str]) -> None:
        base = tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            base = base.parent                 # popen-gwN's parent: the session's
        self.directory = base / f"shared-{name}"
        self.directory.mkdir(exist_ok=True)
        self.compute = compute
        self.keys = list(dict.fromkeys(keys))

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def _try(self, key: str, *, wait: bool) -> bool:
        """Computes ``key`` unless it is done; False when another worker holds it and
        ``wait`` is off."""
        with open(self.directory / f"{key}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                return False
            if not self._path(key).exists():
                partial = self._path(key).with_suffix(".partial")
                partial.write_text(json.dumps(self.compute(key)))
                partial.replace(self._path(key))   # readers never see half a result
            return True

    def get(self, key: str) -> Any:
        while not self._path(key).exists():
            if self._try(key, wait=False):
                break
            # another worker is at it: do one it will otherwise need next, or wait
            if not any(self._try(other, wait=False) for other in self.keys
                       if other != key and not self._path(other).exists()):
                self._try(key, wait=True)
        return json.loads(self._path(key).read_text())
