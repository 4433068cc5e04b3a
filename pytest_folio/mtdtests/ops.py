"""fsx for flash: random MTD operations, each checked against an oracle, with a log.

An :class:`MTDFsx` applies :class:`Op` s (read, write, erase, sync, reopen) to a device and
checks every answer against the :class:`~.oracle.FlashOracle`, or, in differential mode,
against a second device (the reference block2mtd) given the same operations: every errno,
every byte read. :func:`random_ops` makes the operations a run does: offsets on and next
to page, folio and eraseblock boundaries and at the last byte, unaligned lengths, data
that is random, all 0xFF, all 0x00, identical to what is there, or a mix of those page
by page, erases of one, a few, eight or more eraseblocks and of the whole device, sync
and reopen interleaved, and sweeps over the whole device that push any cache smaller
than it out several times. Every operation is logged; the log (``.mtdops``, one
operation a line, in the spirit of fsx's ``.fsxops``) replays the run exactly, since a
write's data is made from the log line and the oracle's contents.

A device that can be closed and opened again (dropping its caches, keeping its data)
says so with a ``reopen()`` method: the reference block2mtd and ``/dev/mtdN`` have one.
"""

from __future__ import annotations

import dataclasses
import errno
import random
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Protocol

from pytest_folio.constants import PAGE_SIZE
from pytest_folio.mtdtests.common import MTDTestError, first_difference, is_nand, is_writeable
from pytest_folio.mtdtests.oracle import OK, FlashOracle, Outcome
from pytest_folio.targets.protocols import MTD_RAM, MTDDevice, Reopenable

KINDS = ("read", "write", "erase", "sync", "reopen")
# how a write's data is made: random bytes, all 0xFF, all 0x00, what is there already,
# or page by page one of those (identical in one page, different in the next)
FILLS = ("rand", "ff", "00", "same", "pages")
_PAGE_FILLS = ("ff", "00", "same", "rand", "rand")

LOG_MAGIC = "# pytest-folio MTD operation log"


@dataclasses.dataclass(frozen=True)
class Op:
    """One operation; ``fill`` and ``seed`` say how a write's data is made."""

    kind: str
    offset: int = 0
    length: int = 0
    fill: str = ""
    seed: int = 0

    def __str__(self) -> str:
        if self.kind in ("sync", "reopen"):
            return self.kind
        text = f"{self.kind} {self.offset:#x} {self.length:#x}"
        if self.kind == "write":
            text += f" {self.fill}" + (f" {self.seed}" if self.fill in ("rand", "pages") else "")
        return text


class MTDOpsError(ValueError):
    """A ``.mtdops`` file that cannot be replayed; the message names the line."""


@dataclasses.dataclass(frozen=True)
class MTDLog:
    """A parsed operation log: the operations and the geometry it was recorded on."""

    ops: list[Op]
    size: int | None = None
    erasesize: int | None = None


_HEADER_RE = re.compile(r"^#\s*device:.*\bsize=(0x[0-9a-f]+|\d+)\s+erasesize=(0x[0-9a-f]+|\d+)")


class _Geometry(Protocol):
    name: str
    size: int
    erasesize: int
    writesize: int


def format_mtdops(ops: Iterable[Op], dev: _Geometry, comment: str = "") -> str:
    """The ``.mtdops`` text: a header naming the device's geometry, one operation a line."""
    lines = [f"{LOG_MAGIC} (replay it with --folio-mtd-replay FILE)",
             f"# device: {dev.name} size={dev.size:#x} erasesize={dev.erasesize:#x} "
             f"writesize={dev.writesize}"]
    if comment:
        lines.append(f"# {comment}")
    lines.extend(str(op) for op in ops)
    return "\n".join(lines) + "\n"


def parse_op(line: str) -> Op:
    words = line.split()
    kind = words[0] if words else ""
    if kind in ("sync", "reopen") and len(words) == 1:
        return Op(kind)
    if kind not in ("read", "write", "erase") or len(words) < 3:
        raise ValueError(f"not an operation: {line!r} (read|write|erase OFFSET LENGTH ..., "
                         "sync, reopen)")
    offset, length = int(words[1], 0), int(words[2], 0)
    if offset < 0 or length < 0:
        raise ValueError(f"negative offset or length: {line!r}")
    if kind != "write":
        if len(words) != 3:
            raise ValueError(f"{kind} takes OFFSET LENGTH: {line!r}")
        return Op(kind, offset, length)
    fill = words[3] if len(words) > 3 else ""
    if fill not in FILLS:
        raise ValueError(f"write data must be one of {'|'.join(FILLS)}: {line!r}")
    seeded = fill in ("rand", "pages")
    if len(words) != (5 if seeded else 4):
        raise ValueError(f"write ... {fill} takes {'a seed' if seeded else 'nothing'} "
                         f"after it: {line!r}")
    return Op(kind, offset, length, fill, int(words[4], 0) if seeded else 0)


def parse_mtdops(text: str) -> MTDLog:
    size = erasesize = None
    ops = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        match = _HEADER_RE.match(line)
        if match:
            size, erasesize = int(match.group(1), 0), int(match.group(2), 0)
        if not line or line.startswith("#"):
            continue
        try:
            ops.append(parse_op(line))
        except ValueError as exc:
            raise MTDOpsError(f"line {number}: {exc}") from None
    if not ops:
        raise MTDOpsError("no operations in the log")
    return MTDLog(ops, size, erasesize)


def read_mtdops(path: str | Path) -> MTDLog:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise MTDOpsError(f"cannot read {path}: {exc}") from None
    return parse_mtdops(text)


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


# -- the random operations --------------------------------------------------------------

class OpMaker:
    """Operations aimed at the places folio-cached flash drivers get wrong."""

    def __init__(self, layout: Layout, rng: random.Random) -> None:
        self.layout = layout
        self.rng = rng
        units = {PAGE_SIZE, layout.folio, layout.erasesize, layout.writesize}
        self.units = sorted(u for u in units if u <= layout.size)

    def point(self) -> int:
        """An offset on or next to a page, folio or eraseblock boundary, or near the end."""
        rng, size = self.rng, self.layout.size
        unit = rng.choice(self.units)
        if rng.random() < 0.2:
            base = size - unit * rng.randrange(1, 3)
        else:
            base = unit * rng.randrange(size // unit)
        delta = rng.choice((0, 0, 0, -1, 1, -rng.randrange(1, 600), rng.randrange(1, 600),
                            rng.randrange(unit)))
        return min(max(0, base + delta), size - 1)

    def length(self, offset: int) -> int:
        """An unaligned or boundary-sized length that fits from ``offset``."""
        rng, lay = self.rng, self.layout
        unit = rng.choice(self.units)
        pick = rng.randrange(6)
        if pick == 0:
            n = rng.randrange(1, 600)
        elif pick == 1:
            n = unit + rng.choice((-1, 0, 0, 1))
        elif pick == 2:
            n = unit * rng.randrange(2, 5) + rng.choice((-1, 0, 1))
        elif pick == 3:      # end on or next to the next boundary
            n = (offset // unit + rng.randrange(1, 3)) * unit + rng.choice((-1, 0, 0, 1)) - offset
        elif pick == 4:
            n = rng.randrange(1, 2 * max(lay.erasesize, lay.folio))
        else:
            n = lay.size - offset   # to the last byte
        cap = 4 * max(lay.erasesize, lay.folio)
        return max(1, min(n, lay.size - offset, cap))

    def rw(self, kind: str) -> Op:
        offset = self.point()
        length = self.length(offset)
        if kind == "read":
            return Op("read", offset, length)
        return self.write(offset, length)

    def write(self, offset: int, length: int, fill: str | None = None) -> Op:
        lay, rng = self.layout, self.rng
        if lay.writesize > 1:   # whole pages of the flash
            end = -(-(offset + length) // lay.writesize) * lay.writesize
            offset = offset // lay.writesize * lay.writesize
            length = min(end, lay.size) - offset
        fill = fill or rng.choice(("rand", "rand", "rand", "pages", "pages", "ff", "00",
                                   "same", "same"))
        return Op("write", offset, length, fill, rng.getrandbits(32))

    def erase(self) -> Op:
        rng, lay = self.rng, self.layout
        ebcnt = lay.ebcnt
        pick = rng.random()
        if pick < 0.015:
            return Op("erase", 0, lay.size)
        count = (1 if pick < 0.55 else rng.randrange(2, 5) if pick < 0.8
                 else rng.randrange(8, 17))
        count = min(count, ebcnt)
        choice = rng.random()
        block = (ebcnt - count if choice < 0.15 else 0 if choice < 0.2
                 else rng.randrange(ebcnt - count + 1))
        return Op("erase", block * lay.erasesize, count * lay.erasesize)

    def out_of_range(self) -> Op:
        """An operation that reaches past the end: EINVAL, and nothing may change."""
        rng, size = self.rng, self.layout.size
        kind = rng.choice(("read", "write", "erase"))
        if kind == "erase":
            start = rng.choice((size, size - self.layout.erasesize))
            return Op("erase", start, 2 * self.layout.erasesize)
        offset = size - rng.choice((0, 1, PAGE_SIZE, rng.randrange(1, 600)))
        length = size - offset + rng.choice((1, 1, PAGE_SIZE))
        return Op("read", offset, length) if kind == "read" else Op(
            "write", offset, length, "same")

    def random_op(self, zero_length: bool = True) -> Op:
        pick = self.rng.random()
        if pick < 0.30:
            return self.rw("read")
        if pick < 0.66:
            return self.rw("write")
        if pick < 0.80:
            return self.erase()
        if pick < 0.88:
            return Op("sync")
        if pick < 0.90 and self.layout.can_reopen:
            return Op("reopen")
        if pick < 0.95 or not zero_length:
            return self.out_of_range()
        offset = self.point()      # length 0: nothing read, nothing written
        return Op("read", offset, 0) if self.rng.getrandbits(1) else Op(
            "write", offset, 0, "rand", 0)


def sweep_chunk(layout: Layout, parts: int = 32) -> int:
    """The sweeps' step: a ``parts``-th of the device in whole eraseblocks."""
    return max(1, layout.size // parts // layout.erasesize) * layout.erasesize


def random_ops(layout: Layout, seed: int, count: int, passes: int = 4,
               erased: Callable[[int, int], bool] | None = None,
               zero_length: bool = True) -> Iterator[Op]:
    """A run: erase the whole device, then ``count`` random operations with ``passes``
    sweeps over the whole device spread among them (write, read back, erase and write
    page-mixed data, read back), each sweep syncing every few steps.

    ``erased(offset, length)`` tells a NAND run where pages may be programmed; writes
    elsewhere are preceded by an erase of their eraseblocks. ``zero_length=False``
    leaves out reads and writes of nothing (whose answer on a read-only device differs
    between the MTD core and mtdchar).
    """
    rng = random.Random(seed)
    make = OpMaker(layout, rng)
    chunk = sweep_chunk(layout)
    steps = -(-layout.size // chunk)
    sweep = [(p, offset) for p in range(passes) for offset in range(0, layout.size, chunk)]
    gap = max(1, count // max(1, len(sweep)))
    yield Op("erase", 0, layout.size)

    def programmable(op: Op) -> Iterator[Op]:
        if (layout.nand and op.kind == "write" and op.length
                and op.offset + op.length <= layout.size
                and not (erased and erased(op.offset, op.length))):
            esz = layout.erasesize
            first = op.offset // esz * esz
            yield Op("erase", first, -(-(op.offset + op.length) // esz) * esz - first)
        yield op

    done = 0
    for number in range(count):
        yield from programmable(make.random_op(zero_length))
        if number % gap == gap - 1 and done < len(sweep):
            pass_number, offset = sweep[done]
            length = min(chunk, layout.size - offset)
            kind = pass_number % 4
            if kind in (1, 3):
                yield Op("read", offset, length)
            else:
                if kind == 2 or layout.nand:
                    yield Op("erase", offset, length)
                yield from programmable(make.write(offset, length, "rand" if kind == 0
                                                   else "pages"))
            done += 1
            if done % 8 == 0 or done % steps == 0:
                yield Op("sync")
    for pass_number, offset in sweep[done:]:     # a short run still sweeps every pass
        length = min(chunk, layout.size - offset)
        if pass_number % 2:
            yield Op("read", offset, length)
        else:
            yield Op("erase", offset, length)
            yield make.write(offset, length, "pages")
