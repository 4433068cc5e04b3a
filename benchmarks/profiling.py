"""``--profile`` for the benchmark scripts: what bounds a figure, by own time.

A script that misses a target says why with this: the functions that spend the most
time themselves (cProfile's ``tottime``), so a closing note can name the interpreter
work that remains rather than guess at it. Profiled passes are slower than timed ones
(cProfile adds a fixed cost per call); the ranking, not the figures, is what counts.
"""

from __future__ import annotations

import cProfile
import io
import pstats
from collections.abc import Callable


def print_profile(title: str, run: Callable[[], object], top: int = 12) -> None:
    """Run ``run()`` under cProfile and print its ``top`` functions by own time."""
    profiler = cProfile.Profile()
    profiler.runcall(run)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    lines = out.getvalue().splitlines()
    # keep the totals line and the table; drop pstats' preamble and blank lines
    total = next((line.strip() for line in lines if "function calls" in line), "")
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")),
                 len(lines))
    print(f"profile: {title}: {total}")
    for line in lines[start:]:
        if line.strip():
            print(f"  {line.rstrip()}")
