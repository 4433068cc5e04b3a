"""Power cuts on a file system that offers ``power_cut()`` (the
:class:`~pytest_folio.targets.protocols.PowerCut` capability): random writes (pwrite,
mapped stores, copies), fallocates, truncates, fsyncs and renames over a few files open
through two descriptors each, a cut at the end of each round, then every name, size and
byte checked against what the cut may leave under ``--folio-power-cut-rules``
(docs/powercut.md). A file system without the capability (the reference ramfs has no
backing store; a directory cannot be power cut from here) skips, saying so."""

from __future__ import annotations

from typing import ClassVar

import pytest

from pytest_folio.fixtures.fs import fs_target
from pytest_folio.fsx.powercut import (
    DEFAULT_RULES,
    FsOp,
    FsPowerCutFailure,
    FsPowerCutRun,
    fs_powercut_ops,
    powercut_features,
)
from pytest_folio.params import item_params
from pytest_folio.powercut import cut_report
from pytest_folio.session import settings
from pytest_folio.suites.fs.base import _Base
from pytest_folio.targets.protocols import FileSystem, PowerCut, power_cut_unit

WHERE = {"fsync": "right after fsyncs", "writes": "after writes that follow fsyncs",
         "renames": "after renames and writes that follow fsyncs"}


class FsPowerCut(_Base):
    """What was fsync'd survives a power cut (data, size, name); the rest reads old or
    new; nothing is invented."""

    powercut_rounds: ClassVar[int] = 10
    powercut_seed: ClassVar[int | None] = None   # None: the run's seed
    powercut_shrink_seconds: ClassVar[float] = 10.0

    def _run(self, fs: FileSystem, request: pytest.FixtureRequest, schedule: str) -> None:
        if not isinstance(fs, PowerCut):
            pytest.skip(f"{type(fs).__name__} cannot lose power here: it has no "
                        "power_cut() (the PowerCut capability; the reference ramfs keeps "
                        "nothing on a backing store)")
        seed = (self.powercut_seed if self.powercut_seed is not None
                else settings(request.config).seed)
        ops = fs_powercut_ops(seed, self.powercut_rounds, schedule, powercut_features(fs))
        rules = settings(request.config).power_cut_rules or DEFAULT_RULES
        try:
            FsPowerCutRun(fs, rules=rules).run(ops)
        except FsPowerCutFailure as failure:
            found = failure
        else:
            return
        pytest.fail(self._report(request, fs, found, schedule, rules), pytrace=False)

    def _report(self, request: pytest.FixtureRequest, fs: FileSystem,
                failure: FsPowerCutFailure, schedule: str, rules: str) -> str:
        """The failure, its run shrunk on fresh file systems of the target where the
        plugin makes them (the reproduce line follows: the seed makes the same run)."""
        target = fs_target(request.config)
        fails_with = None
        if target.kind != "path" and getattr(type(self), "filesystem", None) is None:
            def fails_with(ops: list[FsOp]) -> str | None:
                with target.open(fs.blocksize,
                                 cache_bytes=item_params(request.node).cache_bytes) as fresh:
                    try:
                        FsPowerCutRun(fresh, rules=rules).run(ops)
                    except FsPowerCutFailure as again:
                        return again.summary
                return None

        return cut_report(f"fs power cut ({WHERE[schedule]}, {rules} rules, checked in "
                          f"{power_cut_unit(fs)}-byte units)", failure.summary, failure.ops,
                          fails_with, seconds=settings(request.config).shrink_budget(
                              self.powercut_shrink_seconds))

    def test_power_cut_after_fsync_keeps_fsynced_data_sizes_and_names(
            self, filesystem: FileSystem, request: pytest.FixtureRequest) -> None:
        self._run(filesystem, request, "fsync")

    def test_power_cut_after_unsynced_writes_reads_old_or_new(
            self, filesystem: FileSystem, request: pytest.FixtureRequest) -> None:
        self._run(filesystem, request, "writes")

    def test_power_cut_after_renames_finds_each_file_under_one_of_its_names(
            self, filesystem: FileSystem, request: pytest.FixtureRequest) -> None:
        self._run(filesystem, request, "renames")
