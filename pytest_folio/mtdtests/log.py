"""The ``.mtdops`` operation log of fsx for flash: one :class:`Op` a line, in the spirit of
fsx's ``.fsxops``, under a header naming the device's geometry. A write's data is made
from its line and the oracle's contents, so a log replays a run exactly
(``--folio-mtd-replay FILE``).
"""

from __future__ import annotations

import dataclasses
import re
from array import array
from collections.abc import Iterable
from typing import Any, Protocol

from pytest_folio.inputs import excerpt

KINDS = ("read", "write", "erase", "sync", "reopen", "drop")   # drop: drop_caches()
# how a write's data is made: random bytes, all 0xFF, all 0x00, what is there already,
# or page by page one of those (identical in one page, different in the next)
FILLS = ("rand", "ff", "00", "same", "pages")

LOG_MAGIC = "# pytest-folio MTD operation log"
_BARE = ("sync", "reopen", "drop")       # operations without a range
_NUMBER_LIMIT = 1 << 64                  # a log's numbers: what to_data() packs
# A write's data is built in memory before the device is asked, so every length is bounded
# when the log is read: by the device the header names (an operation reaches at most an
# eraseblock past its end, as the generators' past-the-end probes do), else by this.
MAX_OP_LENGTH = 64 << 20


@dataclasses.dataclass(frozen=True)
class Op:
    """One operation; ``fill`` and ``seed`` say how a write's data is made."""

    kind: str
    offset: int = 0
    length: int = 0
    fill: str = ""
    seed: int = 0

    def __str__(self) -> str:
        if self.kind in _BARE or self.kind == "cut":     # cut: in a power-cut run
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

    def to_data(self) -> list[Any]:
        """Primitive data (what xdist hands a worker), packed: the log without parsing
        it again (execnet unpacks a list of 500,000 tuples slower than we parse text)."""
        ops = self.ops
        numbers = array("Q", [n for op in ops for n in (op.offset, op.length, op.seed)])
        return [self.size, self.erasesize, bytes(_KIND_CODE[op.kind] for op in ops),
                bytes(_FILL_CODE[op.fill] for op in ops), numbers.tobytes()]

    @classmethod
    def from_data(cls, data: list[Any]) -> MTDLog:
        size, erasesize, kinds, fills, packed = data
        numbers = array("Q")
        numbers.frombytes(packed)
        ops = [Op(_KINDS_AND_CUT[kind], numbers[3 * i], numbers[3 * i + 1],
                  _FILLS_AND_NONE[fill], numbers[3 * i + 2])
               for i, (kind, fill) in enumerate(zip(kinds, fills, strict=True))]
        return cls(ops,
                   size, erasesize)


_KINDS_AND_CUT = (*KINDS, "cut")
_FILLS_AND_NONE = ("", *FILLS)
_KIND_CODE = {kind: code for code, kind in enumerate(_KINDS_AND_CUT)}
_FILL_CODE = {fill: code for code, fill in enumerate(_FILLS_AND_NONE)}
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


def _number(word: str) -> int:
    """A number as Python writes one (``0x1f``, ``0o17``, ``15``); ValueError quoting at
    most an excerpt of the word."""
    if len(word) > 100:     # 2**64 in any base (0b..., 1_000) fits; longer is no number
        raise ValueError(f"not a 64-bit number: {excerpt(word)}")
    try:
        return int(word, 0)
    except ValueError:
        raise ValueError(f"not a number: {excerpt(word)}") from None


def parse_op(line: str) -> Op:
    words = line.split()
    kind = words[0] if words else ""
    if kind in _BARE and len(words) == 1:
        return Op(kind)
    if kind not in ("read", "write", "erase") or len(words) < 3:
        raise ValueError(f"not an operation: {excerpt(line)} (read|write|erase OFFSET "
                         "LENGTH ..., sync, reopen, drop)")
    offset, length = _number(words[1]), _number(words[2])
    if offset < 0 or length < 0:
        raise ValueError(f"negative offset or length: {excerpt(line)}")
    if max(offset, length) >= _NUMBER_LIMIT:
        raise ValueError(f"offset or length past 64 bits: {excerpt(line)}")
    if kind != "write":
        if len(words) != 3:
            raise ValueError(f"{kind} takes OFFSET LENGTH: {excerpt(line)}")
        return Op(kind, offset, length)
    fill = words[3] if len(words) > 3 else ""
    if fill not in FILLS:
        raise ValueError(f"write data must be one of {'|'.join(FILLS)}: {excerpt(line)}")
    seeded = fill in ("rand", "pages")
    if len(words) != (5 if seeded else 4):
        raise ValueError(f"write ... {fill} takes {'a seed' if seeded else 'nothing'} "
                         f"after it: {excerpt(line)}")
    seed = _number(words[4]) if seeded else 0
    if not 0 <= seed < _NUMBER_LIMIT:
        raise ValueError(f"the seed must be from 0 to 2**64-1: {excerpt(line)}")
    return Op(kind, offset, length, fill, seed)


def max_length(size: int | None, erasesize: int | None) -> int:
    """The longest operation a log of that geometry may hold (see :data:`MAX_OP_LENGTH`)."""
    if size is None or erasesize is None:
        return MAX_OP_LENGTH
    return size + erasesize


def parse_mtdops(text: str) -> MTDLog:
    """Read a ``.mtdops`` log; MTDOpsError naming the line on bad input, also a length
    past :func:`max_length` (checked before any data is made)."""
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
            op = parse_op(line)
        except ValueError as exc:
            raise MTDOpsError(f"line {number}: {exc}") from None
        limit = max_length(size, erasesize)
        if op.length > limit:
            where = ("an eraseblock past the end of the header's device" if size is not None
                     else f"{limit >> 20} MiB in a log without a '# device: ... size=... "
                     "erasesize=...' header")
            raise MTDOpsError(f"line {number}: {op.kind} of {op.length:#x} bytes: longer "
                              f"than {where}")
        ops.append(op)
    if not ops:
        raise MTDOpsError("no operations in the log")
    return MTDLog(ops, size, erasesize)
