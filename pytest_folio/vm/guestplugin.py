"""The pytest plugin of a ``vm --guests`` session (``-p pytest_folio.vm.guestplugin``).

Loaded by the controller on the host and, through the same arguments, by every worker in
a guest. On a worker it keeps pytest's temporary files in the guest (xdist hands a popen
worker a base directory under the controller's, on the host's root, which a guest sees
read-only) and adds a ``folio guest`` section to each report naming the guest and its
kernel; on the controller it ends the run with one line per guest: how many tests each
ran, and which guests went down.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Generator
from typing import Any

import pytest

from pytest_folio.vm.gateway import GUEST_ENV

SECTION = "folio guest"


def guest_line() -> str:
    """``guest1: kernel 6.1.0-57-amd64``: what a worker's reports say about where it ran."""
    return f"{os.environ.get(GUEST_ENV, '?')}: kernel {os.uname().release}"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Before pytest's own tmpdir plugin reads the option: in a guest, the worker's base
    directory is pytest's default under the guest's TMPDIR."""
    if hasattr(config, "workerinput"):
        if os.environ.get(GUEST_ENV):
            config.option.basetemp = None
        return
    if config.getoption("numprocesses", None) is not None:
        raise pytest.UsageError("-n/--numprocesses replaces the guests' workers with local "
                                "ones: leave it out with vm --guests (one worker per guest)")
    if config.getoption("dist", "no") == "no":
        raise pytest.UsageError("--dist no runs the tests here, not in the guests: give "
                                "vm --guests a distributing mode (load, loadfile, ...)")
    config.pluginmanager.register(GuestSummary(), "pytest_folio.vm.guests")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if os.environ.get(GUEST_ENV) and report.when == "call":
        report.sections.append((SECTION, guest_line()))
    return report


class GuestSummary:
    """On the controller: how many tests each guest ran, and the guests that went down."""

    def __init__(self) -> None:
        self.ran: collections.Counter[str] = collections.Counter()
        self.down: dict[str, str] = {}
        self.kernels: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)
        if node is None:
            return
        for name, text in report.sections:
            if name == SECTION:
                self.kernels[node.gateway.id] = text.partition(": ")[2]
        if report.when == "teardown":
            self.ran[node.gateway.id] += 1

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        if error:
            self.down[node.gateway.id] = str(error).strip().splitlines()[-1][:200]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        names = sorted({*self.ran, *self.down})
        if not names:
            return
        terminalreporter.write_sep("-", "folio: tests per guest")
        for name in names:
            kernel = f" ({self.kernels[name]})" if name in self.kernels else ""
            down = f"; went down: {self.down[name]}" if name in self.down else ""
            terminalreporter.write_line(f"    {name}{kernel}: ran {self.ran[name]} "
                                        f"test(s){down}")
