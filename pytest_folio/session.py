"""The run's decisions, made once: settings, targets and replayed logs.

:class:`FolioSession` is what every fixture and suite reads (through :func:`session`):
the parsed options, the resolved ``--folio-mtd`` / ``--folio-fs`` targets and their
oracles, and the ``--folio-mtd-replay`` / ``--folio-fsx-replay`` logs. The plugin builds it
in ``pytest_configure``; under xdist the controller resolves it and hands every worker
its decisions (:meth:`FolioSession.decisions`: how each spec was classified, the logs'
operations), so workers take the specs and logs exactly as the controller read them,
without probing paths or reading and parsing files again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pytest_folio.fsx.log import (
    FsxopsError,
    LogEntry,
    entries_from_data,
    entries_to_data,
    parse_fsxops,
    recorded_by,
)
from pytest_folio.inputs import read_log
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.mtdtests.log import MTDLog, MTDOpsError, parse_mtdops
from pytest_folio.options import FolioSettings
from pytest_folio.params import default_erasesizes
from pytest_folio.sizes import format_size
from pytest_folio.targets.capabilities import lacking_line, offered
from pytest_folio.targets.fs import (
    FsOracle,
    FsTarget,
    resolve_fs_oracle,
    resolve_fs_target,
    writeback_unreached,
)
from pytest_folio.targets.mtd import (
    MTDTarget,
    resolve_mtd_oracle,
    resolve_mtd_target,
)
from pytest_folio.targets.protocols import HasFolioOrder
from pytest_folio.targets.spec import TargetError, parse_size_map, parse_target_spec
from pytest_folio.timeout import TimedOut, deadline

SESSION_KEY = pytest.StashKey["FolioSession"]()


@contextmanager
def _in_time(s: FolioSettings, option: str, factory: str) -> Iterator[None]:
    """``--folio-timeout`` over a factory's check: a factory (or its device's read) that
    hangs is one usage error naming where it was, not a run stalled before any test."""
    if not s.timeout:
        yield
        return
    try:
        with deadline(s.timeout, TimedOut.raise_at):
            yield
    except TimedOut as exc:
        raise TargetError(f"{option}: factory {factory} did not return within "
                          f"{s.source('--folio-timeout')}={s.timeout:g} s in the check "
                          f"before the tests (it was at {exc})") from None


def _fitting(asked: tuple[int, ...], got: dict[int, int]) -> tuple[int, ...]:
    """Of the sizes ``asked``, one per size the target really has (``got``: asked ->
    had): the one asked that it has when there is one, else the first that gave it."""
    kept: dict[int, int] = {}
    for size in asked:
        had = got[size]
        if had not in kept or size == had:
            kept[had] = size
    return tuple(size for size in asked if size in kept.values())


def _ignored_line(what: str, label: str, got: dict[int, int], kept: tuple[int, ...],
                  show: Callable[[int], str]) -> str:
    """The header's line about a factory that does not make the size it is asked for."""
    pairs = "; ".join(f"asked {show(a)}, it has {show(h)}" for a, h in got.items()
                      if a != h)
    return (f"{label} ignores the {what} it is asked for ({pairs}): its tests run at "
            f"{', '.join(show(k) for k in kept)} only, not once more under each label")


def _try_factories(s: FolioSettings, mtd: MTDTarget, fs: FsTarget
                   ) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, list[int]]]:
    """Make one device and one file system of a user's factory at each size the run asks
    for and throw them away, so that a factory that cannot be called as the plugin calls
    it, or returns something the suites cannot use, is one line before any test rather
    than an error in each (the first is checked as ``check`` checks it). A factory that
    makes another block size (``blocksize``) or folio order (``folio_order``, when the
    device says it) than asked runs at one size per size it really makes (see
    :meth:`FolioSession.fit`). Returns the header's lines (which optional calls each
    lacks, which sizes it ignores), the end-of-run summary's (checks that cannot reach
    the file system's writeback) and the sizes kept."""
    lines: list[str] = []
    summary: list[str] = []
    sizes: dict[str, list[int]] = {}
    if mtd.kind == "factory":
        orders: dict[int, int] = {}
        for order in s.orders:
            with _in_time(s, mtd.option, mtd.spec.text), mtd.open(
                    size=s.mtd_size, erasesize=s.erasesize, folio_order=order) as dev:
                if not orders:
                    mtd.check_first(dev)
                    rows = offered(dev, "mtd", mtd.spec.factory)
                own = dev.folio_order if isinstance(dev, HasFolioOrder) else order
                orders[order] = own if isinstance(own, int) else order
        lines.append(f"mtd {mtd.label} {lacking_line(rows)}")
        kept = _fitting(s.orders, orders)
        if kept != s.orders:
            sizes["mtd_orders"] = list(kept)
            lines.append(_ignored_line("folio order", f"mtd {mtd.label}", orders, kept,
                                       lambda o: format_size(PAGE_SIZE << o) + " folios"))
    if fs.kind == "factory":
        blocks: dict[int, int] = {}
        unreached = None
        for size in s.block_sizes:
            with _in_time(s, fs.option, fs.spec.text), fs.open(size) as made:
                if not blocks:
                    fs.check_first(made)
                    rows = offered(made, "fs")
                    unreached = writeback_unreached(fs, made)
                blocks[size] = made.blocksize
        lines.append(f"fs {fs.label} {lacking_line(rows)}")
        if unreached is not None:
            summary.append(unreached)
        kept = _fitting(s.block_sizes, blocks)
        if kept != s.block_sizes:
            sizes["fs_block_sizes"] = list(kept)
            lines.append(_ignored_line("block size", f"fs {fs.label}", blocks, kept,
                                       format_size))
    return tuple(lines), tuple(summary), sizes


def _check_size_maps(s: FolioSettings, mtd: MTDTarget, fs: FsTarget) -> None:
    """A size map covers every size the run's options ask for (else every test at a
    missing size would fail at set-up, each with the same error)."""
    targets: list[tuple[MTDTarget | FsTarget, list[int], str]] = [
        (mtd, [PAGE_SIZE << o for o in s.orders], "--folio-orders"),
        (fs, list(s.block_sizes), "--folio-block-sizes")]
    for target, sizes, sizes_option in targets:
        missing = [size for size in sizes if target.paths and size not in target.paths]
        if missing:
            raise pytest.UsageError(
                f"{s.source(target.option)}: the size map has no {target.path_noun} for "
                f"{format_size(missing[0])} {target.size_name} ({s.source(sizes_option)}: "
                f"{','.join(format_size(size) for size in sizes)})")


def _check_reference_memory(s: FolioSettings) -> None:
    """The reference device's memory can be reserved at all (once, here, rather than an
    error at every test's set-up)."""
    from pytest_folio.model.blockdev import BlockDevice

    try:
        BlockDevice(s.mtd_size).release()
    except ValueError as exc:
        raise pytest.UsageError(f"{s.source('--folio-mtd-size')}: {exc}") from None


def _check_replay_geometry(s: FolioSettings, log: MTDLog) -> None:
    """A log recorded on a device of a size, or eraseblocks, no test of the run has would
    skip (or fail) every test: one line naming the option instead. The tests at other
    erasesizes than the log's skip (see the MTD fsx suite)."""
    if log.size is not None and log.size != s.mtd_size:
        raise MTDOpsError(f"recorded on a {format_size(log.size)} device, "
                          f"{s.source('--folio-mtd-size')} is {format_size(s.mtd_size)} "
                          f"(replay it with --folio-mtd-size={format_size(log.size)})")
    erasesizes = s.erasesizes or sorted({e for order in s.orders for e in default_erasesizes(
        order, s.erasesize, s.mtd_size)})
    if log.erasesize is not None and log.erasesize not in erasesizes:
        raise MTDOpsError(f"recorded in {format_size(log.erasesize)} eraseblocks, no test "
                          f"of this run has them ({s.source('--folio-erasesizes')}: "
                          f"{','.join(map(format_size, erasesizes))}; replay it with "
                          f"--folio-erasesizes={format_size(log.erasesize)})")


@dataclasses.dataclass(frozen=True)
class FolioSession:
    """The run's settings and everything resolved from them, the same on every worker."""

    settings: FolioSettings
    mtd: MTDTarget
    fs: FsTarget
    mtd_oracle: MTDTarget | None = None
    fs_oracle: FsOracle | None = None
    mtd_replay: tuple[str, MTDLog] | None = None           # the log's path, its operations
    fsx_replay: tuple[Path, list[LogEntry]] | None = None
    # the test that recorded the fsx log and its replay flags (fsx.log.recorded_by)
    fsx_recorded_by: tuple[str, str] | None = None
    # the logs' operations as primitive data, handed to xdist workers (see decisions())
    _logs: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)
    # the controller's header lines: the optional calls a factory's target lacks
    header: tuple[str, ...] = ()
    # whether filesystem tests add a run with the factory's cache bounded (cache_bytes)
    fs_cache_bound: bool = False
    # the controller's end-of-run summary lines: checks that cannot reach writeback
    summary: tuple[str, ...] = ()
    # a factory that ignores the sizes it is asked for: the sizes its tests run at
    # (``mtd_orders``, ``fs_block_sizes``), decided on the controller
    sizes: dict[str, list[int]] = dataclasses.field(default_factory=dict)

    @classmethod
    def resolve(cls, s: FolioSettings, decided: dict[str, Any] | None = None) -> FolioSession:
        """Resolve the targets and read the logs of ``s``; a bad spec or log is a
        :class:`pytest.UsageError` of one line. ``decided`` is the controller's
        :meth:`decisions`, on an xdist worker."""
        given = decided or {}
        kinds: dict[str, str] = given.get("kinds", {})
        try:
            mtd = resolve_mtd_target(s.mtd, s.source("--folio-mtd"), kinds.get("mtd"))
            fs = resolve_fs_target(s.fs, s.source("--folio-fs"), kinds.get("fs"))
            mtd_oracle = resolve_mtd_oracle(s.mtd_oracle, mtd.kind,
                                            s.source("--folio-mtd-oracle"))
            fs_oracle = resolve_fs_oracle(s.fs_oracle, fs, s.source("--folio-fs-oracle"),
                                          kinds.get("fs_oracle"))
            header, summary, sizes = (_try_factories(s, mtd, fs) if decided is None
                                      else ((), (), dict(given.get("sizes", {}))))
            fs_cache_bound = given.get("fs_cache_bound", fs.takes_cache_bytes)
        except TargetError as exc:
            raise pytest.UsageError(str(exc)) from None
        if decided is None:
            _check_size_maps(s, mtd, fs)
            if "reference" in (mtd.kind, mtd_oracle and mtd_oracle.kind):
                _check_reference_memory(s)
        logs: dict[str, Any] = dict(given.get("logs", {}))
        mtd_replay = fsx_replay = fsx_recorded_by = None
        try:
            if s.mtd_replay is not None:
                if "mtd_replay" in logs:
                    log = MTDLog.from_data(logs["mtd_replay"])
                else:
                    log = parse_mtdops(read_log(s.mtd_replay, MTDOpsError))
                    logs["mtd_replay"] = log.to_data()
                mtd_replay = (str(s.mtd_replay), log)
                if decided is None and mtd.kind != "path":
                    _check_replay_geometry(s, log)
        except MTDOpsError as exc:
            raise pytest.UsageError(f"{s.source('--folio-mtd-replay')}: {exc}") from None
        try:
            if s.fsx_replay is not None:
                if "fsx_replay" in logs:
                    entries = entries_from_data(logs["fsx_replay"])
                    origin = logs["fsx_recorded_by"]
                    fsx_recorded_by = None if origin is None else (origin[0], origin[1])
                else:
                    text = read_log(s.fsx_replay, FsxopsError)
                    entries = parse_fsxops(text, str(s.fsx_replay))
                    fsx_recorded_by = recorded_by(text)
                    logs["fsx_replay"] = entries_to_data(entries)
                    logs["fsx_recorded_by"] = fsx_recorded_by
                fsx_replay = (s.fsx_replay.resolve(), entries)
        except FsxopsError as exc:
            raise pytest.UsageError(f"{s.source('--folio-fsx-replay')}: {exc}") from None
        return cls(s, mtd, fs, mtd_oracle, fs_oracle, mtd_replay, fsx_replay, fsx_recorded_by,
                   logs, header, fs_cache_bound, summary, sizes)

    def decisions(self) -> dict[str, Any]:
        """What a worker needs to resolve the same session: primitive data only."""
        kinds = {"mtd": self.mtd.kind, "fs": self.fs.kind}
        if self.fs_oracle is not None:
            kinds["fs_oracle"] = self.fs_oracle.kind
        return {"kinds": kinds, "logs": dict(self._logs),
                "fs_cache_bound": self.fs_cache_bound, "sizes": dict(self.sizes)}

    def fit(self, key: str, sizes: tuple[int, ...]) -> tuple[int, ...]:
        """``sizes`` (folio orders for ``mtd_orders``, block sizes for
        ``fs_block_sizes``) as the target's tests run at them: all of them, unless its
        factory ignores them, then those the controller kept (or the first, for a
        marker's sizes it did not try)."""
        kept = self.sizes.get(key)
        if kept is None:
            return sizes
        return tuple(size for size in sizes if size in kept) or sizes[:1]

    def target_label(self, fixturenames: object) -> str:
        """How a test's measurements name its target: the ``--folio-mtd`` target's label
        when it uses ``mtd_device``, else the ``--folio-fs`` one's for ``filesystem``."""
        names = fixturenames if isinstance(fixturenames, (list, tuple)) else ()
        if "mtd_device" in names:
            return self.mtd.label
        if "filesystem" in names:
            return self.fs.label
        return ""


def remote_decisions(s: FolioSettings) -> dict[str, Any]:
    """The decisions of a controller whose target paths are its workers' (``vm
    --guests``: the devices live in the guests): each target classified by its text,
    as a worker takes it, so no path is probed on this machine."""
    kinds = {}
    for key, option in (("mtd", "--folio-mtd"), ("fs", "--folio-fs")):
        text = getattr(s, key)
        with contextlib.suppress(TargetError):    # resolve() says what is wrong
            kinds[key] = ("path" if parse_size_map(text, s.source(option)) is not None
                          else parse_target_spec(text, s.source(option)).kind)
    return {"kinds": kinds, "logs": {}}


def session(config: pytest.Config) -> FolioSession:
    """The run's session (built by the plugin's ``pytest_configure``)."""
    return config.stash[SESSION_KEY]


def settings(config: pytest.Config) -> FolioSettings:
    """The run's parsed options (decided once, on the controller)."""
    return session(config).settings


def _package_module(path: Path) -> str | None:
    """The dotted name of ``path`` when it is a module of this package (its suites):
    pytest_folio.suites.test_fsx for .../suites/test_fsx.py, wherever installed."""
    resolved = path.resolve()
    for name in ("pytest_folio.suites", "pytest_folio"):
        # where the package is, found without importing it (the suites are a layer
        # above this one: only their place on disk is read here)
        spec = importlib.util.find_spec(name)
        for base in (spec.submodule_search_locations or []) if spec else []:
            try:
                rel = resolved.relative_to(Path(base).resolve())
            except ValueError:
                continue
            return ".".join([name, *rel.with_suffix("").parts])
    return None


def rerun_command(item: pytest.Item, *options: str, function: str | None = None) -> str:
    """The pytest command line that runs ``item`` again with the run's seed, then
    ``options``; ``function`` names a sibling test to run with the same parameters
    instead (the one every reproduction command of the project is built by).

    A test of the package's own suites is named as a module (``--pyargs
    pytest_folio.suites.test_fsx::...``): a path into the installed package would make
    its directory the rootdir, with the package's own ini file, and put .folio there.
    The user's own test is named by its absolute path, so it works from any directory
    and finds the same rootdir."""
    parts = item.nodeid.split("::")
    if function is not None and isinstance(item, pytest.Function):
        parts[-1] = function + parts[-1][len(item.originalname):]
    module = _package_module(item.path)
    where = ["--pyargs", module] if module is not None else [str(item.path)]
    test = "::".join([where[-1], *parts[1:]])
    return shlex.join(["python", "-m", "pytest", "-p", "pytest_folio", *where[:-1], test,
                       *options, f"--folio-seed={settings(item.config).seed}"])
