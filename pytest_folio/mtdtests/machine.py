"""fsx for flash as a Hypothesis state machine: the same operations and checks, shrunk.

Each rule is one operation (or a sweep over the whole device, which pushes any cache out
in one step) applied through :class:`~.engine.MTDFsx`, so every read is checked as in the
random run and ``teardown`` compares the whole device. Offsets are drawn as a boundary
(page, folio, eraseblock, from the start or from the end) plus a small step, so shrinking
heads for the plainest boundary that still fails. When a check fails, Hypothesis replays
the shortest sequence it found last, and its :class:`MTDMachineFailure` carries that
operation log (``.mtdops`` text for ``--folio-mtd-replay``).

Its profiles, ``mtd-quick`` and ``mtd-thorough``, are the run's ``--folio-hypothesis``
levels (:mod:`pytest_folio.hypothesis_budget`): the examples are the run seed's (the same
seed tries the same sequences), and the suite keeps every failure in an example database,
so the next run replays it at once.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from pytest_folio.hypothesis_budget import profile_name, register_profiles, run_machine
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.mtdtests.engine import Layout, MTDFsx, MTDFsxFailure, sweep_chunk
from pytest_folio.mtdtests.log import FILLS, Op
from pytest_folio.targets.protocols import MTDDevice

QUICK = profile_name("mtd", "quick")
THOROUGH = profile_name("mtd", "thorough")
register_profiles()


class MTDMachineFailure(MTDFsxFailure):
    """A failure of the state machine; ``ops`` is the shrunk log."""


Opening = Callable[[], AbstractContextManager[MTDDevice]]


def mtd_machine(layout: Layout, open_device: Opening, *, open_reference: Opening | None = None
                ) -> type[RuleBasedStateMachine]:
    """A machine class over the devices ``open_device()`` opens (one per example, closed
    when it ends; the same one each time is fine: every example starts by erasing the
    whole device), each checked against one ``open_reference()`` opens, when given."""
    size, esz = layout.size, layout.erasesize
    units = sorted({u for u in (PAGE_SIZE, layout.folio, esz, layout.writesize) if u <= size})
    big = 4 * max(esz, layout.folio)

    def _point(unit: int, index: int, step: int, from_end: bool) -> int:
        index %= size // unit
        base = size - unit * (index + 1) if from_end else unit * index
        return min(max(0, base + step), size - 1)

    point = st.builds(_point, st.sampled_from(units), st.integers(0, size // units[0]),
                      st.sampled_from((0, -1, 1, -7, 7, 512)), st.booleans())
    length = st.one_of(
        st.sampled_from(sorted({1, 7, *(u + d for u in units for d in (-1, 0, 1))})),
        st.integers(1, big))
    counts = sorted({c for c in (1, 2, 3, 8, 16, layout.ebcnt) if c <= layout.ebcnt})

    class MTDMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self._devices = ExitStack()
            self.dev = self._devices.enter_context(open_device())
            self.reference = (None if open_reference is None
                              else self._devices.enter_context(open_reference()))
            self.fsx = MTDFsx(self.dev, folio=layout.folio, reference=self.reference)
            self._do(Op("erase", 0, size))

        def _do(self, op: Op) -> None:
            try:
                self.fsx.step(op)
            except MTDFsxFailure as failure:
                raise MTDMachineFailure(failure.summary, failure.ops, failure.op_number,
                                        failure.mismatch) from None

        def _fit(self, offset: int, n: int) -> int:
            n = min(n, size - offset)
            if layout.writesize > 1:
                n = max(layout.writesize, n // layout.writesize * layout.writesize)
            return n

        @rule(offset=point, n=length)
        def read(self, offset: int, n: int) -> None:
            self._do(Op("read", offset, min(n, size - offset)))

        @rule(offset=point, n=length, fill=st.sampled_from(FILLS), seed=st.integers(0, 3))
        def write(self, offset: int, n: int, fill: str, seed: int) -> None:
            if layout.writesize > 1:
                offset -= offset % layout.writesize
            n = self._fit(offset, n)
            if layout.nand and not self.fsx.model.is_erased(offset, n):
                first = offset // esz * esz
                self._do(Op("erase", first, -(-(offset + n) // esz) * esz - first))
            self._do(Op("write", offset, n, fill, seed))

        @rule(first=st.integers(0, layout.ebcnt - 1), count=st.sampled_from(counts),
              from_end=st.booleans())
        def erase(self, first: int, count: int, from_end: bool) -> None:
            first = min(first, layout.ebcnt - count)
            if from_end:
                first = layout.ebcnt - count - first
            self._do(Op("erase", first * esz, count * esz))

        @rule(fill=st.sampled_from(("rand", "pages", "ff", "00")), seed=st.integers(0, 3))
        def write_everything(self, fill: str, seed: int) -> None:
            """One sweep of writes over the whole device: every cache is pushed out."""
            chunk = sweep_chunk(layout, 4)
            for offset in range(0, size, chunk):
                if layout.nand:
                    self._do(Op("erase", offset, min(chunk, size - offset)))
                self._do(Op("write", offset, min(chunk, size - offset), fill, seed + offset))

        @rule()
        def read_everything(self) -> None:
            chunk = sweep_chunk(layout, 4)
            for offset in range(0, size, chunk):
                self._do(Op("read", offset, min(chunk, size - offset)))

        @rule(kind=st.sampled_from(("read", "write", "erase")),
              over=st.sampled_from((1, PAGE_SIZE)))
        def past_the_end(self, kind: str, over: int) -> None:
            if kind == "erase":
                self._do(Op("erase", size - esz, 2 * esz))
            else:
                self._do(Op(kind, size - PAGE_SIZE, PAGE_SIZE + over,
                            "same" if kind == "write" else ""))

        @rule(kind=st.sampled_from(("read", "write", "erase")),
              where=st.sampled_from(("start", "end", "last", "point")), offset=point)
        def nothing(self, kind: str, where: str, offset: int) -> None:
            """An operation of length 0: valid anywhere up to the end for reads and writes
            (the end included), a no-op erase anywhere inside, EINVAL at the end."""
            at = {"start": 0, "end": size, "last": size - 1, "point": offset}[where]
            self._do(Op(kind, at, 0, "rand" if kind == "write" else ""))

        @rule(offset=point, pages=st.integers(1, max(1, 2 * esz // PAGE_SIZE)),
              sub_page=st.booleans())
        def erase_part(self, offset: int, pages: int, sub_page: bool) -> None:
            """An erase of part of an eraseblock (EINVAL, or exactly the pages asked),
            then the eraseblocks around it read back."""
            n = pages * PAGE_SIZE + (offset % 512 if sub_page else 0)
            if not sub_page:
                offset -= offset % PAGE_SIZE
            n = min(n, size - offset)
            self._do(Op("erase", offset, n))
            block = offset // esz * esz
            self._do(Op("read", block, min(size, -(-(offset + n) // esz) * esz) - block))

        @precondition(lambda self: layout.can_drop)
        @rule()
        def drop_caches(self) -> None:
            self._do(Op("drop"))

        @rule()
        def sync(self) -> None:
            self._do(Op("sync"))

        @precondition(lambda self: layout.can_reopen)
        @rule()
        def reopen(self) -> None:
            self._do(Op("reopen"))

        def teardown(self) -> None:
            try:
                self.fsx.check_all()
            except MTDFsxFailure as failure:
                raise MTDMachineFailure(failure.summary, failure.ops, None,
                                        failure.mismatch) from None
            finally:
                self._devices.close()

    return MTDMachine


def run_mtd_machine(layout: Layout, open_device: Opening, profile: str = QUICK, *,
                    open_reference: Opening | None = None, seed: int | None = None,
                    **run: Any) -> None:
    """Run the machine under a registered profile (``mtd-quick``, ``mtd-thorough`` or your
    own), with ``seed`` when given; raises :class:`MTDMachineFailure` with the shrunk log.
    ``run``: :func:`~pytest_folio.hypothesis_budget.run_machine`'s database, key and
    shrinking."""
    run_machine(mtd_machine(layout, open_device, open_reference=open_reference), profile,
                seed=seed, **run)
