"""mtd_test-style suites as base classes, in the pattern of fsspec's abstract tests.

Subclass them in a ``test_*.py`` module and provide an ``mtd_device`` fixture that returns
your :class:`~pytest_folio.targets.protocols.MTDDevice`::

    import pytest
    from pytest_folio.suites.mtd import MTDTests

    class TestMyFlash(MTDTests):
        stress_count = 500          # tune the class attributes below as you like

        @pytest.fixture
        def mtd_device(self):
            dev = MyFlash(size=8 << 20, erasesize=64 << 10)
            yield dev
            dev.close()

Without an own fixture, the plugin's ``mtd_device`` (the ``--folio-mtd`` target) is used.
Suites that write skip on a real device unless ``--folio-allow-destructive`` is given, and
skip on a device without MTD_WRITEABLE (the read-only check runs there instead).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import ClassVar

import pytest

from pytest_folio import progress
from pytest_folio.constants import PAGE_SIZE
from pytest_folio.fixtures.mtd import MTDOpener, mtd_opener, mtd_oracle, mtd_replay, mtd_target
from pytest_folio.mtdtests import (
    MTDParameterError,
    check_bounds,
    check_readonly,
    format_results,
    is_real_device,
    is_writeable,
    nand_skip_reason,
    run_pagetest,
    run_readtest,
    run_speedtest,
    run_stresstest,
    run_torturetest,
)
from pytest_folio.mtdtests.block2mtd import (
    check_api_paths_agree,
    check_dropped_folio_race,
    check_erase_skips_erased_pages,
    check_unchanged_write_dirties_nothing,
)
from pytest_folio.mtdtests.common import MTDTestError
from pytest_folio.mtdtests.ops import (
    Layout,
    MTDFsx,
    MTDFsxFailure,
    format_mtdops,
    random_ops,
)
from pytest_folio.params import item_params
from pytest_folio.session import rerun_command, settings
from pytest_folio.sizes import format_size
from pytest_folio.targets.mtd import Block2MTD, reference_device
from pytest_folio.targets.protocols import HasFolioOrder, MTDDevice, Reopenable
from pytest_folio.targets.spec import TargetError

__all__ = [
    "Block2MTDChecks",
    "MTDFsxSuite",
    "MTDNandSuite",
    "MTDReadOnlySuite",
    "MTDReadSuite",
    "MTDSpeedSuite",
    "MTDStressSuite",
    "MTDTests",
    "MTDTortureSuite",
    "destructive_allowed",
    "require_destructive",
]


def destructive_allowed(dev: MTDDevice, config: pytest.Config) -> bool:
    """Writing is fine on the reference and on a user's device; a real one needs consent."""
    return not is_real_device(dev) or settings(config).allow_destructive


def require_destructive(dev: MTDDevice, config: pytest.Config) -> None:
    """Skip, saying why, when a suite that writes may not write ``dev``."""
    if not destructive_allowed(dev, config):
        pytest.skip(f"{dev.name} is a real device and this suite erases and writes it; "
                    f"pass --folio-allow-destructive to allow it")
    if not is_writeable(dev):
        pytest.skip(f"{dev.name} is read-only (MTD_WRITEABLE is not set)")


def run_seed(config: pytest.Config) -> int:
    """The run's seed (printed in the header), the one every random suite starts from."""
    return settings(config).seed


def folio_order_of(dev: MTDDevice, request: pytest.FixtureRequest) -> int | None:
    """The test's folio order, else the device's own ``folio_order``, else None."""
    order = item_params(request.node).folio_order
    if order is None and isinstance(dev, HasFolioOrder):
        order = int(dev.folio_order)
    return order


def folio_param(dev: MTDDevice, request: pytest.FixtureRequest) -> dict[str, str]:
    """The measurement's params: ``{"folio": "16K"}`` when the target has a folio order,
    and ``"eb"`` when the test runs at several erasesizes."""
    params = item_params(request.node)
    order = folio_order_of(dev, request)
    return dataclasses.replace(params, folio_order=order).labels()


def _rerun(request: pytest.FixtureRequest) -> str:
    """This test again on the same target, geometry, folio order and seed."""
    s = settings(request.config)
    options = [f"--folio-mtd={s.mtd}", f"--folio-mtd-size={format_size(s.mtd_size)}",
               f"--folio-erasesize={format_size(s.erasesize)}"]
    order = item_params(request.node).folio_order
    if order is not None:
        options.append(f"--folio-orders={order}")
    return rerun_command(request.node, *options)


class _MTDSuite:
    """What the suites share: the log sink and the target's description."""

    mtd_target: ClassVar[str | None] = None   # the measurement's target (default --folio-mtd)

    def _target(self, config: pytest.Config) -> str:
        if self.mtd_target is not None:
            return self.mtd_target
        return mtd_target(config).label   # e.g. "reference:api=folio,retry=on"

    @staticmethod
    @contextmanager
    def _running(request: pytest.FixtureRequest, suite: str,
                 rerun: bool = False) -> Iterator[Callable[[str], None]]:
        """Collect the kernel-style log lines into a report section of the test (see them
        with ``-rP``), and turn a bad suite parameter into a one-line failure; with
        ``rerun``, a device error also names the command that repeats the random run."""
        lines: list[str] = []
        failure = ""

        def say(line: str) -> None:    # kept for the report, and shown live
            lines.append(f"{suite}: {line}")
            progress.step(lines[-1])

        try:
            yield say
        except MTDParameterError as exc:   # a suite attribute that does not fit the device
            failure = f"{suite}: {exc}"
        except MTDTestError as exc:
            if not rerun:
                raise
            failure = f"{suite}: {exc}\n{suite}: rerun it: {_rerun(request)}"
        finally:
            request.node.add_report_section("call", suite, "\n".join(lines))
        if failure:   # without the device error chained to it: the message says it all
            raise pytest.fail.Exception(failure, pytrace=False) from None


class MTDSpeedSuite(_MTDSuite):
    """mtd_speedtest: each row is announced as a Measurement (the end-of-run table)."""

    # samples per row (the median is reported); the timing collector's Mann-Whitney test
    # needs at least 4 a side to call a change significant (p < 0.05)
    speed_passes: ClassVar[int] = 5
    speed_count: ClassVar[int] = 0    # eraseblocks to use (0: all), as the module's count

    def test_speed(self, mtd_device: MTDDevice, request: pytest.FixtureRequest) -> None:
        config = request.config
        require_destructive(mtd_device, config)
        with self._running(request, "mtd_speedtest", rerun=True) as say:
            results = run_speedtest(mtd_device, passes=self.speed_passes,
                                    count=self.speed_count, seed=run_seed(config),
                                    log=say)
        params = folio_param(mtd_device, request)
        target = self._target(config)
        item = request.node
        for result in results:
            config.hook.pytest_folio_measurement(
                item=item, measurement=result.to_measurement(params, target))
        # the rows reach the end-of-run table through the collector; the kernel-style
        # table is the test's report section (-rP), not printed around the progress line
        title = f"mtd_speedtest: {mtd_device.name}" + (
            f" [{params['folio']}]" if params else "")
        item.add_report_section("call", "mtd_speedtest table",
                                "\n".join([title, *format_results(results)]))


class MTDReadSuite(_MTDSuite):
    """mtd_readtest plus the interface checks; reading never changes the device."""

    read_count: ClassVar[int] = 0     # eraseblocks to read (0: all)

    def test_read(self, mtd_device: MTDDevice, request: pytest.FixtureRequest) -> None:
        with self._running(request, "mtd_readtest") as say:
            result = run_readtest(mtd_device, count=self.read_count, log=say)
        assert result.pages > 0, "every eraseblock is marked bad"

    def test_out_of_range_is_einval(self, mtd_device: MTDDevice,
                                    request: pytest.FixtureRequest) -> None:
        # The write/erase probes put back bytes already there, but on a real device even
        # that needs consent; the read probes always run.
        writes = is_writeable(mtd_device) and destructive_allowed(mtd_device, request.config)
        check_bounds(mtd_device, write=writes)

    def test_readonly_refuses_writes(self, mtd_device: MTDDevice,
                                     request: pytest.FixtureRequest) -> None:
        if is_writeable(mtd_device):
            pytest.skip(f"{mtd_device.name} is writeable (MTD_WRITEABLE is set)")
        check_readonly(mtd_device,
                       erase=destructive_allowed(mtd_device, request.config))


@dataclasses.dataclass(frozen=True)
class StressPart:
    """One item of a stress run split for xdist: ``index`` of ``parts``, ``count``
    operations, on its own device, from a seed derived from the run's."""

    index: int
    parts: int
    count: int

    @property
    def id(self) -> str:
        return f"part{self.index + 1}of{self.parts}"

    def seed(self, seed: int) -> int:
        """The whole run's seed for the first part; a different one, fixed by it, for
        each other part (so every worker derives the same)."""
        return seed if self.index == 0 else seed * 1_000_003 + self.index


def stress_parts(count: int, part_ops: int) -> list[StressPart]:
    """``count`` operations as parts of at most ``part_ops`` each (earlier parts take
    the remainder); one part when it fits."""
    parts = max(1, -(-count // max(1, part_ops)))
    return [StressPart(i, parts, count // parts + (i < count % parts)) for i in range(parts)]


class MTDStressSuite(_MTDSuite):
    """mtd_stresstest, every read checked against an in-memory copy of the device.

    A run longer than ``stress_part_ops`` operations is split into independent items
    (``test_stress[4K-part2of4]``), each as many operations on a fresh device from its
    own seed, so pytest-xdist spreads one long run over its workers."""

    stress_count: ClassVar[int] = 10000       # the kernel module's default
    stress_seed: ClassVar[int | None] = None  # None: the run's seed (--folio-seed)
    stress_part_ops: ClassVar[int] = 2500     # operations per item (0: never split)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "stress_part" in metafunc.fixturenames:
            parts = stress_parts(self.stress_count, self.stress_part_ops or self.stress_count)
            if len(parts) > 1:
                metafunc.parametrize("stress_part", parts, ids=[p.id for p in parts])

    @pytest.fixture
    def stress_part(self) -> StressPart:
        """The whole run as one item (parametrized instead when it is split)."""
        return StressPart(0, 1, self.stress_count)

    def test_stress(self, mtd_device: MTDDevice, stress_part: StressPart,
                    request: pytest.FixtureRequest) -> None:
        require_destructive(mtd_device, request.config)
        seed = stress_part.seed(self.stress_seed if self.stress_seed is not None
                                else run_seed(request.config))
        count = stress_part.count
        with self._running(request, "mtd_stresstest", rerun=True) as say:
            part = ("" if stress_part.parts == 1 else
                    f" (part {stress_part.index + 1} of {stress_part.parts})")
            say(f"seed {seed}, count {count}{part}")
            result = run_stresstest(mtd_device, count=count, seed=seed, log=say)
        assert result.operations == count


class MTDTortureSuite(_MTDSuite):
    """mtd_torturetest with the kernel's parameter names; a few cycles by default."""

    torture_eb: ClassVar[int | None] = None      # None: 8, or lower on a small device
    torture_ebcnt: ClassVar[int | None] = None   # None: 32, or the whole small device
    torture_pgcnt: ClassVar[int] = 0             # pages per eraseblock (0: all)
    torture_cycles: ClassVar[int] = 8            # cycles_count (the kernel: endless)
    torture_check: ClassVar[bool] = True

    def test_torture(self, mtd_device: MTDDevice, request: pytest.FixtureRequest) -> None:
        require_destructive(mtd_device, request.config)
        with self._running(request, "mtd_torturetest") as say:
            result = run_torturetest(mtd_device, eb=self.torture_eb, ebcnt=self.torture_ebcnt,
                                     pgcnt=self.torture_pgcnt, check=self.torture_check,
                                     cycles_count=self.torture_cycles, log=say)
        assert result.erase_cycles == self.torture_cycles


class MTDNandSuite(_MTDSuite):
    """The NAND-only tests; on other devices they skip with the kernel's reason."""

    @staticmethod
    def _skip_unless_runnable(dev: MTDDevice, test: str) -> None:
        reason = nand_skip_reason(dev, test)
        if reason:
            pytest.skip(f"{test}: {reason}")

    def test_pagetest(self, mtd_device: MTDDevice, request: pytest.FixtureRequest) -> None:
        self._skip_unless_runnable(mtd_device, "mtd_pagetest")
        require_destructive(mtd_device, request.config)
        with self._running(request, "mtd_pagetest") as say:
            pages = run_pagetest(mtd_device, seed=run_seed(request.config), log=say)
        assert pages > 0

    def test_subpagetest(self, mtd_device: MTDDevice) -> None:
        self._skip_unless_runnable(mtd_device, "mtd_subpagetest")

    def test_oobtest(self, mtd_device: MTDDevice) -> None:
        self._skip_unless_runnable(mtd_device, "mtd_oobtest")

    def test_nandbiterrs(self, mtd_device: MTDDevice) -> None:
        self._skip_unless_runnable(mtd_device, "mtd_nandbiterrs")


class Block2MTDChecks(_MTDSuite):
    """block2mtd's promises, checked inside the reference model's page cache; on any other
    target these skip."""

    api_paths_count: ClassVar[int] = 300   # stress operations replayed through both apis

    @staticmethod
    def _reference(dev: MTDDevice) -> Block2MTD:
        reference = reference_device(dev)
        if reference is None:
            pytest.skip(f"block2mtd checks need the reference block2mtd "
                        f"(--folio-mtd reference), not {dev.name}")
        return reference

    def test_erase_skips_erased_pages(self, mtd_device: MTDDevice) -> None:
        check_erase_skips_erased_pages(self._reference(mtd_device))

    def test_unchanged_write_dirties_nothing(self, mtd_device: MTDDevice) -> None:
        check_unchanged_write_dirties_nothing(self._reference(mtd_device))

    def test_dropped_folio_race(self, mtd_device: MTDDevice) -> None:
        dev = self._reference(mtd_device)
        retries = check_dropped_folio_race(dev)
        assert retries >= 2, "the injected race did not make write and erase retry"

    def test_api_paths_agree(self, mtd_device: MTDDevice,
                             request: pytest.FixtureRequest) -> None:
        deltas = check_api_paths_agree(self._reference(mtd_device),
                                       count=self.api_paths_count,
                                       seed=run_seed(request.config))
        # the conversion's point: the folio path needs no compound_head at all
        assert deltas["folio"].get("compound_head", 0) == 0
        assert deltas["page"].get("compound_head", 0) > 0


class MTDFsxSuite(_MTDSuite):
    """fsx for flash: random operations, every answer checked against an oracle (or, with
    ``--folio-mtd-oracle``, against the reference given the same operations), at every
    geometry; then the same as a Hypothesis state machine that shrinks a failure."""

    mtd_fsx_ops: ClassVar[int] = 1200         # random operations, besides the sweeps
    mtd_fsx_passes: ClassVar[int] = 4         # sweeps over the whole device
    mtd_fsx_seed: ClassVar[int | None] = None  # None: the run's seed
    mtd_hypothesis_profile: ClassVar[str] = "mtd-quick"   # or "mtd-thorough", or yours

    @staticmethod
    def _layout(dev: MTDDevice, request: pytest.FixtureRequest) -> Layout:
        order = folio_order_of(dev, request)
        return Layout.of(dev, None if order is None else PAGE_SIZE << order)

    @staticmethod
    def _reference(request: pytest.FixtureRequest, size: int, erasesize: int,
                   order: int | None) -> AbstractContextManager[MTDDevice] | None:
        """A device of the ``--folio-mtd-oracle`` at this geometry, or None."""
        oracle = mtd_oracle(request.config)
        if oracle is None:
            return None
        return oracle.open(size=size, erasesize=erasesize,
                           folio_order=order if order is not None
                           else settings(request.config).orders[0])

    def _command(self, request: pytest.FixtureRequest, opener: MTDOpener | None,
                 *extra: str, function: str | None = None, size: int | None = None) -> str:
        item = request.node
        parts = item.nodeid.split("::")
        if function is not None:
            parts[-1] = function + parts[-1][len(item.originalname):]
        words = ["python", "-m", "pytest", "-p", "pytest_folio",
                 "::".join([str(item.path), *parts[1:]])]
        if opener is not None:
            words += opener.replay_options(size)
        oracle = settings(request.config).mtd_oracle
        if oracle is not None:
            words.append(f"--folio-mtd-oracle={oracle}")
        return shlex.join([*words, *extra])

    def _fail(self, request: pytest.FixtureRequest, failure: MTDFsxFailure,
              dev: MTDDevice | _Resized, path: Path, what: str, *, function: str | None = None,
              size: int | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(format_mtdops(failure.ops, dev, f"{what}: {failure.summary}"))
        opener = mtd_opener(request)
        lines = [f"{what}: {failure.summary}",
                 f"{what}: operation log ({len(failure.ops)} operations): {path}",
                 f"{what}: replay it: " + self._command(
                     request, opener, f"--folio-mtd-replay={path}", function=function,
                     size=size)]
        if len(failure.ops) <= 40:
            lines[1:1] = [f"  {op}" for op in failure.ops]
        pytest.fail("\n".join(lines), pytrace=False)

    @pytest.mark.folio_erasesizes
    def test_mtd_fsx(self, mtd_device: MTDDevice, request: pytest.FixtureRequest,
                     tmp_path: Path) -> None:
        require_destructive(mtd_device, request.config)
        layout = self._layout(mtd_device, request)
        opening = self._reference(request, mtd_device.size, mtd_device.erasesize,
                                  folio_order_of(mtd_device, request))
        with ExitStack() as stack:
            try:
                reference = None if opening is None else stack.enter_context(opening)
            except TargetError as exc:
                pytest.fail(f"--folio-mtd-oracle: {exc}", pytrace=False)
            self._run_fsx(request, tmp_path, mtd_device, layout,
                          MTDFsx(mtd_device, folio=layout.folio, reference=reference))

    def _run_fsx(self, request: pytest.FixtureRequest, tmp_path: Path, mtd_device: MTDDevice,
                 layout: Layout, fsx: MTDFsx) -> None:
        replay = mtd_replay(request.config)
        try:
            if replay is not None:
                path, log = replay
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
        self._fail(request, found, mtd_device, tmp_path / "mtd-fsx.mtdops", "mtd fsx")

    @staticmethod
    def machine_size(dev: MTDDevice, layout: Layout) -> int:
        """The Hypothesis examples' device: big enough for 8 eraseblocks and 16 folios,
        small enough that a sweep over it is cheap (at most the test's own size)."""
        want = max(8 * layout.erasesize, 16 * layout.folio, 256 << 10)
        return min(dev.size, -(-want // layout.erasesize) * layout.erasesize)

    @pytest.mark.folio_erasesizes
    def test_mtd_fsx_hypothesis(self, mtd_device: MTDDevice,
                                request: pytest.FixtureRequest, tmp_path: Path) -> None:
        # Hypothesis is imported only here (seconds of start-up in a VM)
        from pytest_folio.mtdtests.machine import MTDMachineFailure, run_mtd_machine

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
            opening = self._reference(request, size, layout.erasesize, order)
            assert opening is not None
            return opening

        try:
            run_mtd_machine(dataclasses.replace(layout, size=size), open_device,
                            self.mtd_hypothesis_profile,
                            open_reference=(open_reference if mtd_oracle(request.config)
                                            is not None else None))
            return
        except MTDMachineFailure as failure:
            found = failure
        self._fail(request, found, mtd_device if size == layout.size else
                   _Resized(mtd_device, size), tmp_path / "mtd-fsx-hypothesis.mtdops",
                   "mtd fsx (Hypothesis, shrunk)", function="test_mtd_fsx", size=size)


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


class MTDTests(MTDReadSuite, MTDSpeedSuite, MTDStressSuite, MTDTortureSuite, MTDNandSuite,
               MTDFsxSuite, MTDReadOnlySuite):
    """Every MTD suite; subclass it with your ``mtd_device`` fixture."""
