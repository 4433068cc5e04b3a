"""What the power-cut suites share (the MTD runs in :mod:`.mtdtests.powercut`, the file
runs in :mod:`.fsx.powercut`): a failing run shrunk to the fewest operations before its
cut that still fail, and the report that shows it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import TypeVar

from pytest_folio.shrink import ddmin

T = TypeVar("T")


def cut_report(what: str, summary: str, ops: Sequence[T],
               fails_with: Callable[[list[T]], str | None] | None, *,
               seconds: float = 10.0) -> str:
    """``summary`` and the run ``ops`` that ended in the failing cut (its last op), shrunk
    by delta debugging when ``fails_with`` can replay a run on a fresh target (it returns
    the run's failure, or None when the run passes)."""
    kept, again = list(ops), None
    if fails_with is not None and len(ops) > 1:
        cut = ops[-1]
        with suppress(Exception):    # a shrink that goes wrong keeps the whole run
            body = ddmin(ops[:-1], lambda c: fails_with([*c, cut]) is not None,
                         seconds=seconds, max_tries=400)
            again = fails_with([*body, cut])
            if again is not None:
                kept = [*body, cut]
    lines = [f"{what}: {summary}"]
    if len(kept) < len(ops):
        lines.append(f"{what}: the {len(ops)} operations up to that cut, shrunk to "
                     f"{len(kept)} that fail as well ({again}):")
    else:
        lines.append(f"{what}: the {len(ops)} operations up to that cut:")
    lines += [f"  {op}" for op in kept[:60]]
    if len(kept) > 60:
        lines.append(f"  ... {len(kept) - 60} more")
    return "\n".join(lines)
