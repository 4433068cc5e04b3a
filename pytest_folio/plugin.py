"""pytest-folio's pytest hooks: options, settings, parametrization, markers, xdist wiring.

Loaded through the ``pytest11`` entry point named ``pytest_folio`` (so ``-p pytest_folio``
works). Fixtures live in :mod:`pytest_folio.fixtures`; this module only wires things.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

import pytest

from pytest_folio import hookspecs, progress
from pytest_folio.constants import PAGE_SIZE
from pytest_folio.options import (
    FolioSettings,
    add_options,
    parse_block_size_value,
    parse_order,
    parse_unique,
    read_settings,
)
from pytest_folio.sizes import format_size

pytest_plugins = [
    "pytest_folio.fixtures.model",
    "pytest_folio.fixtures.fs",
    "pytest_folio.fixtures.mtd",
    "pytest_folio.fixtures.timing",
    "pytest_folio.fixtures.fsx",
]

SETTINGS_KEY = pytest.StashKey[FolioSettings]()

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


def settings(config: pytest.Config) -> FolioSettings:
    """The run's parsed options (decided once, on the controller)."""
    return config.stash[SETTINGS_KEY]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    workerinput: dict[str, Any] = getattr(config, "workerinput", {})
    config.stash[SETTINGS_KEY] = read_settings(config, seed=workerinput.get("folio_seed"))
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistController(), "pytest_folio.xdist")
    config.pluginmanager.register(progress.PytestProgress(config), "pytest_folio.progress")


class _XdistController:
    """Hands the controller's decisions to every worker, so all collect and seed alike."""

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["folio_seed"] = settings(node.config).seed


def pytest_report_header(config: pytest.Config) -> list[str]:
    s = settings(config)
    return [
        "folio: orders {} ({}), block sizes {}, mtd {}, fs {}, seed {} (rerun: "
        "--folio-seed={})".format(
            ",".join(map(str, s.orders)),
            ",".join(format_size(PAGE_SIZE << o) for o in s.orders),
            ",".join(format_size(b) for b in s.block_sizes),
            s.mtd, s.fs, s.seed, s.seed),
    ]


def rerun_command(item: pytest.Item, *options: str) -> str:
    """The pytest command line that runs ``item`` again with the run's seed: the test by
    its file path (so it works from any directory), then ``options``."""
    test = "::".join([str(item.path), *item.nodeid.split("::")[1:]])
    return shlex.join(["python", "-m", "pytest", "-p", "pytest_folio", test, *options,
                       f"--folio-seed={settings(item.config).seed}"])


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
    metafunc.parametrize(argname, orders, indirect=True,
                         ids=[format_size(PAGE_SIZE << o) for o in orders])


def parametrize_block_sizes(metafunc: pytest.Metafunc, argname: str) -> None:
    """Parametrize ``argname`` (indirectly) over the run's block sizes, or the test's
    ``folio_block_sizes`` marker; ids are sizes (``[64K]``)."""
    marked = _marker_values(metafunc, "folio_block_sizes", parse_block_size_value,
                            lambda b: f"block size {format_size(b)}")
    sizes = settings(metafunc.config).block_sizes if marked is None else marked
    metafunc.parametrize(argname, sizes, indirect=True, ids=[format_size(b) for b in sizes])


def plugin_fixture_in_use(metafunc: pytest.Metafunc, name: str, module: str) -> bool:
    """Whether the test gets fixture ``name`` from our ``module`` rather than from a
    user's override (a subclass providing its own ``mtd_device``, say), which must not
    be parametrized behind its back."""
    defs = metafunc._arg2fixturedefs.get(name) or ()
    return bool(defs) and defs[-1].func.__module__ == module


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "folio_order" in metafunc.fixturenames:
        parametrize_orders(metafunc, "folio_order")
    if "block_size" in metafunc.fixturenames:
        parametrize_block_sizes(metafunc, "block_size")
