"""What the MTD suites share: consent to write a real device, the run's seed, the
test's folio order and labels, the kernel-style log section and the rerun command."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar

import pytest

from pytest_folio.fixtures.mtd import mtd_target
from pytest_folio.mtdtests import MTDParameterError, is_writeable
from pytest_folio.mtdtests.common import MTDTestError
from pytest_folio.params import item_params
from pytest_folio.session import rerun_command, settings
from pytest_folio.sizes import format_size
from pytest_folio.targets.protocols import HasFolioOrder, MTDDevice, is_real_device
from pytest_folio.terminal import progress


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
