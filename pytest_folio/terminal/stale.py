"""A notice after a green run that the failures directory still holds earlier runs'
failures: their replay commands describe bugs this run no longer shows, and nothing
says so otherwise. The plugin deletes none of them (the user may still want them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_folio.terminal.textwidth import wrap


def failure_count(directory: Path) -> int:
    """How many tests' failures ``directory`` keeps: its subdirectories (0 when absent
    or unreadable; only read, never changed)."""
    try:
        return sum(1 for entry in directory.iterdir()
                   if entry.is_dir() and not entry.is_symlink())
    except OSError:
        return 0


class StaleFailures:
    """Says, on the controller, when a run passed while ``directory`` kept failures."""

    def __init__(self, directory: Path, shown_as: str) -> None:
        self.directory = directory
        self.shown_as = shown_as

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter,
                                exitstatus: int) -> None:
        if exitstatus != pytest.ExitCode.OK:
            return
        count = failure_count(self.directory)
        if count:
            text = (f"folio: {self.shown_as} still holds {count} earlier failure"
                    f"{'s'[:count != 1]} (stale: this run passed)")
            for line in wrap(text):
                terminalreporter.write_line(line, yellow=True)
