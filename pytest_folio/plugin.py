"""pytest-folio's pytest hooks: options, settings, parametrization, markers, xdist wiring.

Loaded through the ``pytest11`` entry point named ``pytest_folio`` (so ``-p pytest_folio``
works). Fixtures live in :mod:`pytest_folio.fixtures`; this module only wires things.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

from pytest_folio import hookspecs, progress
from pytest_folio.constants import PAGE_SIZE
from pytest_folio.fixtures.timing import register_collector
from pytest_folio.options import (
    add_options,
    parse_block_size_value,
    parse_erasesizes,
    parse_order,
    parse_unique,
    read_settings,
)
from pytest_folio.params import MTDParam, default_erasesizes
from pytest_folio.session import SESSION_KEY, FolioSession, session, settings
from pytest_folio.sizes import format_size
from pytest_folio.skips import SkipSummary
from pytest_folio.targets.fs import fs_oracle_header
from pytest_folio.targets.mtd import oracle_label
from pytest_folio.timeout import FolioTimeout
from pytest_folio.timing.collector import CONTROLLER_HOST

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
    config.stash[SESSION_KEY] = FolioSession.resolve(
        read_settings(config, seed=workerinput.get("folio_seed")),
        workerinput.get("folio_session"))
    register_collector(config)
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistController(), "pytest_folio.xdist")
    config.pluginmanager.register(progress.PytestProgress(config), "pytest_folio.progress")
    if not hasattr(config, "workerinput"):     # the controller sees every report
        config.pluginmanager.register(SkipSummary(), "pytest_folio.skips")
    if settings(config).timeout:
        config.pluginmanager.register(FolioTimeout(settings(config).timeout),
                                      "pytest_folio.timeout")


class _XdistController:
    """Hands the controller's decisions to every worker, so all collect and seed alike,
    and its host name, so a worker on another machine reports that machine's facts."""

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["folio_seed"] = settings(node.config).seed
        node.workerinput["folio_session"] = session(node.config).decisions()
        node.workerinput[CONTROLLER_HOST] = socket.gethostname()


def pytest_report_header(config: pytest.Config) -> list[str]:
    s = settings(config)
    return [
        "folio: orders {} ({}), block sizes {}, mtd {}, fs {}, seed {} (rerun: "
        "--folio-seed={})".format(
            ",".join(map(str, s.orders)),
            ",".join(format_size(PAGE_SIZE << o) for o in s.orders),
            ",".join(format_size(b) for b in s.block_sizes),
            s.mtd, s.fs, s.seed, s.seed),
        *(f"folio: {line}" for line in session(config).header),
        fs_oracle_header(session(config).fs_oracle),
        f"folio: mtd oracle {oracle_label(session(config).mtd_oracle)}",
    ]


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


def parametrize_block_sizes(metafunc: pytest.Metafunc, argname: str) -> None:
    """Parametrize ``argname`` (indirectly) over the run's block sizes, or the test's
    ``folio_block_sizes`` marker; ids are sizes (``[64K]``)."""
    marked = _marker_values(metafunc, "folio_block_sizes", parse_block_size_value,
                            lambda b: f"block size {format_size(b)}")
    sizes = settings(metafunc.config).block_sizes if marked is None else marked
    if "filesystem" in metafunc.fixturenames:    # a factory that ignores them: one
        sizes = session(metafunc.config).fit("fs_block_sizes", sizes)
    metafunc.parametrize(argname, sizes, indirect=True, ids=[format_size(b) for b in sizes])


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
        parametrize_block_sizes(metafunc, "filesystem")
    if "folio_order" in names:
        parametrize_orders(metafunc, "folio_order")
    if "block_size" in names:
        parametrize_block_sizes(metafunc, "block_size")
