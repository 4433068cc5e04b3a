"""In the guest: the test that runs now, kept in the results share, so a run that
overruns ``vm --timeout`` is reported with the test it was in, since when, and how many
had finished (``-q`` shows the host only dots, and qemu is killed before pytest could
say more). Loaded by the runner with ``-p``; it writes only inside a guest."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from pytest_folio.vmabi import GUEST_OUT

RUNNING = "running"     # in the results share: "FINISHED NODEID" of the test in progress


class NowRunning:
    """Rewrites one small file at each test's start: one write, cheap under TCG."""

    def __init__(self, share: Path) -> None:
        self.path = share / RUNNING
        self.finished = 0

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        with contextlib.suppress(OSError):
            self.path.write_text(f"{self.finished} {nodeid}\n")

    def pytest_runtest_logfinish(self) -> None:
        self.finished += 1


def pytest_configure(config: pytest.Config) -> None:
    share = Path(GUEST_OUT)
    if os.environ.get("PYTEST_FOLIO_VM") == "1" and share.is_dir():
        config.pluginmanager.register(NowRunning(share), f"{__name__}.state")


def describe(share: Path, now: float) -> str:
    """On the host, after a timeout: ``it was running ID for 612 s, after 87 finished
    tests``, or an empty string when the guest's pytest never started a test."""
    path = share / RUNNING
    try:
        finished, _, nodeid = path.read_text(errors="replace").strip().partition(" ")
        since = now - path.stat().st_mtime
    except OSError:
        return ""
    if not nodeid:
        return ""
    return (f"it was running {nodeid[:200]} for {since:.0f} s, after {finished} finished "
            "test(s)")
