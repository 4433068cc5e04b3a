"""``--folio-coverage``: which classes of input each call was given in this run.

The random runners (fsx, the differential, fsx for flash) call :func:`record` once per
call they make; it does nothing unless the option is on. Each call's input falls into a
class per dimension: its length (0, the bytes next to and at 4K, 64K, 1M and 2M, and
the spans between), its offset, its data (random, all zero, all 0xff, one repeated
byte, the same bytes as already there), its name's length (up to NAME_MAX and past it)
and its outcome (ok, or the errno). Counts are plain data: a worker hands those of
each test phase to its report, as the timing collector does, and the controller adds
them up and prints, at the end, per call, the classes seen and those of a dimension
the call has that were not.
"""

from __future__ import annotations

import errno
import textwrap
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pytest

REPORT_ATTR = "folio_coverage"
WIDTH = 80

_FAR = (1 << 32, 1 << 44)
_MAX = (1 << 63) - 1
_SCALES = ((4 << 10, "4K"), (64 << 10, "64K"), (1 << 20, "1M"), (2 << 20, "2M"))
_SPANS = ((4 << 10, "1..4K"), (64 << 10, "4K..64K"), (1 << 20, "64K..1M"),
          (2 << 20, "1M..2M"))
# each dimension's classes, in the order they print; a call's missing ones are listed
ORDER: dict[str, list[str]] = {
    "length": ["0", "1..4K", *[f"{label}{d}" for _, label in _SCALES for d in ("-1", "", "+1")],
               "4K..64K", "64K..1M", "1M..2M", ">2M"],
    "offset": ["0", "page-aligned", "unaligned", "4G..16T", ">=16T", "last 2M", "negative"],
    "data": ["random", "zero", "0xff", "one byte", "same as there"],
    "name": ["1", "2..199", "200..254", "255", ">255"],
}
_DIMENSIONS = (*ORDER, "outcome")

# None: not asked for. (call, dimension, class) -> how many calls
_counts: Counter[tuple[str, str, str]] | None = None


def on() -> bool:
    """Whether this run records (a runner may skip working out what it would pass)."""
    return _counts is not None


def length_class(n: int) -> str:
    if n <= 0:
        return "0"
    for size, label in _SCALES:
        if abs(n - size) <= 1:
            return label + {-1: "-1", 0: "", 1: "+1"}[n - size]
    return next((label for end, label in _SPANS if n < end), ">2M")


def offset_class(offset: int) -> str:
    if offset < 0:
        return "negative"
    if offset == 0:
        return "0"
    if offset >= _MAX - (2 << 20):
        return "last 2M"
    if offset >= _FAR[1]:
        return ">=16T"
    if offset >= _FAR[0]:
        return "4G..16T"
    return "unaligned" if offset % 4096 else "page-aligned"


def data_class(data: bytes) -> str:
    if not data or data.count(data[:1]) != len(data):
        return "random"
    return {0: "zero", 0xFF: "0xff"}.get(data[0], "one byte")


def name_class(path: str) -> str:
    n = len(path.rstrip("/").rsplit("/", 1)[-1])
    if n <= 1:
        return "1"
    return "2..199" if n < 200 else "200..254" if n < 255 else "255" if n == 255 else ">255"


def record(call: str, *, length: int | None = None, offset: int | None = None,
           data: str | None = None, name: str | None = None,
           error: int | str | None = None) -> None:
    """Count one call: ``data`` is its data's class (:func:`data_class`, or what the
    generator knows, ``same as there``), ``error`` its errno or errno name (None: ok)."""
    counts = _counts
    if counts is None:
        return
    counts[call, "calls", ""] += 1
    if length is not None:
        counts[call, "length", length_class(length)] += 1
    if offset is not None:
        counts[call, "offset", offset_class(offset)] += 1
    if data is not None:
        counts[call, "data", data] += 1
    if name is not None:
        counts[call, "name", name_class(name)] += 1
    if isinstance(error, int):
        error = errno.errorcode.get(error, str(error))
    counts[call, "outcome", error or "ok"] += 1


def summary(counts: Counter[tuple[str, str, str]], width: int = WIDTH) -> list[str]:
    """The lines printed at the end: per call, each dimension's classes seen, and of
    the length, offset, data and name classes those it was never given."""
    lines: list[str] = []
    for call in sorted({c for c, _, _ in counts}):
        lines.append(f"{call}: {counts[call, 'calls', '']} calls")
        for dimension in _DIMENSIONS:
            seen = {k: n for (c, d, k), n in counts.items() if c == call and d == dimension}
            if not seen:
                continue
            order = ORDER.get(dimension, sorted(seen))
            words = [f"{k} {seen[k]}" for k in order if k in seen]
            words += [f"{k} {n}" for k, n in sorted(seen.items()) if k not in order]
            lines += _wrapped(f"{dimension}:", words, width)
            missing = [k for k in ORDER.get(dimension, ()) if k not in seen]
            if missing:
                lines += _wrapped("  never:", missing, width)
    return lines


def _wrapped(title: str, words: Iterable[str], width: int) -> list[str]:
    """``words`` after ``title``, wrapped between words only (a class and its count,
    ``4K..64K 444``, stay on one line)."""
    text = ", ".join(word.replace(" ", "\0") for word in words)
    return [line.replace("\0", " ") for line in textwrap.wrap(
        text, width, initial_indent=f"  {title:<9} ", subsequent_indent=" " * 12,
        break_on_hyphens=False)]


class CoverageCollector:
    """Registered on every process when ``--folio-coverage`` is on: turns recording on,
    hands each test phase's counts to its report, and (the controller, or a serial run)
    adds them up and prints them at the end."""

    def __init__(self, config: pytest.Config) -> None:
        global _counts
        _counts = Counter()
        self.is_worker = hasattr(config, "workerinput")
        self.total: Counter[tuple[str, str, str]] = Counter()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Any:
        report = yield
        if _counts:
            setattr(report, REPORT_ATTR, [[*key, n] for key, n in _counts.items()])
            _counts.clear()
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        for call, dimension, kind, n in getattr(report, REPORT_ATTR, None) or ():
            self.total[str(call), str(dimension), str(kind)] += int(n)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        tr = terminalreporter
        tr.write_sep("-", "folio coverage: the classes of input each call was given")
        if not self.total:
            tr.write_line("no random suite ran: nothing recorded")
        for line in summary(self.total):
            tr.write_line(line)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        global _counts
        _counts = None
