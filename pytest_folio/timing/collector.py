"""The timing collector: listens to ``pytest_folio_measurement`` and saves/compares runs.

Where a test runs (the serial process or an xdist worker) its measurements wait in the
item's stash and ride on the next test report as the plain attribute
``folio_measurements`` (pytest serializes a report's ``__dict__``, so xdist carries it to
the controller). The controller gathers them from ``pytest_runtest_logreport``: whatever
reached it before a worker died is kept, and only the test that was running is lost.
At the end the controller writes the JSON once, atomically, and prints the comparison.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from pytest_folio.measurement import Measurement
from pytest_folio.options import FolioSettings
from pytest_folio.timing import table
from pytest_folio.timing.compare import Comparison, Row, compare_runs
from pytest_folio.timing.machine import machine_facts, xdist_worker_count
from pytest_folio.timing.storage import (
    Record,
    TimingFileError,
    TimingRun,
    check_samples,
    load_run,
    save_run,
)

REPORT_ATTR = "folio_measurements"
CONTROLLER_HOST = "folio_controller_host"      # workerinput key
_PENDING = pytest.StashKey[list[dict[str, Any]]]()
_COUNT = pytest.StashKey[int]()


def _check_save_path(path: Path) -> None:
    if path.is_dir():
        raise pytest.UsageError(f"--folio-save {path}: is a directory")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise pytest.UsageError(f"--folio-save {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise pytest.UsageError(f"--folio-save {path}: directory {parent} is not writable")


def _title(row: Row) -> str:
    return f"{row.name} {row.label}" if row.label else row.name


class XdistHosts:
    """Tells every worker the controller's host name, so remote ones report theirs."""

    def __init__(self, host: str) -> None:
        self.host = host

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[CONTROLLER_HOST] = self.host


class TimingCollector:
    """One per process; only the controller (or a serial run) keeps and saves records."""

    def __init__(self, config: pytest.Config, settings: FolioSettings) -> None:
        self.config = config
        self.settings = settings
        workerinput: dict[str, Any] = getattr(config, "workerinput", {})
        self.workerid: str = workerinput.get("workerid", "")
        self.is_worker = bool(self.workerid)
        self.host = socket.gethostname()
        # a worker on another machine sends that machine's facts once, with a record
        self.send_machine = self.is_worker and workerinput.get(CONTROLLER_HOST) not in (
            None, self.host)
        self.hosts: dict[str, dict[str, Any]] = {}
        self.order: dict[str, int] = {}
        self.received: list[tuple[int, int, dict[str, Any]]] = []
        self.base: TimingRun | None = None
        self.machine: dict[str, Any] = {}
        self.comparison: Comparison | None = None
        self.regressions: list[str] = []
        self.untested: list[str] = []
        self.save_error = ""
        if self.is_worker:
            return
        if settings.compare_fail is not None and settings.compare is None:
            raise pytest.UsageError("--folio-compare-fail needs --folio-compare BASE.json")
        if settings.save is not None:
            _check_save_path(settings.save)
        if settings.compare is not None:
            try:
                self.base = load_run(settings.compare)
            except TimingFileError as exc:
                raise pytest.UsageError(f"--folio-compare: {exc}") from None
        self.machine = machine_facts(xdist_worker_count(config))

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if self.is_worker:
            return []
        s = self.settings
        parts = [f"memcpy {self.machine.get('memcpy_gbps')} GB/s"]
        if s.save is not None:
            parts.append(f"saving to {s.save}")
        if self.base is not None:
            parts.append(f"comparing against {s.compare} ({len(self.base.records)} "
                         f"measurements, {self.base.created or 'undated'}, host "
                         f"{self.base.machine.get('host', '?')})")
        return ["folio timing: " + "; ".join(parts)]

    # -- where the tests run ------------------------------------------------------------

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Collection order, the same on every worker: saved records follow it."""
        self.order = {item.nodeid: i for i, item in enumerate(session.items)}

    def pytest_folio_measurement(self, item: pytest.Item, measurement: Measurement) -> None:
        try:
            samples = check_samples(measurement.samples)
        except ValueError as exc:
            raise ValueError(f"measurement {measurement.name!r}: {exc}") from None
        record = Record.from_dict(measurement.to_dict())
        record.samples = samples
        record.nodeid, record.worker, record.host = item.nodeid, self.workerid, self.host
        data = record.to_dict()
        if self.send_machine:
            data["machine"] = machine_facts(xdist_worker_count(self.config))
            self.send_machine = False
        count = item.stash.get(_COUNT, 0)
        item.stash[_COUNT] = count + 1
        data["seq"] = [self.order.get(item.nodeid, len(self.order)), count]
        item.stash.setdefault(_PENDING, []).append(data)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Any:
        """Hand this phase's new measurements to the report (and so to the controller)."""
        report = yield
        pending = item.stash.get(_PENDING, [])
        if pending:
            setattr(report, REPORT_ATTR, list(pending))
            pending.clear()
        return report

    # -- the controller -----------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        for data in getattr(report, REPORT_ATTR, None) or ():
            machine = data.pop("machine", None)
            if isinstance(machine, dict):
                self.hosts[str(data.get("host"))] = machine
            seq = data.get("seq", [0, 0])
            self.received.append((int(seq[0]), int(seq[1]), data))

    def run(self) -> TimingRun:
        """Everything received, in collection order whatever the scheduling was."""
        records = [Record.from_dict(d) for *_, d in sorted(self.received, key=lambda t: t[:2])]
        s = self.settings
        return TimingRun(records=records, machine=self.machine, hosts=self.hosts, settings={
            "orders": list(s.orders), "block_sizes": list(s.block_sizes), "mtd": s.mtd,
            "fs": s.fs, "mtd_size": s.mtd_size, "erasesize": s.erasesize,
        })

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.is_worker:
            return
        run = self.run()
        s = self.settings
        if s.save is not None:
            try:
                save_run(run, s.save)
            except OSError as exc:          # disk full, directory gone: say so, fail
                self.save_error = f"could not save timings to {s.save}: {exc.strerror or exc}"
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.base is not None:
            self.comparison = compare_runs(self.base, run)
            if s.compare_fail is not None:
                limit = s.compare_fail
                self.regressions = [
                    f"{_title(r)}: {r.regression_pct:+.1f}% worse (limit {limit:g}%, "
                    f"p={r.test.p_value:.3g})"
                    for r in self.comparison.rows if r.regressed(limit)]
                self.untested = [
                    f"{_title(r)}: {r.regression_pct:+.1f}% worse, but "
                    f"{len(r.base)} against {len(r.patched)} samples cannot be told from "
                    "noise (not failing; time more passes)"
                    for r in self.comparison.rows if r.untested_beyond(limit)]
                if self.regressions and session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        s = self.settings
        tr = terminalreporter
        if self.save_error:
            tr.write_line(f"folio: {self.save_error}", red=True)
        elif s.save is not None:
            tr.write_line(f"folio: saved {len(self.received)} measurements to {s.save}")
        if self.comparison is None:
            return
        tr.write_sep("-", f"folio timings: {s.compare} (base) against this run")
        if not self.comparison.rows:
            tr.write_line("no timings to compare")
        else:
            tr.write(table.grid(self.comparison))
        for line in self.regressions:
            tr.write_line(f"folio: regression: {line}", red=True)
        for line in self.untested:
            tr.write_line(f"folio: untested: {line}", yellow=True)
