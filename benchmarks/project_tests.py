"""README command 2's figure: the project's own tests, timed as CI runs them.

Runs ``python -m pytest -n 2 -p no:cacheprovider`` (or the pytest arguments given after
``--``) once from this checkout and prints the wall time, the CPU time of pytest and its
workers, the load average before and after (a wall time taken at a high load says little),
the ten items that took the most CPU time (the item's process and the processes it
waited for, set-up and teardown included: the load moves it far less than the wall time)
with their wall time and their share of the total, and the costliest test modules. The
goal is at most 180 s at ``-n 2`` on a quiet 2-core machine; exit status 1 above
``--target``, 2 when a test failed.
The default run leaves the ``slow`` tests out (``-- -n 2 -m slow`` times those).

    python benchmarks/project_tests.py [--target 180] [--slowest 10] [--junit PATH]
                                       [-- PYTEST_ARGS...]
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
from collections.abc import Generator
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


_started: dict[str, float] = {}


# A plugin too (-p benchmarks.project_tests, from the checkout): each item's CPU time
# as the property "cpu" of its JUnit XML test case.
@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None]:
    _started[item.nodeid] = _cpu()
    yield


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None]:
    yield
    item.user_properties.append(("cpu", f"{_cpu() - _started.pop(item.nodeid):.2f}"))


def module_of(classname: str) -> str:
    """``tests.suites.test_x.TestY`` -> ``tests.suites.test_x``."""
    parts = classname.split(".")
    cut = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts))
    return ".".join(parts[:cut + 1])


def slowest(junit: Path, count: int) -> tuple[list[tuple[float, float, str]],
                                              list[tuple[float, str]], list[str]]:
    """The ``count`` test cases of a JUnit XML report that took the most CPU time (with
    their wall time), every module's CPU time, costliest first, and the cases that failed
    or errored (a failing run's figure needs their names beside it)."""
    cases, failed = [], []
    modules: dict[str, float] = {}
    for case in ET.parse(junit).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        cpu = sum(float(p.get("value", 0)) for p in case.iter("property")
                  if p.get("name") == "cpu")
        cases.append((cpu, float(case.get("time", 0)), name))
        module = module_of(case.get("classname", ""))
        modules[module] = modules.get(module, 0.0) + cpu
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(name)
    cases.sort(reverse=True)
    return cases[:count], sorted(((c, m) for m, c in modules.items()), reverse=True), failed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cut = args.index("--") if "--" in args else len(args)
    own, pytest_args = args[:cut], args[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=float, default=180.0, help="seconds (default 180)")
    parser.add_argument("--slowest", type=int, default=10)
    parser.add_argument("--junit", type=Path,
                        help="keep the JUnit XML report here (each case's CPU time: "
                             "property cpu)")
    opts = parser.parse_args(own)
    with tempfile.TemporaryDirectory(prefix="folio-project-tests-") as tmp:
        junit = (opts.junit or Path(tmp) / "junit.xml").resolve()
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "-p", "benchmarks.project_tests", f"--junitxml={junit}",
                   *(pytest_args or ["-n", "2"])]
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
        top, modules, failed = (slowest(junit, opts.slowest) if junit.exists()
                                else ([], [], []))
    total = sum(c for c, _ in modules)
    print(f"command: {' '.join(command[1:])}")
    print(f"wall {wall:.0f} s, CPU {cpu:.0f} s, load {load_before:.1f} -> "
          f"{os.getloadavg()[0]:.1f}; the items' CPU adds up to {total:.0f} s")
    print("     CPU     wall  share")
    for seconds, took, name in top:
        print(f"{seconds:6.1f} s {took:6.1f} s  {100 * seconds / max(total, 1e-9):4.1f}%  {name}")
    print("     CPU  share  the costliest modules")
    for seconds, module in modules[:opts.slowest]:
        print(f"{seconds:6.1f} s  {100 * seconds / max(total, 1e-9):4.1f}%  {module}")
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
