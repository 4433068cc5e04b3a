"""The run's skips, one entry per reason at the end: ``106 skipped`` alone explains
nothing, and ``-rs`` lists every test. Reasons that differ only in numbers, sizes and
names (``16K is not ...``, ``64K is not ...``) are one family, counted together. Every
family is listed (a reason hidden behind "8 other reasons" is one the user cannot act
on), each wrapped to 80 columns."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from pytest_folio.terminal.textwidth import wrap

_VARIABLE = re.compile(r"0x[0-9a-fA-F]+|\b\d+(\.\d+)?[KMGkmg]?i?B?\b|'[^']*'|\"[^\"]*\"|"
                       r"(?<![\w.])/[\w./-]+")


def family(reason: str) -> str:
    """A skip reason with what varies from test to test replaced by ``…``."""
    reason = reason.removeprefix("Skipped: ").strip()
    return _VARIABLE.sub("…", reason)


class SkipSummary:
    """Counts skips by family (on the controller under xdist: every report arrives
    there) and prints them in the terminal summary."""

    def __init__(self) -> None:
        self.families: Counter[str] = Counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and isinstance(report.longrepr, tuple):
            self.families[family(str(report.longrepr[2]))] += 1

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.families:
            return
        total = sum(self.families.values())
        terminalreporter.write_sep("-", f"folio: {total} skipped, by reason (-rs: each test)")
        for reason, count in self.families.most_common():
            for line in wrap(f"{count:5}  {reason}", indent=" " * 9):
                terminalreporter.write_line(line)
