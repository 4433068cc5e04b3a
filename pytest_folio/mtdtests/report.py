"""What fsx for flash prints when a device fails: a short reproduction and where it went wrong.

:func:`shrink` cuts a failing run's log down with the project's delta debugging
(:func:`pytest_folio.shrink.ddmin`, bounded in time and tries) to the few operations that
still fail the same way on a fresh device. :func:`explain` says where the first wrong
byte is (its eraseblock, folio and page), shows both sides' bytes around it, and lists
the last operations with a ``*`` on those that wrote or erased that byte, as xfstests'
fsx marks the operations that touched the bad range.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.mtdtests.engine import Layout, MTDFsxFailure
from pytest_folio.mtdtests.log import Op
from pytest_folio.shrink import ddmin

SHRINK_SECONDS = 20.0     # the search's budget: a failure is printed within it
SHRINK_TRIES = 400
LAST_OPS = 12             # operations listed before the failure


def kind_of(failure: MTDFsxFailure) -> str:
    """What went wrong, without the numbers (a shrunk run must fail the same way)."""
    summary = failure.summary          # "op N (OP): PROBLEM" or "final compare ...: PROBLEM"
    problem = summary.split("): " if summary.startswith("op ") else ": ", 1)[-1]
    return re.sub(r"0x[0-9a-f]+|\d+", "#", problem).split("(")[0].strip()


def shrink(failure: MTDFsxFailure, rerun: Callable[[list[Op]], MTDFsxFailure | None], *,
           seconds: float = SHRINK_SECONDS, max_tries: int = SHRINK_TRIES
           ) -> MTDFsxFailure:
    """The failure of the shortest run ddmin finds that fails as ``failure`` did;
    ``rerun(ops)`` runs ops on fresh devices and returns how they failed (or None)."""
    ops = failure.ops if failure.op_number is None else failure.ops[:failure.op_number]
    kind = kind_of(failure)
    last: dict[int, MTDFsxFailure] = {}

    def fails(candidate: list[Op]) -> bool:
        found = rerun(candidate)
        if found is None or kind_of(found) != kind:
            return False
        last[len(candidate)] = found
        return True

    small = ddmin(ops, fails, seconds=seconds, max_tries=max_tries)
    return last.get(len(small), failure) if len(small) < len(ops) else failure


def _touches(op: Op, at: int) -> bool:
    """Whether ``op`` wrote or erased the byte at ``at`` (a page-granular erase of part
    of an eraseblock counts by its pages)."""
    if op.kind == "write":
        return op.offset <= at < op.offset + op.length
    if op.kind == "erase":
        first = op.offset // PAGE_SIZE * PAGE_SIZE
        return (op.offset <= at < op.offset + op.length
                or first <= at < first + op.length // PAGE_SIZE * PAGE_SIZE)
    return False


def _where(at: int, layout: Layout) -> str:
    parts = [(name, unit) for name, unit in (("eraseblock", layout.erasesize),
                                             ("folio", layout.folio), ("page", PAGE_SIZE))]
    return ", ".join(f"{name} {at // unit} (+{at % unit:#x})" for name, unit in parts)


def explain(failure: MTDFsxFailure, layout: Layout) -> list[str]:
    """Lines locating the first wrong byte and listing the operations before it."""
    lines = []
    m = failure.mismatch
    if m is not None:
        lines.append(f"first wrong byte at {m.at:#x}: {_where(m.at, layout)}")
        for row in range(0, len(m.got), 16):
            mark = " <" if m.start + row <= m.at < m.start + row + 16 else ""
            lines.append(f"  {m.start + row:#010x}  expected {m.expected[row:row + 16].hex(' ')}")
            lines.append(f"  {'':10}  got      {m.got[row:row + 16].hex(' ')}{mark}")
    end = len(failure.ops) if failure.op_number is None else failure.op_number
    first = max(0, end - LAST_OPS)
    marked = f" (* wrote or erased {m.at:#x})" if m is not None else ""
    lines.append(f"operations {first + 1}-{end} of {len(failure.ops)}{marked}:")
    for number in range(first, end):
        op = failure.ops[number]
        star = "*" if m is not None and _touches(op, m.at) else " "
        lines.append(f"{star} {number + 1:5}  {op}")
    return lines
