"""What the power-cut suites share (the MTD runs in :mod:`.mtdtests.powercut`, the file
runs in :mod:`.fsx.powercut`): a failing run shrunk to the fewest operations before its
cut that still fail, and the report that shows it; and, for ``vm --power-cut``, the
guest's side of the handshake (which boot this is, and the cut asked of the host) and
the shape both guest sides take (:class:`GuestSide`)."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pytest_folio.files import write_file
from pytest_folio.shrink import ddmin
from pytest_folio.vmabi import CUT_MARK, MARK, PHASES, POWERCUT_ENV

CUT_WAIT = 600.0     # how long a cut boot waits to be killed before it fails
NOT_IN_VM = ("the kernel power cut runs in the VM over two boots: "
             "python -m pytest_folio vm --power-cut")

T = TypeVar("T")
Targets = TypeVar("Targets", contravariant=True)


def cut_report(what: str, summary: str, ops: Sequence[T],
               fails_with: Callable[[list[T]], str | None] | None, *,
               seconds: float = 10.0) -> str:
    """``summary`` and the run ``ops`` that ended in the failing cut (its last op), shrunk
    by delta debugging when ``fails_with`` can replay a run on a fresh target (it returns
    the run's failure, or None when the run passes)."""
    kept, again = list(ops), None
    if fails_with is not None and len(ops) > 1 and seconds > 0:
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


def vm_phase() -> str | None:
    """``vm --power-cut``'s boot this guest is in ("cut" or "check"), None outside it."""
    phase = os.environ.get(POWERCUT_ENV, "")
    if os.environ.get("PYTEST_FOLIO_VM") != "1" or phase not in PHASES:
        return None
    return phase


def announce_cut(text: str, console: str = "/dev/console") -> None:
    """Tell the host to cut the power now (one MARK line on the console), then wait for
    it; raise when it never comes (the test was run outside ``vm --power-cut``)."""
    fd = os.open(console, os.O_WRONLY | os.O_NOCTTY)
    try:
        os.write(fd, f"\n{MARK} {CUT_MARK} {text}\n".encode())
    finally:
        os.close(fd)
    time.sleep(CUT_WAIT)
    raise AssertionError(f"the power was not cut within {CUT_WAIT:g} s of asking")


def write_cut_log(path: Path, log: dict[str, Any]) -> None:
    """The cut boot's log of what it did, on the disk before the host is asked to cut."""
    write_file(path, json.dumps(log, indent=1))


def read_cut_log(path: Path) -> dict[str, Any] | None:
    """The cut boot's log, None when it wrote none."""
    if not path.is_file():
        return None
    log: dict[str, Any] = json.loads(path.read_text())
    return log


@dataclasses.dataclass
class CheckResult:
    """What one device or file system held after a cut: the first state not allowed
    (None when every state is allowed) and what it read as, for the report."""

    problem: str | None
    summary: str


class GuestSide(Protocol[Targets]):
    """The guest's side of ``vm --power-cut`` for one kind of target, a module each
    (:mod:`pytest_folio.mtdtests.guest` over block2mtd devices, :mod:`pytest_folio.fsx.guest`
    over file systems), so the two boots read alike whichever is cut: the cut boot runs
    the operations on every target and logs them to the results share, the check boot
    replays the log of the target of one size label ("16K") and reads it back."""

    LOG_NAME: str     # the cut boot's log, on the results share

    def run_until_cut(self, targets: Targets, seed: int, out: Path, /) -> Sequence[object]:
        """Run the cut boot's operations on every target and write the log to ``out``;
        what is returned stays open until the power goes."""
        ...

    def check_after_cut(self, label: str, out: Path, /) -> CheckResult:
        """Replay the log of the ``label`` target and check what it reads back; raise
        when the cut boot left no log for it."""
        ...
