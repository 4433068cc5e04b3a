"""The pytest plugin of a ``vm --guests`` session (``-p pytest_folio.vm.guestplugin``).

Loaded by the controller on the host and, through the same arguments, by every worker in
a guest. On a worker it keeps pytest's temporary files in the guest (xdist hands a popen
worker a base directory under the controller's, on the host's root, which a guest sees
read-only) and adds a ``folio guest`` section to each report naming the guest and its
kernel; on the controller it ends the run with one line per guest: how many tests each
ran, and which guests went down.

With a ``vm --guest`` matrix (:mod:`pytest_folio.vm.matrix`) it also parametrizes the
items that use a kernel target over the matrix's groups (on every process alike),
deselects those at a size their group was not made at, gives each worker its own
guest's targets and the controller the scheduler that keeps each item on its group.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Generator
from typing import Any

import pytest

from pytest_folio.measurement import Measurement
from pytest_folio.params import item_params
from pytest_folio.sizes import format_size
from pytest_folio.vm.gateway import GUEST_ENV
from pytest_folio.vm.matrix import (
    KERNEL_FIXTURES,
    MATRIX_ENV,
    TARGET_FIXTURES,
    Group,
    GuestParam,
    Matrix,
    default_label,
)

MATRIX_KEY = pytest.StashKey[Matrix]()
GUEST_ARG = "folio_guest"     # the parameter naming an item's group
MATRIX_TARGET = "vm --guest"  # the target of a matrix item's measurements

SECTION = "folio guest"


def guest_line() -> str:
    """``guest1: kernel 6.1.0-57-amd64``: what a worker's reports say about where it ran."""
    return f"{os.environ.get(GUEST_ENV, '?')}: kernel {os.uname().release}"


def read_matrix(config: pytest.Config) -> Matrix | None:
    """The run's matrix: the controller's from the runner, a worker's from the
    controller; None without ``--guest``."""
    workerinput = getattr(config, "workerinput", None)
    text = (workerinput.get("folio_matrix") if workerinput is not None
            else os.environ.get(MATRIX_ENV))
    return Matrix.from_json(text) if text else None


def own_group(config: pytest.Config) -> Group | None:
    """A worker's group in the matrix (None on the controller, or without one)."""
    matrix = config.stash.get(MATRIX_KEY, None)
    workerinput = getattr(config, "workerinput", None)
    if matrix is None or workerinput is None:
        return None
    return matrix.of_guest(workerinput["workerid"])


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Before any plugin configures: a worker of a matrix runs against its own guest's
    devices, whatever the controller's ``--folio-mtd``/``--folio-fs`` (which name one
    guest's path per size, for the controller to classify)."""
    matrix = read_matrix(config)
    if matrix is None:
        return
    config.stash[MATRIX_KEY] = matrix
    group = own_group(config)
    if group is not None:
        config.option.folio_mtd, config.option.folio_fs = group.mtd, group.fs_map


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Before pytest's own tmpdir plugin reads the option: in a guest, the worker's base
    directory is pytest's default under the guest's TMPDIR. On the controller: refuse
    the options that would leave the guests out, and listen for the run's end."""
    if hasattr(config, "workerinput"):
        if os.environ.get(GUEST_ENV):
            config.option.basetemp = None
        return
    matrix = config.stash.get(MATRIX_KEY, None)
    if matrix is not None:
        config.pluginmanager.register(MatrixController(matrix), "pytest_folio.vm.matrix")
    if config.getoption("numprocesses", None) is not None:
        raise pytest.UsageError("-n/--numprocesses replaces the guests' workers with local "
                                "ones: leave it out with vm --guests (one worker per guest)")
    if config.getoption("dist", "no") == "no":
        raise pytest.UsageError("--dist no runs the tests here, not in the guests: give "
                                "vm --guests a distributing mode (load, loadfile, ...)")
    config.pluginmanager.register(GuestSummary(), "pytest_folio.vm.guests")


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A matrix item's group, as one more parameter of it (the test does not ask for
    it, so it joins the names pytest checks a parameter against); last, so the group's
    label ends the item's id (``[4K-xfs@6.1.0-57-amd64]``), where the scheduler reads
    it."""
    matrix = metafunc.config.stash.get(MATRIX_KEY, None)
    if matrix is None or not any(f in metafunc.fixturenames for f in KERNEL_FIXTURES):
        return
    metafunc.fixturenames.append(GUEST_ARG)
    metafunc.parametrize(GUEST_ARG, [GuestParam(g.label, g.kernel, g.fs)
                                     for g in matrix.groups],
                         ids=[g.label for g in matrix.groups])


def item_guest(item: pytest.Item) -> GuestParam | None:
    """The group a matrix item runs on; None: any guest."""
    callspec = getattr(item, "callspec", None)
    guest = callspec.params.get(GUEST_ARG) if callspec is not None else None
    return guest if isinstance(guest, GuestParam) else None


def made_for(group: Group, item: pytest.Item) -> bool:
    """Whether ``group``'s guests have the devices ``item``'s targets run at (a test
    that mounts or loads its own, ``kernel_ramfs``, asks the kernel itself)."""
    params = item_params(item)
    wanted = {"orders": params.folio_order, "block_sizes": params.block_size}
    names = getattr(item, "fixturenames", ())
    return all(wanted[sizes] is None or wanted[sizes] in getattr(group, sizes)
               for fixture, sizes in TARGET_FIXTURES.items() if fixture in names)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The items of a group at a size its guests were not made at (another group's)."""
    matrix = config.stash.get(MATRIX_KEY, None)
    if matrix is None:
        return
    left = [item for item in items if (guest := item_guest(item)) is not None
            and not made_for(matrix.group(guest.label), item)]
    if left:
        config.hook.pytest_deselected(items=left)
        gone = {id(item) for item in left}
        items[:] = [item for item in items if id(item) not in gone]


def pytest_runtest_setup(item: pytest.Item) -> None:
    """The scheduler keeps each item on its group; an item here that names another
    group would run against this guest's devices under that group's name."""
    group = own_group(item.config)
    guest = item_guest(item)
    if group is not None and guest is not None and guest.label != group.label:
        pytest.fail(f"scheduled on a guest of {group.label}, but the item is "
                    f"{guest.label}'s", pytrace=False)


@pytest.hookimpl(tryfirst=True)
def pytest_folio_measurement(item: pytest.Item, measurement: Measurement) -> None:
    """Before the timing collector records it: a matrix item's rows name its kernel and
    file system, so one table, and ``compare`` of two saved runs, shows a row per kind
    of guest. Its target, which tables put in columns, is the matrix's (each guest's own
    device paths would give each guest a column); a group the SPEC named is a target of
    its own: two named groups of one kernel and file system (a stock and a patched
    build of one release) are a base and a patched column of one run."""
    guest = item_guest(item)
    if guest is None:
        return
    measurement.params.update(kernel=guest.kernel, fs=guest.fs)
    named = guest.label != default_label(guest.kernel, guest.fs)
    measurement.target = guest.label if named else MATRIX_TARGET


class MatrixController:
    """On the controller: the matrix to every worker, the matrix's scheduler, and the
    items it could not run (every guest of their group went down) named at the end: the
    run then fails, as it would had they failed."""

    def __init__(self, matrix: Matrix) -> None:
        self.matrix = matrix
        self.scheduler: Any = None

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["folio_matrix"] = self.matrix.to_json()

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        from pytest_folio.vm.scheduler import make_scheduler
        self.scheduler = make_scheduler(config, self.matrix, log)
        return self.scheduler

    def not_run(self) -> dict[str, list[str]]:
        return {} if self.scheduler is None else self.scheduler.not_run()

    def pytest_report_header(self) -> list[str]:
        """The matrix, a group a line (the ``mtd``/``fs`` above are one guest's paths
        per size: each guest runs against its own)."""
        lines = []
        for group in self.matrix.groups:
            guests = [n for n, label in self.matrix.guests.items() if label == group.label]
            patched = f", modules built with {group.patch}" if group.patch else ""
            lines.append(f"folio: guests {','.join(guests)}: {group.label}, orders "
                         f"{','.join(map(str, group.orders))}, block sizes "
                         f"{','.join(format_size(b) for b in group.block_sizes)}{patched}")
        return lines

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for label, items in self.not_run().items():
            terminalreporter.write_line(f"folio: {len(items)} test(s) not run, no guest of "
                                        f"{label} was left:")
            for nodeid in items:
                terminalreporter.write_line(f"    {nodeid}")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.not_run() and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if os.environ.get(GUEST_ENV) and report.when == "call":
        report.sections.append((SECTION, guest_line()))
    return report


class GuestSummary:
    """On the controller: how many tests each guest ran and how long it was busy with
    them, the guests that went down, and the session's time against the guests' busy
    time added up (what one guest running every item one after another would take)."""

    def __init__(self) -> None:
        self.ran: collections.Counter[str] = collections.Counter()
        self.busy: collections.defaultdict[str, float] = collections.defaultdict(float)
        self.down: dict[str, str] = {}
        self.kernels: dict[str, str] = {}
        self.started = time.monotonic()

    def pytest_sessionstart(self) -> None:
        self.started = time.monotonic()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)
        if node is None:
            return
        for name, text in report.sections:
            if name == SECTION:
                self.kernels[node.gateway.id] = text.partition(": ")[2]
        # setup, call and teardown: the guest's time on the item, measured there
        self.busy[node.gateway.id] += report.duration
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
                                        f"test(s), busy {self.busy[name]:.1f} s{down}")
        session = time.monotonic() - self.started
        serial = sum(self.busy.values())
        terminalreporter.write_line(
            f"folio: session {session:.1f} s, guests busy {serial:.1f} s in all "
            f"(one guest, one item after another: {serial / session:.2f} times the "
            "session's time)")
