"""Delta debugging: the shortest failing sequence a bounded search finds.

Every shrinker in the project (the differential tests', fsx's and fsx for flash's logs,
``python -m pytest_folio shrink``) uses this one function, so a failure is printed as a
handful of operations however it was found. It is Zeller's ddmin: try dropping chunks of
the sequence, halving the chunk size while nothing can be dropped, then single items.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def ddmin(items: Sequence[T], fails: Callable[[list[T]], bool], *,
          seconds: float | None = None, max_tries: int | None = None,
          progress: Callable[[list[T]], object] | None = None) -> list[T]:
    """A subsequence of ``items`` for which ``fails`` is still true, 1-minimal when the
    budget allows (no single item can be dropped). ``fails(list(items))`` is assumed true
    and not called. The search stops early, keeping what it has, after ``seconds`` or
    ``max_tries`` calls of ``fails``. ``progress`` is told each shorter failing sequence
    found, so a caller interrupted inside ``fails`` still has the shortest so far."""
    current = list(items)
    deadline = None if seconds is None else time.monotonic() + seconds
    tries = 0

    def out_of_budget() -> bool:
        return ((deadline is not None and time.monotonic() > deadline)
                or (max_tries is not None and tries >= max_tries))

    chunks = 2
    while len(current) >= 2 and not out_of_budget():
        size = -(-len(current) // chunks)
        for start in range(0, len(current), size):
            candidate = current[:start] + current[start + size:]
            tries += 1
            if candidate and fails(candidate):
                current = candidate
                if progress is not None:
                    progress(current)
                chunks = max(chunks - 1, 2)
                break
            if out_of_budget():
                return current
        else:
            if size == 1:
                break
            chunks = min(chunks * 2, len(current))
    return current
