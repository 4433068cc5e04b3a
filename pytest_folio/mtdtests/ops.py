"""fsx for flash: random MTD operations, each checked against an oracle, with a log.

An :class:`MTDFsx` applies :class:`~.mtdops.Op` s (read, write, erase, sync, reopen) to a
device and checks every answer against the :class:`~.oracle.FlashOracle`, or, in
differential mode, against a second device (the reference block2mtd) given the same
operations: every errno, every byte read. :func:`~.opgen.random_ops` makes the operations
of a run; every operation is logged, and the log (:mod:`.mtdops`) replays the run exactly.

A device that can be closed and opened again (dropping its caches, keeping its data)
says so with a ``reopen()`` method (:class:`~pytest_folio.targets.protocols.Reopenable`):
the reference block2mtd and ``/dev/mtdN`` have one.
"""

from __future__ import annotations

import dataclasses
import errno
import random
from collections.abc import Iterable

from pytest_folio.constants import PAGE_SIZE
from pytest_folio.mtdtests.common import MTDTestError, first_difference, is_nand, is_writeable
from pytest_folio.mtdtests.mtdops import KINDS, Op
from pytest_folio.mtdtests.oracle import OK, FlashOracle, Outcome
from pytest_folio.targets.protocols import MTD_RAM, MTDDevice, Reopenable

_PAGE_FILLS = ("ff", "00", "same", "rand", "rand")

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

    def __init__(self, summary: str, ops: list[Op], op_number: int | None) -> None:
        super().__init__(summary)
        self.summary = summary
        self.ops = list(ops)
        self.op_number = op_number


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

    @classmethod
    def of(cls, dev: MTDDevice, folio: int | None) -> Layout:
        return cls(size=dev.size, erasesize=dev.erasesize, writesize=max(1, dev.writesize),
                   folio=folio or 4 * PAGE_SIZE, nand=is_nand(dev),
                   clear_only=dev.type != MTD_RAM,
                   can_reopen=isinstance(dev, Reopenable))

    @property
    def ebcnt(self) -> int:
        return self.size // self.erasesize


def sweep_chunk(layout: Layout, parts: int = 32) -> int:
    """The sweeps' step: a ``parts``-th of the device in whole eraseblocks."""
    return max(1, layout.size // parts // layout.erasesize) * layout.erasesize


def apply(dev: MTDDevice, op: Op, data: bytes) -> Outcome:
    """Do ``op`` on ``dev``: what it returned, or the errno it failed with."""
    try:
        if op.kind == "read":
            return Outcome(data=bytes(dev.read(op.offset, op.length)))
        if op.kind == "write":
            dev.write(op.offset, data)
        elif op.kind == "erase":
            dev.erase(op.offset, op.length)
        elif op.kind == "sync":
            dev.sync()
        else:   # step() lets a reopen through only to a device that has one
            assert isinstance(dev, Reopenable)
            dev.reopen()
    except OSError as exc:
        return Outcome(error=exc.errno if exc.errno is not None else -1)
    return OK


class MTDFsx:
    """Apply operations to ``dev`` and check each against the oracle (or ``reference``)."""

    def __init__(self, dev: MTDDevice, *, folio: int | None = None,
                 reference: MTDDevice | None = None) -> None:
        self.dev = dev
        self.reference = reference
        self.layout = Layout.of(dev, folio)
        if reference is not None and (reference.size, reference.erasesize) != (
                dev.size, dev.erasesize):
            raise ValueError(f"the oracle {reference.name} has another geometry than "
                             f"{dev.name}")
        self.model = FlashOracle(dev.size, dev.erasesize, writeable=is_writeable(dev))
        self.log: list[Op] = []
        self.counts = dict.fromkeys(KINDS, 0)     # operations that succeeded, by kind
        self.bytes_written = 0

    def _fail(self, op: Op, problem: str) -> MTDFsxFailure:
        number = len(self.log)
        return MTDFsxFailure(f"op {number} ({op}): {problem}", self.log, number)

    def step(self, op: Op) -> Outcome:
        """Apply ``op`` to the device (and the reference); raise on any difference."""
        if op.kind == "reopen" and not self.layout.can_reopen:
            raise ValueError(f"{self.dev.name} cannot be reopened (it has no reopen())")
        self.log.append(op)
        data = b""
        if op.kind == "write":
            current = self.model.contents(op.offset, op.length)
            data = make_data(op, current.ljust(op.length, b"\xff"), self.layout.clear_only)
        try:
            got = apply(self.dev, op, data)
        except Exception as exc:   # a device bug may raise anything; report it as one line
            raise self._fail(op, f"raised {type(exc).__name__}: {exc}") from exc
        if self.reference is not None:
            expected = apply(self.reference, op, data)
            sides = ("target", "reference")
        else:
            error = self.model.check(op.kind, op.offset, op.length)
            expected = (Outcome(error=error) if error is not None else
                        Outcome(data=self.model.contents(op.offset, op.length))
                        if op.kind == "read" else OK)
            sides = ("got", "expected")
        if got.error != expected.error and not self._either_refusal(got, expected):
            raise self._fail(op, f"{sides[0]} {got.describe()}, {sides[1]} "
                                 f"{expected.describe()}")
        if got.error is not None:
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
        """A one-line description of the first wrong byte in the known parts, or ''."""
        for start, stop in self.model.known_ranges(offset, len(got)):
            a, b = got[start - offset:stop - offset], expected[start - offset:stop - offset]
            if a != b:
                at = first_difference(a, b)
                bad = sum(1 for x, y in zip(a, b, strict=True) if x != y)
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
                got = bytes(self.dev.read(offset, length))
            except Exception as exc:
                raise MTDFsxFailure(f"final compare: read {offset:#x} {length:#x} raised "
                                    f"{type(exc).__name__}: {exc}", self.log, None) from exc
            problem = (f"returned {len(got)} bytes of {length}" if len(got) != length else
                       self.difference(offset, got, self.model.contents(offset, length)))
            if problem:
                raise MTDFsxFailure(f"final compare of {offset:#x} {length:#x}: {problem}",
                                    self.log, None)

    def adopt(self) -> None:
        """Take the device's present contents as known (for a device nobody may erase)."""
        chunk = sweep_chunk(self.layout)
        for offset in range(0, self.layout.size, chunk):
            self.model.adopt(offset, bytes(self.dev.read(offset, min(
                chunk, self.layout.size - offset))))

    def run(self, ops: Iterable[Op]) -> None:
        for op in ops:
            self.step(op)
        self.check_all()
