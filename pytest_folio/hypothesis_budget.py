"""The run's Hypothesis budget: one policy for every state machine of the suites.

``--folio-hypothesis=off|quick|thorough`` (ini key ``folio_hypothesis``, default quick)
chooses, for fsx's machine and fsx for flash's alike, how many examples are tried, how
long each is, and how long a failure may be shrunk:

=========  ========================  ========================  ================
level      fsx (examples x steps)    flash (examples x steps)  shrinking budget
=========  ========================  ========================  ================
off        the Hypothesis tests skip, with the reason
quick      25 x 50                   25 x 25                   60 s of CPU a test
thorough   500 x 200                 300 x 100                 300 s of CPU a test
=========  ========================  ========================  ================

No level has a per-example deadline: a real file system's or device's latency is not a
bug, and a target that hangs is ``--folio-timeout``'s to stop. The examples are the run
seed's (the same ``--folio-seed`` tries the same sequences), and every failure is kept in
an example database under the run's cache directory, keyed by the test's id, so the next
run replays the known failure first, already shrunk, instead of searching and shrinking
again. The profiles ``fsx-quick``, ``fsx-thorough``, ``mtd-quick`` and ``mtd-thorough``
are these numbers, for callers that name a profile.

Hypothesis is imported only when a machine runs (it costs seconds of start-up in a VM).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hypothesis.database import ExampleDatabase

LEVELS = ("off", "quick", "thorough")
DEFAULT_LEVEL = "quick"
KINDS = ("fsx", "mtd")


@dataclasses.dataclass(frozen=True)
class Budget:
    """One level's numbers for one kind of machine."""

    examples: int
    steps: int
    shrink_seconds: int


BUDGETS: dict[tuple[str, str], Budget] = {
    ("fsx", "quick"): Budget(25, 50, 60),
    ("fsx", "thorough"): Budget(500, 200, 300),
    ("mtd", "quick"): Budget(25, 25, 60),
    ("mtd", "thorough"): Budget(300, 100, 300),
}


def profile_name(kind: str, level: str) -> str:
    """The registered Hypothesis profile of ``kind`` (fsx, mtd) at ``level``."""
    return f"{kind}-{level}"


def register_profiles() -> None:
    """Register the four profiles (the machine modules do, on import)."""
    from hypothesis import HealthCheck, settings

    health = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
    for (kind, level), budget in BUDGETS.items():
        settings.register_profile(
            profile_name(kind, level), max_examples=budget.examples,
            stateful_step_count=budget.steps, deadline=None, database=None,
            print_blob=False, report_multiple_bugs=False, suppress_health_check=health)


def parse_level(text: str) -> str:
    """``--folio-hypothesis``'s value; ValueError naming the levels otherwise."""
    level = text.strip().lower()
    if level not in LEVELS:
        raise ValueError(f"{text!r} is not one of {'|'.join(LEVELS)}")
    return level


def shrink_seconds_of(profile: str) -> int:
    """The shrinking budget of a profile by its name (Hypothesis's own five minutes for a
    profile of the user's own)."""
    kind, _, level = profile.partition("-")
    budget = BUDGETS.get((kind, level))
    return budget.shrink_seconds if budget is not None else 300


def _keyed(inner: ExampleDatabase, prefix: bytes) -> ExampleDatabase:
    """``inner`` with every key prefixed by the test's id: every machine of a kind has the
    same digest in Hypothesis's eyes, so without it one test would replay another's
    failures."""
    from hypothesis.database import ExampleDatabase

    class KeyedDatabase(ExampleDatabase):
        def save(self, key: bytes, value: bytes) -> None:
            inner.save(prefix + key, value)

        def fetch(self, key: bytes) -> Iterable[bytes]:
            return inner.fetch(prefix + key)

        def delete(self, key: bytes, value: bytes) -> None:
            inner.delete(prefix + key, value)

        def move(self, src: bytes, dest: bytes, value: bytes) -> None:
            inner.move(prefix + src, prefix + dest, value)

    return KeyedDatabase()


class _CPUClock:
    """The time module as Hypothesis's engine sees it during a run: ``perf_counter`` is
    this process's CPU time, so the shrinking budget is CPU seconds, the same on a loaded
    machine as on an idle one (a target that blocks is ``--folio-timeout``'s)."""

    perf_counter = staticmethod(time.process_time)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@contextlib.contextmanager
def _shrinking_budget(seconds: float, more: str) -> Iterator[list[str]]:
    """Hypothesis's shrinking deadline (its documented, monkeypatchable
    MAX_SHRINKING_SECONDS) set to ``seconds`` of CPU time for one run; its warning,
    which speaks of five minutes, is replaced by the note yielded (empty unless the
    budget ran out; ``more`` says how to shrink longer)."""
    from hypothesis import reporting
    from hypothesis.internal.conjecture import engine

    notes: list[str] = []
    outer = reporting.current_reporter()

    def reporter(value: object) -> None:
        if isinstance(value, str) and value.startswith("WARNING: Hypothesis has spent more"):
            notes.append(f"shrinking stopped after its budget of {seconds} s of CPU time "
                         f"(the log is shrunk as far as it got{more})")
        else:
            outer(value)

    saved = engine.MAX_SHRINKING_SECONDS, engine.time
    engine.MAX_SHRINKING_SECONDS, engine.time = seconds, _CPUClock()  # type: ignore[assignment]
    try:
        with reporting.with_reporter(reporter):
            yield notes
    finally:
        engine.MAX_SHRINKING_SECONDS, engine.time = saved


def run_machine(machine: type, profile: str, *, seed: int | None = None,
                database: Path | None = None, key: str = "", shrink: bool = True,
                shrink_seconds: float | None = None,
                on_note: Callable[[str], None] | None = None) -> None:
    """Run a state machine class under ``profile``, with the run's ``seed``, the example
    database directory ``database`` (keyed by ``key``, the test's id) and the profile's
    shrinking budget (``shrink_seconds`` instead, when given); ``shrink=False`` (or a
    budget of 0) reports the first failure found, unshrunk.
    ``on_note`` hears what the user should know about the run (the budget ran out)."""
    from hypothesis import Phase, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis.database import DirectoryBasedExampleDatabase
    from hypothesis.stateful import get_state_machine_test

    base = settings.get_profile(profile)
    overrides: dict[str, Any] = {}
    if database is not None:
        overrides["database"] = _keyed(DirectoryBasedExampleDatabase(database),
                                       key.encode() + b"\0")
    budget = shrink_seconds if shrink_seconds is not None else shrink_seconds_of(profile)
    if not shrink or budget <= 0:
        overrides["phases"] = [p for p in base.phases if p not in (Phase.shrink,
                                                                    Phase.explain)]
    chosen = settings(base, **overrides) if overrides else base
    if seed is not None:
        # on the class, as @seed on a machine: the database stays in use
        machine = hypothesis_seed(seed)(machine)
    test = get_state_machine_test(machine, settings=chosen)
    more = "; --folio-hypothesis=thorough shrinks longer" if profile.endswith("-quick") else ""
    with _shrinking_budget(budget, more) as notes:
        try:
            test()
        finally:
            for note in notes:
                if on_note is not None:
                    on_note(note)
