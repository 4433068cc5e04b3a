"""README command 2's figure: the project's own tests, timed as CI runs them.

Runs ``python -m pytest -n 2 -p no:cacheprovider`` (or the pytest arguments given after
``--``) once from this checkout and prints the wall time, the CPU time of pytest and its
workers, the load average before and after (a wall time taken at a high load says little),
the ten slowest items and the share of the total they take. The goal is at most 180 s at
``-n 2`` on a quiet 2-core machine; exit status 1 above ``--target``, 2 when a test failed.
The default run leaves the ``slow`` tests out (``-- -n 2 -m slow`` times those).

    python benchmarks/project_tests.py [--target 180] [--slowest 10] [-- PYTEST_ARGS...]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]


def slowest(junit: Path, count: int) -> tuple[list[tuple[float, str]], float, list[str]]:
    """The ``count`` slowest test cases of a JUnit XML report, the sum of all, and the
    cases that failed or errored (a failing run's figure needs their names beside it)."""
    cases, failed = [], []
    for case in ET.parse(junit).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        cases.append((float(case.get("time", 0)), name))
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(name)
    cases.sort(reverse=True)
    return cases[:count], sum(t for t, _ in cases), failed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cut = args.index("--") if "--" in args else len(args)
    own, pytest_args = args[:cut], args[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=float, default=180.0, help="seconds (default 180)")
    parser.add_argument("--slowest", type=int, default=10)
    opts = parser.parse_args(own)
    with tempfile.TemporaryDirectory(prefix="folio-project-tests-") as tmp:
        junit = Path(tmp) / "junit.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   f"--junitxml={junit}", *(pytest_args or ["-n", "2"])]
        load_before = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        # byte-code caches on, as in CI: every process (workers, inner pytests) would
        # otherwise compile and assertion-rewrite the tests again (3.5 s -> 8.6 s CPU each)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        status = subprocess.run(command, cwd=CHECKOUT, env=env, stdout=subprocess.DEVNULL,
                                check=False).returncode
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        top, total, failed = (slowest(junit, opts.slowest) if junit.exists()
                              else ([], 0.0, []))
    print(f"command: {' '.join(command[1:])}")
    print(f"wall {wall:.0f} s, CPU {cpu:.0f} s, load {load_before:.1f} -> "
          f"{os.getloadavg()[0]:.1f}; items add up to {total:.0f} s")
    for seconds, name in top:
        print(f"{seconds:8.1f} s  {100 * seconds / max(total, 1e-9):4.1f}%  {name}")
    if status not in (0, 5):
        print(f"pytest exited with {status}", *(f"failed: {name}" for name in failed),
              sep="\n")
        return 2
    if status == 5:
        print("no tests ran")
        return 2
    verdict = "within" if wall <= opts.target else "above"
    print(f"{verdict} the {opts.target:.0f} s target ({wall / opts.target:.2f}x)")
    return 0 if wall <= opts.target else 1


if __name__ == "__main__":
    sys.exit(main())
