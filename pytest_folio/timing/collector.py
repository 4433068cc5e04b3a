"""The timing collector: listens to ``pytest_folio_measurement`` and saves/compares runs.

Where a test runs (the serial process or an xdist worker) its measurements wait in the
item's stash and ride on the next test report as the plain attribute
``folio_measurements`` (pytest serializes a report's ``__dict__``, so xdist carries it to
the controller). The controller gathers them from ``pytest_runtest_logreport``: whatever
reached it before a worker died is kept, and only the test that was running is lost.
At the end the controller writes the JSON once, atomically, and prints the comparison.
"""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path
from typing import Any

import pytest

from pytest_folio.measurement import Measurement
from pytest_folio.terminal.textwidth import wrap
from pytest_folio.timing import columns, meta, table
from pytest_folio.timing.autosave import autosave, check_storage, resolve
from pytest_folio.timing.compare import Comparison, Row, compare_runs
from pytest_folio.timing.hostinfo import machine_facts, xdist_worker_count
from pytest_folio.timing.storage import (
    Record,
    TimingFileError,
    TimingRun,
    check_samples,
    check_save_path,
    load_run,
    save_run,
)

REPORT_ATTR = "folio_measurements"
CONTROLLER_HOST = "folio_controller_host"      # workerinput key
_PENDING = pytest.StashKey[list[dict[str, Any]]]()
_COUNT = pytest.StashKey[int]()


@dataclasses.dataclass(frozen=True)
class TimingOptions:
    """What the collector is asked to do, as plain values (it reads no plugin options)."""

    save: Path | None = None
    compare: str | None = None          # a file, or a run number or name in ``storage``
    compare_fail: float | None = None
    autosave: bool = False
    storage: Path = Path(".folio")
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)  # saved as is
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    # option -> how messages name it: the option, or "ini key folio_save" when set there
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    figures: tuple[str, ...] = table.DEFAULT_FIGURES     # what each cell shows

    @property
    def measures_machine(self) -> bool:
        return self.save is not None or self.compare is not None or self.autosave

    def source(self, option: str) -> str:
        return self.sources.get(option, option)


def shown(path: Path | None) -> str:
    """A path as lines print it: relative to the working directory when under it."""
    if path is None:
        return ""
    try:
        return str(path.relative_to(Path.cwd())) if path.is_absolute() else str(path)
    except ValueError:
        return str(path)


def interrupted_path(path: Path) -> Path:
    """Where an interrupted run goes instead of ``path``: beside it, never over it."""
    return path.with_name(f"{path.stem}.interrupted{path.suffix or '.json'}")


def _title(row: Row) -> str:
    return f"{row.name} {row.label}" if row.label else row.name
class TimingCollector:
    """One per process; only the controller (or a serial run) keeps and saves records."""

    def __init__(self, config: pytest.Config, options: TimingOptions) -> None:
        self.config = config
        self.options = options
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
        self.base_path: Path | None = None
        self.machine: dict[str, Any] = {}
        self.comparison: Comparison | None = None
        self.regressions: list[str] = []
        self.gate_error = ""                # --folio-compare-fail could not judge the run
        self.undecided: list[str] = []      # what the gate could not judge, and why
        self.doubts: list[str] = []
        self.notes: list[str] = []          # what was saved where, or why not
        self.save_failed = False
        self.final: TimingRun | None = None
        self.loop_finished = False          # the test loop ended without an interrupt
        if self.is_worker:
            return
        o = options
        if o.compare_fail is not None and o.compare is None:
            raise pytest.UsageError(f"{o.source('--folio-compare-fail')} needs "
                                    "--folio-compare BASE.json")
        # refused before any test runs: a run whose timings cannot be kept is wasted
        checks = [("--folio-save", check_save_path, o.save),
                  ("--folio-autosave", check_storage, o.storage if o.autosave else None)]
        for option, check, path in checks:
            try:
                if path is not None:
                    check(path)
            except TimingFileError as exc:
                raise pytest.UsageError(f"{o.source(option)}: {exc}") from None
        if o.compare is not None:
            try:
                self.base_path = resolve(o.compare, o.storage)
                self.base = load_run(self.base_path)
            except TimingFileError as exc:
                raise pytest.UsageError(f"{o.source('--folio-compare')}: {exc}") from None
        if options.measures_machine:
            self.machine = machine_facts(xdist_worker_count(config))

    @property
    def base_name(self) -> str:
        """How short lines name the base run: its file name (the header gives the path)."""
        return self.base_path.name if self.base_path is not None else ""

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if self.is_worker or not self.options.measures_machine:
            return []
        o = self.options
        lines = [f"folio timing: memcpy {self.machine.get('memcpy_gbps')} GB/s"]
        if o.save is not None:
            lines.append(f"folio timing: saving to {o.save}")
        if o.autosave:
            lines.append(f"folio timing: autosaving under {shown(o.storage)}")
        if self.base is not None:
            lines.append(f"folio timing: comparing against {shown(self.base_path)}")
            lines.append(f"    ({len(self.base.records)} measurements, "
                         f"{meta.describe(self.base)})")
        return [part for line in lines for part in wrap(line, indent="    ")]

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
        return TimingRun(records=records, machine=self.machine, hosts=self.hosts,
                         settings=dict(self.options.settings), meta=dict(self.options.meta))

    def _save(self, run: TimingRun, session: pytest.Session) -> None:
        """Write the run where it was asked for; an interrupted run never replaces a file
        (it goes beside it); a failure to write is one line and fails the run."""
        o = self.options
        where: Path | None = None
        if not run.records:
            if o.save is not None or o.autosave:
                self.notes.append("nothing was measured: not saved"
                                  + (f" (kept {o.save} as it was)" if o.save is not None
                                     and o.save.exists() else ""))
            return
        try:
            if o.save is not None:
                path = where = o.save if run.complete else interrupted_path(o.save)
                save_run(run, path)
                self.notes.append(f"saved {len(run.records)} measurements to {path}"
                                  if run.complete else
                                  f"the run was interrupted: its {len(run.records)} "
                                  f"measurements went to {path}, not {o.save}")
            if o.autosave:
                where = o.storage
                if run.complete:
                    path = autosave(run, o.storage)
                    self.notes.append(f"saved {len(run.records)} measurements to "
                                      f"{shown(path)}")
                else:
                    self.notes.append("the run was interrupted: not autosaved")
        except OSError as exc:          # disk full, directory gone: say so, fail
            self.notes.append(f"could not save timings to {where}: {exc.strerror or exc}")
            self.save_failed = True
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        """Note that the test loop ended by itself: a second Ctrl-C while pytest handles
        the first leaves the exit status unset, and must still count as an interrupt."""
        try:
            result = yield
        except session.Failed:      # -x / --maxfail: a stop the user asked for
            self.loop_finished = True
            raise
        self.loop_finished = True
        return result

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.is_worker:
            return
        run = self.run()
        run.complete = (self.loop_finished
                        and session.exitstatus != pytest.ExitCode.INTERRUPTED)
        self.final = run
        self._save(run, session)
        if self.base is not None:
            self.comparison = compare_runs(self.base, run)
            self.doubts = meta.doubts([(self.base_name, self.base), ("this run", run)])
            limit = self.options.compare_fail
            if limit is not None:
                self._judge(self.comparison, limit)
                if not any(r.base and r.patched for r in self.comparison.rows):
                    self.gate_error = (f"nothing to compare: no item of {self.base_path} "
                                       "was measured in this run")
                if ((self.regressions or self.gate_error)
                        and session.exitstatus == pytest.ExitCode.OK):
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _judge(self, comparison: Comparison, limit: float) -> None:
        """The regression gate: one line per item beyond ``limit`` percent, a regression
        or undecided with the reason (statistics.gate), and one line counting the items
        whose own noise is larger than the limit, where even a pass says little."""
        rows = [r for r in comparison.rows if r.base and r.patched]
        quiet_noisy = 0             # within the limit, but noisier than it
        for r in rows:
            verdict = r.verdict(limit)
            what = f"{_title(r)}: {r.regression_pct:+.1f}% worse (limit {limit:g}%"
            if verdict.outcome == "regressed":
                self.regressions.append(f"{what}, {verdict.reason})")
            elif verdict.outcome == "undecided" and r.regression_pct > limit:
                self.undecided.append(f"{what}), not failing: {verdict.reason}")
            elif verdict.outcome == "undecided":
                quiet_noisy += 1
        if quiet_noisy:
            self.undecided.append(f"{quiet_noisy} of {len(rows)} items within the limit are "
                                  f"noisier than {limit:g}%: their pass says little")

    def _table(self, run: TimingRun) -> str:
        figures = self.options.figures
        if self.comparison is not None:
            return table.grid(table.of(self.comparison, figures)) if self.comparison.rows else ""
        return table.grid(columns.build(columns.one_run_columns("this run", run),
                                        figures=figures))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The run's table at the end (pytest's own -q/-qq shorten it), then what was
        saved, doubts about the comparison and regressions."""
        run = self.final
        if self.is_worker or run is None:
            return
        tr = terminalreporter
        verbosity = tr.config.get_verbosity()
        if run.records or self.comparison is not None:
            text = self._table(run)
            if verbosity >= -1 and text:
                if verbosity >= 0:
                    title = ("folio timings" if self.base is None else
                             f"folio timings: {self.base_name} (base) against this run")
                    tr.write_sep("-", title)
                tr.write(text)
            elif self.comparison is not None and not self.comparison.rows:
                tr.write_line("folio: no timings to compare")
            elif verbosity < -1:
                items = len({(r.suite, r.name) for r in run.records})
                tr.write_line(f"folio: {len(run.records)} measurements of {items} items")
        lines = [(f"folio: {line}", {"red": self.save_failed and "could not" in line})
                 for line in self.notes]
        lines += [(f"folio: warning: {line}", {"yellow": True}) for line in self.doubts]
        lines += [(f"folio: regression: {line}", {"red": True}) for line in self.regressions]
        if self.gate_error:
            lines.append((f"folio: regression gate: {self.gate_error}", {"red": True}))
        lines += [(f"folio: undecided: {line}", {"yellow": True}) for line in self.undecided]
        for text, markup in lines:
            for part in wrap(text):
                tr.write_line(part, **markup)
