"""What an fsx run reports: its result, its failure, and fsx's report lines.

Pure functions from data to text, apart from the two types: the engine decides what
went wrong, these say it in fsx's words (``READ BAD DATA``, the ``OFFSET GOOD BAD
RANGE`` table, ``Size error``, ``Mapped ...: non-zero data past EOF``, ``LOG DUMP``), so
the formats live in one place and can be tested without a file system.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from pytest_folio.fsx.log import OP_NAMES, LogEntry, dump_line
from pytest_folio.linux.constants import PAGE_SIZE

LOGSIZE = 10000  # fsx dumps the last LOGSIZE operations; the .fsxops file gets them all
# the lines a failure's one-line summary prefers to the last line printed
_PROBLEMS = ("READ BAD DATA", "Size error", "Mapped ")


class FsxFailure(AssertionError):
    """fsx found a problem. ``str()`` is one line; :attr:`report` is fsx's full output."""

    def __init__(self, summary: str, *, status: int, badoff: int, report: str,
                 artifacts: dict[str, Path] | None = None) -> None:
        super().__init__(summary)
        self.summary = summary
        self.status = status            # fsx's exit status (110 bad data, 120 size, ...)
        self.badoff = badoff            # first bad offset, -1 when there is none
        self.report = report
        self.artifacts = artifacts or {}  # "fsxops", "fsxgood", "fsxlog" -> path

    @property
    def fsxops(self) -> Path | None:
        return self.artifacts.get("fsxops")


@dataclasses.dataclass
class FsxResult:
    """What a finished run did: operations done and skipped by reason, and its speed."""

    testcalls: int
    logcount: int
    done: Counter[str]
    skipped_unsupported: Counter[str]
    skipped_disabled: Counter[str]
    skipped_noop: Counter[str]
    converted: Counter[str]
    seconds: float        # wall-clock time of the operations
    cpu_seconds: float    # this process's CPU time (user + system) for them
    lines: list[str]

    @property
    def ops_per_second(self) -> float:
        return self.testcalls / self.seconds if self.seconds > 0 else float("inf")

    @property
    def ops_per_cpu_second(self) -> float:
        """The rate on a machine with a core to itself (a busy machine lowers the
        wall-clock rate, not this one)."""
        return self.testcalls / self.cpu_seconds if self.cpu_seconds > 0 else float("inf")

    @property
    def skipped(self) -> int:
        return sum((self.skipped_unsupported + self.skipped_disabled
                    + self.skipped_noop).values())


def short_at(buf: bytes | bytearray | memoryview, i: int) -> int:
    """fsx's short_at(): two bytes, big-endian, for the report columns."""
    return (buf[i] << 8) | (buf[i + 1] if i + 1 < len(buf) else 0)


def bad_bytes(buf: bytes | memoryview, good: bytes | bytearray, offset: int, *,
              reverse: bool = False) -> Iterator[int]:
    """Indexes into ``buf`` where it differs from ``good[offset:]``, in order (or in
    reverse), comparing page-sized slices first so a large read is cheap to scan."""
    size = len(buf)
    starts = range(0, size, PAGE_SIZE)
    for start in reversed(starts) if reverse else starts:
        end = min(start + PAGE_SIZE, size)
        if buf[start:end] == good[offset + start:offset + end]:
            continue
        span = range(start, end)
        for i in reversed(span) if reverse else span:
            if buf[i] != good[offset + i]:
                yield i


def bad_data_lines(buf: bytes | memoryview, good: bytes | bytearray, offset: int,
                   fname: str) -> list[str]:
    """fsx's report of a read that differs from the model: the ``READ BAD DATA`` line
    and the table of the first 16 bad offsets, each with the operation that may have
    written the bad byte (even bytes hold the operation number mod 256)."""
    size = len(buf)
    lines = [f"READ BAD DATA: offset = {offset:#x}, size = {size:#x}, fname = {fname}",
             # current fsx's layout: columns of 10, 6 and 6, two spaces apart
             f"{'OFFSET':<10}  {'GOOD':<6}  {'BAD':<6}  RANGE"]
    for n, i in enumerate(itertools.islice(bad_bytes(buf, good, offset), 16)):
        off = offset + i
        lines.append(f"{f'0x{off:x}':<10}  0x{short_at(good, off):04x}  "
                     f"0x{short_at(buf, i):04x}  0x{n:x}")
        j = i + 1 if off & 1 else i
        opnum = buf[j] if j < size else 0
        if opnum:
            lines.append(f"operation# (mod 256) for the bad data may be {opnum}")
        else:
            lines.append("operation# (mod 256) for the bad data unknown, check HOLE "
                         "and EXTEND ops")
    return lines


def size_error_line(expected: int, size: int) -> str:
    # Targets have no lseek, so fsx's "seek" column repeats what fstat said.
    return f"Size error: expected {expected:#x} stat {size:#x} seek {size:#x}"


def eofpage_line(what: str, file_size: int, past: bytes | memoryview, i: int) -> str:
    """A mapped page that shows data past EOF at ``past[i]`` (``past`` starts at EOF)."""
    return (f"Mapped {what}: non-zero data past EOF ({file_size - 1:#x}) page offset "
            f"{(file_size % PAGE_SIZE) + i:#x} is {short_at(past, i):#06x}")


def error_line(prefix: str, exc: OSError) -> str:
    """fsx's prterr(): the call that failed and strerror of its errno."""
    return f"{prefix}: {os.strerror(exc.errno) if exc.errno else exc}"


def logdump_lines(log: Sequence[LogEntry], badoff: int) -> Iterator[str]:
    """fsx's ``LOG DUMP`` of the last :data:`LOGSIZE` operations, the ones that touched
    ``badoff`` marked."""
    yield f"LOG DUMP ({len(log)} total operations):"
    for i in range(max(0, len(log) - LOGSIZE), len(log)):
        yield from dump_line(i + 1, log[i], badoff).split("\n")


def failure_summary(lines: Sequence[str], status: int, log: Sequence[LogEntry],
                    badoff: int, *, dumped: bool) -> str:
    """The one line a failure is shown as: what fsx complained about, which operation it
    was and the first bad offset."""
    problem = next((line for line in lines if line.startswith(_PROBLEMS)),
                   lines[-1] if lines else f"fsx failure {status}")
    where = f" (operation {len(log)}: {OP_NAMES[log[-1].op]})" if dumped and log else ""
    if badoff >= 0:
        where += f"; first bad offset {badoff:#x}"
    return problem + where


def summary_line(result: FsxResult, fs: object) -> str:
    """One line: what ran, and what was skipped and why."""

    def counts(counter: Counter[str]) -> str:
        return ", ".join(f"{name} {n}" for name, n in sorted(counter.items()))

    parts = [f"fsx: {result.testcalls} operations in {result.seconds:.2f} s "
             f"({result.ops_per_second:,.0f} ops/s, {result.ops_per_cpu_second:,.0f} per "
             f"CPU second), {result.skipped} skipped"]
    if result.skipped_unsupported:
        parts.append(f"unsupported by {type(fs).__name__}: "
                     f"{counts(result.skipped_unsupported)}")
    if result.converted:
        parts.append(f"done without mmap: {counts(result.converted)}")
    if result.skipped_disabled:
        parts.append(f"turned off: {counts(result.skipped_disabled)}")
    if result.skipped_noop:
        parts.append(f"nothing to do: {counts(result.skipped_noop)}")
    return "; ".join(parts)
