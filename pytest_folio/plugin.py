"""pytest-folio's pytest hooks: options, settings, parametrization, markers, xdist wiring.

Loaded through the ``pytest11`` entry point named ``pytest_folio`` (so ``-p pytest_folio``
works). Fixtures live in :mod:`pytest_folio.fixtures`; this module only wires things.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_folio import hookspecs, suites
from pytest_folio.coverage import CoverageCollector
from pytest_folio.fixtures.failures import failures_root
from pytest_folio.fixtures.timing import register_collector
from pytest_folio.ktap.items import collect_log, locate_skip
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.options import (
    add_options,
    parse_block_size_value,
    parse_erasesizes,
    parse_order,
    parse_unique,
    read_settings,
)
from pytest_folio.params import FsParam, MTDParam, cache_bound, default_erasesizes
from pytest_folio.session import (
    SESSION_KEY,
    FolioSession,
    remote_decisions,
    session,
    settings,
)
from pytest_folio.sizes import format_size
from pytest_folio.targets.fs import fs_oracle_header
from pytest_folio.targets.mtd import oracle_label
from pytest_folio.terminal import progress
from pytest_folio.terminal.skips import SkipSummary
from pytest_folio.terminal.stale import StaleFailures
from pytest_folio.terminal.textwidth import wrap
from pytest_folio.timeout import FolioTimeout
from pytest_folio.timing.collector import CONTROLLER_HOST
from pytest_folio.vmabi import GUEST_TARGETS_ENV

pytest_plugins = [
    "pytest_folio.fixtures.model",
    "pytest_folio.fixtures.fs",
    "pytest_folio.fixtures.mtd",
    "pytest_folio.fixtures.timing",
    "pytest_folio.fixtures.fsx",
]

__all__ = ["settings"]   # the run's options, as tests and users have read them from here

MARKERS = [
    "folio_orders(*orders): run this test at these folio orders instead of --folio-orders",
    "folio_block_sizes(*sizes): run this test at these block sizes instead of "
    "--folio-block-sizes (4096, '16k', '2M', ...)",
    "folio_erasesizes(*sizes): run this test's mtd_device at every --folio-erasesizes "
    "erasesize per folio order (or at these sizes) instead of the one --folio-erasesize",
]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Parse the options and resolve the targets once (on an xdist worker: as the
    controller decided), then register the timing collector; first, so that other
    plugins' ``pytest_configure`` may read the session too."""
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    workerinput: dict[str, Any] = getattr(config, "workerinput", {})
    given = read_settings(config, seed=workerinput.get("folio_seed"))
    decided = workerinput.get("folio_session")
    if decided is None and os.environ.get(GUEST_TARGETS_ENV) == "1":
        decided = remote_decisions(given)   # vm --guests: the paths are the guests'
    config.stash[SESSION_KEY] = FolioSession.resolve(given, decided)
    register_collector(config)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistController(), "pytest_folio.xdist")
        if not hasattr(config, "workerinput"):
            _steal_work_unless_told(config)
    config.pluginmanager.register(progress.PytestProgress(config), "pytest_folio.terminal.progress")
    if not hasattr(config, "workerinput"):     # the controller sees every report
        config.pluginmanager.register(SkipSummary(), "pytest_folio.terminal.skips")
        failures = failures_root(config)
        if failures is not None:
            config.pluginmanager.register(
                StaleFailures(failures, str(settings(config).failures)),
                "pytest_folio.terminal.stale")
    if settings(config).timeout:
        config.pluginmanager.register(FolioTimeout(settings(config).timeout),
                                      "pytest_folio.timeout")
    if settings(config).coverage:
        config.pluginmanager.register(CoverageCollector(config), "pytest_folio.coverage")


def _steal_work_unless_told(config: pytest.Config) -> None:
    """``-n`` without ``--dist``: ``worksteal`` rather than xdist's implied ``load``.
    ``load`` hands out the items in fixed shares, so the run ends with one worker still
    on a last item of seconds (a timing suite) while the other idles; ``worksteal``
    moves the rest of a busy worker's share to an idle one. A ``--dist`` the user gave
    (on the command line, in ``addopts`` or ``PYTEST_ADDOPTS``) is kept."""
    told = getattr(config.known_args_namespace, "dist", None)
    if config.getoption("dist", "no") == "load" and told == "no" \
            and not getattr(config.known_args_namespace, "distload", False):
        config.option.dist = "worksteal"


class _XdistController:
    """Hands the controller's decisions to every worker, so all collect and seed alike,
    and its host name, so a worker on another machine reports that machine's facts."""

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["folio_seed"] = settings(node.config).seed
        node.workerinput["folio_session"] = session(node.config).decisions()
        node.workerinput[CONTROLLER_HOST] = socket.gethostname()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """``--folio-ktap FILE``: the log's tests join the items (first, so that ``-k`` and
    ``-m`` select among them as among any)."""
    log = settings(config).ktap
    if log is not None:
        items.extend(collect_log(session, log))
    other = other_targets_suites(config, items)
    if other:
        config.hook.pytest_deselected(items=other)
        items[:] = [item for item in items if item not in other]


# the fixtures that mark a bundled suite's test as one of a kind of target (a module of
# tests that take none of them, the kernel's in a VM, says its kind as FOLIO_KIND)
KIND_FIXTURES = {"mtd": ("mtd_device", "block2mtd"), "fs": ("filesystem", "ramfs", "fsx")}


def other_targets_suites(config: pytest.Config, items: list[pytest.Item]) -> list[pytest.Item]:
    """The bundled suites' tests of the kind of target the user did not choose, when they
    chose only one (``--folio-fs=mypkg:factory`` alone): a run against their file system
    need not test the reference flash device too. Naming the other target (even
    ``--folio-mtd=reference``) asks for both."""
    chosen = {kind for kind in KIND_FIXTURES
              if config.getoption(f"folio_{kind}") is not None
              or config.getini(f"folio_{kind}") is not None}
    if len(chosen) != 1:
        return []
    [other] = set(KIND_FIXTURES) - chosen
    bundled = Path(suites.__file__).parent
    return [item for item in items
            if item.path.is_relative_to(bundled)
            and (any(f in getattr(item, "fixturenames", ()) for f in KIND_FIXTURES[other])
                 or getattr(getattr(item, "module", None), "FOLIO_KIND", None) == other)]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Any:
    report = yield
    locate_skip(item, report)
    return report


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The run's settings, seed, targets' missing calls and oracles, in lines of at most
    80 columns (a factory's missing calls one a line)."""
    s = settings(config)
    lines = [
        "folio: orders {} ({}), block sizes {}, mtd {}, fs {}".format(
            ",".join(map(str, s.orders)),
            ",".join(format_size(PAGE_SIZE << o) for o in s.orders),
            ",".join(format_size(b) for b in s.block_sizes), s.mtd, s.fs),
        f"folio: seed {s.seed} (rerun: --folio-seed={s.seed})",
    ]
    header = session(config).header
    for line in header:
        lead, lacks, missing = line.partition(" lacks ")
        lines += ([f"folio: {lead} lacks:", *(f"    {m}" for m in missing.split("; "))]
                  if lacks else [f"folio: {line}"])
    if header:
        lines.append("folio: what each call unlocks: python -m pytest_folio check SPEC")
    lines += [fs_oracle_header(session(config).fs_oracle),
              f"folio: mtd oracle {oracle_label(session(config).mtd_oracle)}"]
    return [part for line in lines
            for part in wrap(line, indent=" " * (len(line) - len(line.lstrip()) + 4))]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The session's own summary lines (checks that could not reach writeback)."""
    for line in session(terminalreporter.config).summary:
        for part in wrap(f"folio: {line}"):
            terminalreporter.write_line(part)


def _marker_values(metafunc: pytest.Metafunc, name: str, parse: Callable[[object], int],
                   show: Callable[[int], str]) -> tuple[int, ...] | None:
    """The closest ``name`` marker's values, parsed; None when the test has no marker."""
    marker = metafunc.definition.get_closest_marker(name)
    if marker is None:
        return None
    try:
        if marker.kwargs:
            raise ValueError(f"takes values only, not {', '.join(marker.kwargs)}=")
        values = parse_unique(marker.args, parse, show)
        if not values:
            raise ValueError("needs at least one value")
        return values
    except ValueError as exc:
        message = f"{metafunc.definition.nodeid}: marker {name}: {exc}"
    # A marker is test code, not an option: fail this module's collection with one line
    # (pytest.fail without a traceback), which also works on xdist workers.
    pytest.fail(message, pytrace=False)


def target_orders(metafunc: pytest.Metafunc) -> tuple[int, ...]:
    """The run's folio orders, or the test's ``folio_orders`` marker's."""
    marked = _marker_values(metafunc, "folio_orders", parse_order,
                            lambda o: f"folio order {o}")
    return settings(metafunc.config).orders if marked is None else marked


def parametrize_orders(metafunc: pytest.Metafunc, argname: str) -> None:
    """Parametrize ``argname`` (indirectly) over the run's folio orders, or the test's
    ``folio_orders`` marker; ids are folio sizes (``[16K]``)."""
    orders = target_orders(metafunc)
    if "mtd_device" in metafunc.fixturenames:    # a factory that ignores them: one
        orders = session(metafunc.config).fit("mtd_orders", orders)
    metafunc.parametrize(argname, orders, indirect=True,
                         ids=[format_size(PAGE_SIZE << o) for o in orders])


def parametrize_block_sizes(metafunc: pytest.Metafunc, argname: str,
                            bounded: bool = False) -> None:
    """Parametrize ``argname`` (indirectly) over the run's block sizes, or the test's
    ``folio_block_sizes`` marker; ids are sizes (``[64K]``). ``bounded`` adds a run at
    the first size with the factory's cache bounded (an :class:`~.params.FsParam`,
    ``[4K-cache64K]``)."""
    marked = _marker_values(metafunc, "folio_block_sizes", parse_block_size_value,
                            lambda b: f"block size {format_size(b)}")
    sizes = settings(metafunc.config).block_sizes if marked is None else marked
    if "filesystem" in metafunc.fixturenames:    # a factory that ignores them: one
        sizes = session(metafunc.config).fit("fs_block_sizes", sizes)
    params: list[int | FsParam] = list(sizes)
    if bounded:
        params.append(FsParam(sizes[0], cache_bound(sizes[0])))
    metafunc.parametrize(argname, params, indirect=True,
                         ids=[p.id if isinstance(p, FsParam) else format_size(p)
                              for p in params])


def plugin_fixture_in_use(metafunc: pytest.Metafunc, name: str, module: str) -> bool:
    """Whether the test gets fixture ``name`` from our ``module`` rather than from a
    user's override (a subclass providing its own ``mtd_device``, say), which must not
    be parametrized behind its back."""
    defs = metafunc._arg2fixturedefs.get(name) or ()
    return bool(defs) and defs[-1].func.__module__ == module


def _erasesizes(metafunc: pytest.Metafunc, order: int) -> tuple[int | None, ...]:
    """The erasesizes a test marked ``folio_erasesizes`` runs at (None: the run's single
    ``--folio-erasesize``, for tests without the marker)."""
    marker = metafunc.definition.get_closest_marker("folio_erasesizes")
    if marker is None or session(metafunc.config).mtd.kind == "path":
        return (None,)    # real devices have their own geometry
    s = settings(metafunc.config)
    if marker.args:
        try:
            return parse_erasesizes(",".join(map(str, marker.args)), s.mtd_size)
        except ValueError as exc:
            pytest.fail(f"{metafunc.definition.nodeid}: {exc}", pytrace=False)
    return s.erasesizes or default_erasesizes(order, s.erasesize, s.mtd_size)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every parameter the plugin gives a test, decided here from the session alone.

    ``folio_order`` and ``block_size`` run at the run's (or the marker's) lists. Our
    ``mtd_device`` and ``filesystem`` run at them too (an :class:`~.params.MTDParam`, a
    block size: see :mod:`pytest_folio.params`) unless the test already has
    ``folio_order`` / ``block_size`` (then they follow it), the target is one real device
    or directory (its own geometry), or the test brings its own fixture.
    """
    names = metafunc.fixturenames
    folio = session(metafunc.config)
    if ("mtd_device" in names and "folio_order" not in names and folio.mtd.per_size
            and plugin_fixture_in_use(metafunc, "mtd_device", "pytest_folio.fixtures.mtd")):
        orders = folio.fit("mtd_orders", target_orders(metafunc))
        params = [MTDParam(order, erasesize) for order in orders
                  for erasesize in _erasesizes(metafunc, order)]
        metafunc.parametrize("mtd_device", params, indirect=True, ids=[p.id for p in params])
    if ("filesystem" in names and "block_size" not in names and folio.fs.per_size
            and plugin_fixture_in_use(metafunc, "filesystem", "pytest_folio.fixtures.fs")):
        parametrize_block_sizes(metafunc, "filesystem", folio.fs_cache_bound)
    if "folio_order" in names:
        parametrize_orders(metafunc, "folio_order")
    if "block_size" in names:
        parametrize_block_sizes(metafunc, "block_size")
