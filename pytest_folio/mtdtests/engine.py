"""fsx for flash: random MTD operations, each checked against an oracle, with a log.

An :class:`MTDFsx` applies :class:`~.log.Op` s (read, write, erase, sync, reopen,
drop) to a device and checks every answer against the :class:`~.expected.FlashOracle`, or,
in differential mode, against a second device (the reference block2mtd) given the same
operations: every errno and every byte read. The device is put behind the answer rules
(:mod:`pytest_folio.targets.answers`): a read answers a bytes-like snapshot of the length
asked, a write None or its count, the other calls anything. :func:`~.opgen.random_ops`
makes the operations of a run; every operation is logged, and the log (:mod:`.log`)
replays the run exactly.

A device that can be closed and opened again (dropping its caches, keeping its data)
says so with a ``reopen()`` method (:class:`~pytest_folio.targets.protocols.Reopenable`):
the reference block2mtd and ``/dev/mtdN`` have one; one that can drop its clean cached
folios has ``drop_caches()`` (:class:`~pytest_folio.targets.protocols.DropDeviceCaches`).

An erase of a range that is not whole eraseblocks has two answers in Linux: EINVAL
(mtdram, NOR and NAND drivers check the alignment) or the pages asked erased, no more, no
less (block2mtd erases ``len >> PAGE_SHIFT`` pages from the page holding ``addr``). A
device may take either, but the same every time: its first such erase declares its rule.
"""

from __future__ import annotations

import dataclasses
import errno
import random
from collections.abc import Callable, Iterable
from typing import cast

from pytest_folio import coverage
from pytest_folio.bytescmp import first_difference
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.linux.uapi import MTD_RAM
from pytest_folio.mtdtests.common import MTDTestError, is_nand, is_writeable
from pytest_folio.mtdtests.expected import OK, FlashOracle, Outcome
from pytest_folio.mtdtests.log import KINDS, Op
from pytest_folio.targets.answers import MTD_RULES, AnswerError, answering
from pytest_folio.targets.protocols import DropDeviceCaches, MTDDevice, Reopenable

_PAGE_FILLS = ("ff", "00", "same", "rand", "rand")
_FILL_CLASS = {"rand": "random", "ff": "0xff", "00": "zero", "same": "same as there",
               "pages": "mixed pages"}

# -- write data -------------------------------------------------------------------------

def _fill(fill: str, length: int, seed: int, current: bytes) -> bytes:
    if fill == "rand":
        return random.Random(seed).randbytes(length)
    if fill == "ff":
        return b"\xff" * length
    if fill == "00":
        return bytes(length)
    return current


def make_data(op: Op, current: bytes, clear_only: bool) -> bytes:
    """The bytes ``op`` writes, given what the oracle holds there. ``clear_only`` devices
    (flash that can only clear bits) get ``data & current``, which a NOR program and a
    RAM overwrite store alike."""
    if op.fill == "pages":
        rng = random.Random(op.seed)
        parts = []
        pos, end = op.offset, op.offset + op.length
        while pos < end:
            stop = min(end, (pos // PAGE_SIZE + 1) * PAGE_SIZE)
            piece = current[pos - op.offset:stop - op.offset]
            parts.append(_fill(rng.choice(_PAGE_FILLS), stop - pos, rng.getrandbits(32),
                               piece))
            pos = stop
        data = b"".join(parts)
    else:
        data = _fill(op.fill, op.length, op.seed, current)
    if clear_only and data != current:
        data = (int.from_bytes(data) & int.from_bytes(current)).to_bytes(len(data))
    return data


# -- the checker ------------------------------------------------------------------------

class MTDFsxFailure(MTDTestError):
    """The device answered one operation differently from the oracle.

    ``summary`` is one line; ``ops`` is the log up to and including the failing
    operation (``op_number`` of them, or every operation for the final compare).
    """

    def __init__(self, summary: str, ops: list[Op], op_number: int | None,
                 mismatch: Mismatch | None = None) -> None:
        super().__init__(summary)
        self.summary = summary
        self.ops = list(ops)
        self.op_number = op_number
        self.mismatch = mismatch


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """The first wrong byte: its offset, and both sides' bytes around it from ``start``."""

    at: int
    start: int
    got: bytes
    expected: bytes


@dataclasses.dataclass(frozen=True)
class Layout:
    """What the generator needs to know about the device."""

    size: int
    erasesize: int
    writesize: int
    folio: int            # the folio size of the cache in front of the device
    nand: bool            # pages may only be programmed once after an erase
    clear_only: bool      # writes can only clear bits (anything but RAM)
    can_reopen: bool
    can_drop: bool = False    # it has drop_caches()

    @classmethod
    def of(cls, dev: MTDDevice, folio: int | None) -> Layout:
        return cls(size=dev.size, erasesize=dev.erasesize, writesize=max(1, dev.writesize),
                   folio=folio or 4 * PAGE_SIZE, nand=is_nand(dev),
                   clear_only=dev.type != MTD_RAM,
                   can_reopen=isinstance(dev, Reopenable),
                   can_drop=isinstance(dev, DropDeviceCaches))

    @property
    def ebcnt(self) -> int:
        return self.size // self.erasesize


def sweep_chunk(layout: Layout, parts: int = 32) -> int:
    """The sweeps' step: a ``parts``-th of the device in whole eraseblocks."""
    return max(1, layout.size // parts // layout.erasesize) * layout.erasesize


def apply(dev: MTDDevice, op: Op, data: bytes) -> Outcome:
    """Do ``op`` on ``dev`` (a device behind the answer rules, :func:`.answers.answering`):
    what it returned, or the errno it failed with; :class:`.answers.AnswerError` when
    the answer carries other information than the protocol's."""
    calls: dict[str, Callable[[], object]] = {
        "write": lambda: dev.write(op.offset, data),
        "erase": lambda: dev.erase(op.offset, op.length),
        "sync": dev.sync,
        # step() lets these through only to a device that has them
        "drop": lambda: cast(DropDeviceCaches, dev).drop_caches(),
        "reopen": lambda: cast(Reopenable, dev).reopen(),
    }
    try:
        if op.kind == "read":
            return Outcome(data=dev.read(op.offset, op.length))
        calls[op.kind]()
    except OSError as exc:
        return Outcome(error=exc.errno if exc.errno is not None else -1)
    return OK


class MTDFsx:
    """Apply operations to ``dev`` and check each against the oracle (or ``reference``)."""

    def __init__(self, dev: MTDDevice, *, folio: int | None = None,
                 reference: MTDDevice | None = None) -> None:
        self.dev = dev = answering(dev, MTD_RULES)
        self.reference = None if reference is None else answering(reference, MTD_RULES)
        self.layout = Layout.of(dev, folio)
        if reference is not None and (reference.size, reference.erasesize) != (
                dev.size, dev.erasesize):
            raise ValueError(f"the oracle {reference.name} has another geometry than "
                             f"{dev.name}")
        self.model = FlashOracle(dev.size, dev.erasesize, writeable=is_writeable(dev))
        self.log: list[Op] = []
        self.counts = dict.fromkeys(KINDS, 0)     # operations that succeeded, by kind
        self.bytes_written = 0
        # how the device answers erases of part of an eraseblock, once one showed it
        self.erase_rule: str | None = None
        self.erase_rule_op = 0
        self.mismatch: Mismatch | None = None       # the last wrong data found

    def _fail(self, op: Op, problem: str) -> MTDFsxFailure:
        number = len(self.log)
        return MTDFsxFailure(f"op {number} ({op}): {problem}", self.log, number,
                             self.mismatch)

    def step(self, op: Op) -> Outcome:
        """Apply ``op`` to the device (and the reference); raise on any difference."""
        if op.kind == "reopen" and not self.layout.can_reopen:
            raise ValueError(f"{self.dev.name} cannot be reopened (it has no reopen())")
        if op.kind == "drop" and not self.layout.can_drop:
            raise ValueError(f"{self.dev.name} cannot drop its caches (it has no "
                             "drop_caches())")
        self.log.append(op)
        data = b""
        if op.kind == "write":
            current = self.model.contents(op.offset, op.length)
            data = make_data(op, current.ljust(op.length, b"\xff"), self.layout.clear_only)
        got = self._apply(self.dev, op, data, "")
        if coverage.on():
            ranged = op.kind in ("read", "write", "erase")
            coverage.record(f"mtd {op.kind}", offset=op.offset if ranged else None,
                            length=op.length if ranged else None,
                            data=_FILL_CLASS.get(op.fill) if op.kind == "write" else None,
                            error=got.error)
        error = self.model.check(op.kind, op.offset, op.length)
        if op.kind == "erase" and error is None and self._unaligned(op):
            return self._unaligned_erase(op, got)
        if self.reference is not None:
            expected = (self._apply(self.reference, op, data, "the reference ")
                        if op.kind != "drop" or isinstance(self.reference, DropDeviceCaches)
                        else OK)
            sides = ("target", "reference")
        else:
            expected = (Outcome(error=error) if error is not None else
                        Outcome(data=self.model.contents(op.offset, op.length))
                        if op.kind == "read" else OK)
            sides = ("got", "expected")
        if got.error != expected.error and not self._either_refusal(got, expected):
            raise self._fail(op, f"{sides[0]} {got.describe()}, {sides[1]} "
                                 f"{expected.describe()}")
        if got.error is not None:
            self._check_untouched(op)
            return got
        self.counts[op.kind] += 1
        if op.kind == "read":
            self._compare(op, got.data or b"", expected.data or b"", sides)
        elif op.kind == "write":
            self.model.write(op.offset, data)
            self.bytes_written += len(data)
        elif op.kind == "erase":
            self.model.erase(op.offset, op.length)
        return got

    def _check_untouched(self, op: Op) -> None:
        """After ``op`` failed: the part of its range on the device still holds what it
        held (a write past the end that stores its first part before EINVAL is a bug)."""
        if op.kind not in ("write", "erase") or op.offset >= self.layout.size:
            return
        offset = max(0, op.offset)
        length = min(op.offset + op.length, self.layout.size) - offset
        if length <= 0:
            return
        try:
            got = bytes(self.dev.read(offset, length))
        except Exception as exc:
            raise self._fail(op, f"it failed, then reading back {length:#x} bytes at "
                                 f"{offset:#x} raised {type(exc).__name__}: {exc}") from exc
        problem = self.difference(offset, got, self.model.contents(offset, length))
        if problem:
            raise self._fail(op, f"it failed, but changed what it could touch: {problem}")

    def _apply(self, dev: MTDDevice, op: Op, data: bytes, who: str) -> Outcome:
        try:
            return apply(dev, op, data)
        except AnswerError as exc:
            raise self._fail(op, f"{who}{exc}") from None
        except Exception as exc:   # a device bug may raise anything; report it as one line
            raise self._fail(op, f"{who}raised {type(exc).__name__}: {exc}") from exc

    def _unaligned(self, op: Op) -> bool:
        esz = self.layout.erasesize
        return bool(op.length) and bool(op.offset % esz or op.length % esz)

    def _unaligned_erase(self, op: Op, got: Outcome) -> Outcome:
        """An in-range erase of part of an eraseblock: EINVAL, or exactly the pages asked
        erased; the device's first such erase fixes which (see the module docstring)."""
        rule = "refuses" if got.error == errno.EINVAL else "erases pages"
        if got.error not in (None, errno.EINVAL):
            raise self._fail(op, f"got {got.describe()} for an erase of part of an "
                                 "eraseblock, expected EINVAL or ok")
        if self.erase_rule not in (None, rule):
            raise self._fail(op, f"got {got.describe()} for an erase of part of an "
                                 f"eraseblock, but the device {self.erase_rule} for "
                                 f"op {self.erase_rule_op}")
        if self.erase_rule is None:
            self.erase_rule, self.erase_rule_op = rule, len(self.log)
        if got.error is not None:
            return got      # the reference (block2mtd erases pages) is not asked
        if self.reference is not None:
            expected = self._apply(self.reference, op, b"", "the reference ")
            if expected.error is not None:
                raise self._fail(op, f"target ok, reference {expected.describe()}")
        self.counts["erase"] += 1
        first = op.offset // PAGE_SIZE * PAGE_SIZE
        self.model.erase(first, op.length // PAGE_SIZE * PAGE_SIZE)
        return got

    def _either_refusal(self, got: Outcome, expected: Outcome) -> bool:
        """On a read-only device an out-of-range write or erase breaks two rules; which
        one a driver names first (the MTD core: EROFS for writes, EINVAL for erases)
        is not a bug."""
        return (self.reference is None and not self.model.flags
                and {got.error, expected.error} == {errno.EINVAL, errno.EROFS})

    def _compare(self, op: Op, got: bytes, expected: bytes, sides: tuple[str, str]) -> None:
        if len(got) != len(expected):
            raise self._fail(op, f"{sides[0]} {len(got)} bytes, {sides[1]} {len(expected)}")
        problem = self.difference(op.offset, got, expected, sides)
        if problem:
            raise self._fail(op, problem)

    def difference(self, offset: int, got: bytes, expected: bytes,
                   sides: tuple[str, str] = ("got", "expected")) -> str:
        """A one-line description of the first wrong byte in the known parts, or ''
        (and :attr:`mismatch` set to where it is)."""
        for start, stop in self.model.known_ranges(offset, len(got)):
            a, b = got[start - offset:stop - offset], expected[start - offset:stop - offset]
            if a != b:
                at = first_difference(a, b)
                bad = sum(1 for x, y in zip(a, b, strict=True) if x != y)
                lo = max(0, at // 16 * 16 - 32)
                self.mismatch = Mismatch(start + at, start + lo, a[lo:lo + 80], b[lo:lo + 80])
                return (f"wrong data at {start + at:#x} ({bad} of {stop - start} bytes from "
                        f"{start:#x} differ): {sides[0]} {a[at:at + 8].hex(' ')}, "
                        f"{sides[1]} {b[at:at + 8].hex(' ')}")
        return ""

    def check_all(self) -> None:
        """Compare the whole device with the oracle, an eraseblock run at a time."""
        chunk = max(self.layout.erasesize, 256 << 10) // self.layout.erasesize * (
            self.layout.erasesize)
        for offset in range(0, self.layout.size, chunk):
            length = min(chunk, self.layout.size - offset)
            try:
                got = self.dev.read(offset, length)
            except AnswerError as exc:
                raise MTDFsxFailure(f"final compare: {exc}", self.log, None) from None
            except Exception as exc:
                raise MTDFsxFailure(f"final compare: read {offset:#x} {length:#x} raised "
                                    f"{type(exc).__name__}: {exc}", self.log, None) from exc
            problem = self.difference(offset, got, self.model.contents(offset, length))
            if problem:
                raise MTDFsxFailure(f"final compare of {offset:#x} {length:#x}: {problem}",
                                    self.log, None, self.mismatch)

    def adopt(self) -> None:
        """Take the device's present contents as known (for a device nobody may erase)."""
        chunk = sweep_chunk(self.layout)
        for offset in range(0, self.layout.size, chunk):
            self.model.adopt(offset, self.dev.read(offset, min(
                chunk, self.layout.size - offset)))

    def run(self, ops: Iterable[Op]) -> None:
        for op in ops:
            self.step(op)
        self.check_all()
