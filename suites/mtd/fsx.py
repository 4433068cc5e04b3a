"""fsx for flash (random operations against an oracle, replay, the Hypothesis form,
differential mode) and the read-only check that runs the same operations."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from pathlib import Path
from typing import ClassVar

import pytest

from pytest_folio.files import write_file
from pytest_folio.fixtures.failures import keep_failure
from pytest_folio.fixtures.mtd import MTDOpener, mtd_opener, mtd_oracle, mtd_replay
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.mtdtests.common import is_writeable
from pytest_folio.mtdtests.engine import Layout, MTDFsx, MTDFsxFailure
from pytest_folio.mtdtests.log import Op, format_mtdops
from pytest_folio.mtdtests.opgen import random_ops
from pytest_folio.mtdtests.report import SHRINK_SECONDS, explain, shrink
from pytest_folio.session import rerun_command, settings
from pytest_folio.sizes import format_size
from pytest_folio.suites.mtd.base import _MTDSuite, folio_order_of, require_destructive, run_seed
from pytest_folio.targets.mtd import oracle_label
from pytest_folio.targets.protocols import MTDDevice, Reopenable
from pytest_folio.targets.spec import TargetError


class MTDFsxSuite(_MTDSuite):
    """fsx for flash: random operations, every answer checked against an oracle (or, with
    ``--folio-mtd-oracle``, against the reference given the same operations), at every
    geometry; then the same as a Hypothesis state machine that shrinks a failure."""

    mtd_fsx_ops: ClassVar[int] = 1200         # random operations, besides the sweeps
    mtd_fsx_passes: ClassVar[int] = 4         # sweeps over the whole device
    mtd_fsx_seed: ClassVar[int | None] = None  # None: the run's seed
    # None: the run's --folio-hypothesis level; or "mtd-thorough", or a profile of yours
    mtd_hypothesis_profile: ClassVar[str | None] = None
    # the random run's failure is shrunk for at most this long (0: printed unshrunk)
    mtd_fsx_shrink_seconds: ClassVar[float] = SHRINK_SECONDS

    @staticmethod
    def _layout(dev: MTDDevice, request: pytest.FixtureRequest) -> Layout:
        order = folio_order_of(dev, request)
        return Layout.of(dev, None if order is None else PAGE_SIZE << order)

    @staticmethod
    def _reference(request: pytest.FixtureRequest, size: int, erasesize: int,
                   order: int | None, readonly: bool = False
                   ) -> AbstractContextManager[MTDDevice] | None:
        """A device of the ``--folio-mtd-oracle`` at this geometry (read-only for a
        read-only target), or None when the oracle is off."""
        oracle = mtd_oracle(request.config)
        if oracle is None:
            return None
        return oracle.open(size=size, erasesize=erasesize, readonly=readonly,
                           folio_order=order if order is not None
                           else settings(request.config).orders[0])

    def _command(self, request: pytest.FixtureRequest, opener: MTDOpener | None,
                 *extra: str, function: str | None = None, size: int | None = None) -> str:
        words = [] if opener is None else opener.replay_options(size)
        words.append(f"--folio-mtd-oracle={oracle_label(mtd_oracle(request.config))}")
        return rerun_command(request.node, *words, *extra, function=function)

    def _fail(self, request: pytest.FixtureRequest, failure: MTDFsxFailure,
              dev: MTDDevice | _Resized, path: Path, what: str, *, layout: Layout,
              function: str | None = None, size: int | None = None, notes: tuple[str, ...] = (),
              rerun: Callable[[list[Op]], MTDFsxFailure | None] | None = None) -> None:
        """Fail with the failure shrunk (when ``rerun`` can run operations on fresh
        devices), where the first wrong byte is, the operations before it and the
        command that replays the (shrunk) log."""
        path.parent.mkdir(parents=True, exist_ok=True)
        whole = len(failure.ops)
        lines = [f"{what}: {failure.summary}"]
        budget = settings(request.config).shrink_budget(self.mtd_fsx_shrink_seconds)
        if rerun is not None and budget > 0:
            full = path.with_name(path.stem + "-full.mtdops")
            write_file(full, format_mtdops(failure.ops, dev, f"{what}: {failure.summary}"))
            failure = shrink(failure, rerun, seconds=budget)
            lines.append(f"{what}: shrunk to {len(failure.ops)} of {whole} operations "
                         f"(the whole run's log: {full}); it fails with: {failure.summary}")
        write_file(path, format_mtdops(failure.ops, dev, f"{what}: {failure.summary}"))
        [path] = keep_failure(request.node, path)
        lines += [f"  {line}" for line in explain(failure, layout)]
        lines += [f"{what}: operation log ({len(failure.ops)} operations): {path}",
                  f"{what}: replay it: " + self._command(
                      request, mtd_opener(request), f"--folio-mtd-replay={path}",
                      function=function, size=size)]
        lines += [f"{what}: {note}" for note in notes]
        pytest.fail("\n".join(lines), pytrace=False)

    def _rerunner(self, request: pytest.FixtureRequest, layout: Layout, order: int | None,
                  readonly: bool) -> Callable[[list[Op]], MTDFsxFailure | None] | None:
        """Runs operations on a fresh device of the test's target (and a fresh oracle):
        how they failed, or None. None when the target cannot open another device (a
        real one is the test's own)."""
        opener = mtd_opener(request)
        if opener is None or opener.target.kind == "path":
            return None

        def rerun(ops: list[Op]) -> MTDFsxFailure | None:
            with ExitStack() as stack:
                dev = stack.enter_context(opener.open(size=layout.size))
                opening = self._reference(request, layout.size, layout.erasesize, order,
                                          readonly=readonly)
                reference = None if opening is None else stack.enter_context(opening)
                try:
                    MTDFsx(dev, folio=layout.folio, reference=reference).run(ops)
                except MTDFsxFailure as failure:
                    return failure
            return None

        return rerun

    @pytest.mark.folio_erasesizes
    def test_mtd_fsx(self, mtd_device: MTDDevice, request: pytest.FixtureRequest,
                     tmp_path: Path) -> None:
        require_destructive(mtd_device, request.config)
        layout = self._layout(mtd_device, request)
        opener = mtd_opener(request)
        with ExitStack() as stack:
            size = partial_folio_size(layout.size, layout.erasesize, layout.folio)
            if (size != layout.size and opener is not None and opener.target.kind != "path"
                    and mtd_replay(request.config) is None):
                # a device whose last folio is partial (eraseblocks smaller than folios)
                mtd_device = self._open(stack, opener.open(size=size), "--folio-mtd")
                layout = dataclasses.replace(layout, size=size)
            opening = self._reference(request, mtd_device.size, mtd_device.erasesize,
                                      folio_order_of(mtd_device, request),
                                      readonly=not is_writeable(mtd_device))
            reference = (None if opening is None
                         else self._open(stack, opening, "--folio-mtd-oracle"))
            try:
                fsx = MTDFsx(mtd_device, folio=layout.folio, reference=reference)
            except ValueError as exc:
                pytest.fail(f"--folio-mtd-oracle: {exc}", pytrace=False)
            self._run_fsx(request, tmp_path, mtd_device, layout, fsx)

    @staticmethod
    def _open(stack: ExitStack, opening: AbstractContextManager[MTDDevice],
              option: str) -> MTDDevice:
        try:
            return stack.enter_context(opening)
        except TargetError as exc:
            pytest.fail(f"{option}: {exc}", pytrace=False)

    def _run_fsx(self, request: pytest.FixtureRequest, tmp_path: Path, mtd_device: MTDDevice,
                 layout: Layout, fsx: MTDFsx) -> None:
        replay = mtd_replay(request.config)
        opener = mtd_opener(request)
        try:
            if replay is not None:
                path, log = replay
                if (opener is not None and opener.several_erasesizes
                        and log.erasesize not in (None, layout.erasesize)):
                    pytest.skip(f"--folio-mtd-replay {path}: recorded in "
                                f"{format_size(log.erasesize)} eraseblocks, this test's are "
                                f"{format_size(layout.erasesize)} (--folio-erasesizes="
                                f"{format_size(log.erasesize)} runs only the log's)")
                if (log.size, log.erasesize) not in ((None, None), (layout.size,
                                                                    layout.erasesize)):
                    pytest.fail(f"--folio-mtd-replay {path}: recorded on a device of "
                                f"{log.size} bytes in {log.erasesize}-byte eraseblocks, "
                                f"{mtd_device.name} has {layout.size} in {layout.erasesize}",
                                pytrace=False)
                if not layout.can_reopen and any(op.kind == "reopen" for op in log.ops):
                    pytest.fail(f"--folio-mtd-replay {path}: the log reopens the device, "
                                f"{mtd_device.name} cannot be reopened", pytrace=False)
                fsx.run(log.ops)
                return
            seed = self.mtd_fsx_seed if self.mtd_fsx_seed is not None else run_seed(
                request.config)
            fsx.run(random_ops(layout, seed, self.mtd_fsx_ops, self.mtd_fsx_passes,
                               erased=fsx.model.is_erased))
        except MTDFsxFailure as failure:
            found = failure
        else:
            return
        self._fail(request, found, mtd_device, tmp_path / "mtd-fsx.mtdops", "mtd fsx",
                   layout=layout, size=layout.size, rerun=None if replay is not None else
                   self._rerunner(request, layout, folio_order_of(mtd_device, request),
                                  not is_writeable(mtd_device)))

    @staticmethod
    def machine_size(dev: MTDDevice, layout: Layout) -> int:
        """The Hypothesis examples' device: big enough for 8 eraseblocks and 16 folios,
        small enough that a sweep over it is cheap (at most the test's own size)."""
        want = max(8 * layout.erasesize, 16 * layout.folio, 256 << 10)
        return partial_folio_size(min(dev.size, -(-want // layout.erasesize)
                                      * layout.erasesize), layout.erasesize, layout.folio)

    @pytest.mark.folio_erasesizes
    def test_mtd_fsx_hypothesis(self, mtd_device: MTDDevice,
                                request: pytest.FixtureRequest, tmp_path: Path) -> None:
        # Hypothesis is imported only here (seconds of start-up in a VM)
        from pytest_folio.fixtures.hypothesis import machine_run
        from pytest_folio.mtdtests.machine import MTDMachineFailure, mtd_machine

        run = machine_run(request, "mtd", self.mtd_hypothesis_profile)
        if mtd_replay(request.config) is not None:
            pytest.skip("--folio-mtd-replay replays through test_mtd_fsx")
        require_destructive(mtd_device, request.config)
        layout = self._layout(mtd_device, request)
        opener = mtd_opener(request)
        if opener is not None and opener.target.kind == "path":
            opener = None          # one real device, held by this test: no second one
        size = self.machine_size(mtd_device, layout) if opener is not None else layout.size
        order = folio_order_of(mtd_device, request)

        def open_device() -> AbstractContextManager[MTDDevice]:
            if opener is not None:
                return opener.open(size=size)
            # the test's one device: each example erases it (and reopens it first)
            if isinstance(mtd_device, Reopenable):
                mtd_device.reopen()
            return nullcontext(mtd_device)

        def open_reference() -> AbstractContextManager[MTDDevice]:
            opening = self._reference(request, size, layout.erasesize, order,
                                      readonly=not is_writeable(mtd_device))
            assert opening is not None
            return opening

        machine = mtd_machine(dataclasses.replace(layout, size=size), open_device,
                              open_reference=(open_reference if mtd_oracle(request.config)
                                              is not None else None))
        # Shrinking is the cost: a bug fails at every erasesize of a folio order alike, so
        # the first failing test of an order shrinks and the others report what they found.
        group = f"{type(self).__qualname__}.test_mtd_fsx_hypothesis order {order}"
        shrunk_by = None
        try:
            try:
                run.run(machine, shrink=False)
                return
            except MTDMachineFailure:
                shrunk_by = run.claim(group)
                if shrunk_by is not None:
                    raise
            run.run(machine)
            return
        except MTDMachineFailure as failure:
            found = failure
        notes = tuple(run.notes)
        if shrunk_by is not None:
            notes += (f"not shrunk: this folio order's failure is shrunk by {shrunk_by} "
                      "(run this test alone to shrink its own)",)
        self._fail(request, found, mtd_device if size == layout.size else
                   _Resized(mtd_device, size), tmp_path / "mtd-fsx-hypothesis.mtdops",
                   "mtd fsx (Hypothesis, shrunk)" if shrunk_by is None else
                   "mtd fsx (Hypothesis)", layout=dataclasses.replace(layout, size=size),
                   function="test_mtd_fsx", size=size, notes=notes)


def partial_folio_size(size: int, erasesize: int, folio: int) -> int:
    """``size``, or one eraseblock less when eraseblocks are smaller than folios and that
    leaves the last folio partial (as block2mtd on a device of any size has it)."""
    if erasesize < folio and size % folio == 0 and size >= 8 * folio:
        return size - erasesize
    return size


class _Resized:
    """How a log names the smaller device the Hypothesis examples ran on."""

    def __init__(self, dev: MTDDevice, size: int) -> None:
        self.name, self.size = dev.name, size
        self.erasesize, self.writesize = dev.erasesize, dev.writesize


class MTDReadOnlySuite(_MTDSuite):
    """A read-only device (the target made with ``readonly=True``, or a real device
    without MTD_WRITEABLE): every write and erase gives EROFS, and nothing changes."""

    readonly_ops: ClassVar[int] = 300

    @pytest.mark.folio_erasesizes
    def test_readonly_device_refuses_every_write_and_erase(
            self, mtd_readonly_device: MTDDevice, request: pytest.FixtureRequest,
            tmp_path: Path) -> None:
        dev = mtd_readonly_device
        layout = Layout.of(dev, None)
        order = folio_order_of(dev, request)
        if order is not None:
            layout = dataclasses.replace(layout, folio=PAGE_SIZE << order)
        fsx = MTDFsx(dev, folio=layout.folio)
        try:
            fsx.adopt()      # what it holds now is what it must hold at the end
            fsx.run(random_ops(layout, run_seed(request.config), self.readonly_ops,
                               passes=2, zero_length=False))
            return
        except MTDFsxFailure as failure:
            summary = failure.summary
        pytest.fail(f"read-only device {dev.name}: {summary}", pytrace=False)
