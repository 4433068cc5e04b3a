"""How the main job scales over pytest-xdist workers: serial, -n 1, -n 2 side by side.

Runs ``python -m pytest -p pytest_folio --pyargs pytest_folio.suites`` (or the pytest
arguments given after ``--``) serially and at each ``--workers`` count, interleaved
(each round runs every configuration once, in a rotated order, so a load that comes and
goes hits them alike), and prints the median wall time of each, its ratio to serial and
the CPU time its processes used (user + system of pytest and its workers: what -n adds
in start-up shows there). The load average is printed before and after each round: on a
machine shared with other jobs the wall-clock ratios are only as good as the load was
steady. ``--startup`` also times an empty selection (``-k`` matching nothing), which is
the cost of starting and collecting on every worker.

    python benchmarks/xdist_scaling.py [--rounds 3] [--workers 1,2] [--startup]
    python benchmarks/xdist_scaling.py --workers 2 -- --pyargs pytest_folio.suites.test_fsx

Exit status 1 when ``-n 2`` is less than ``--target`` (1.8) times faster than serial,
2 when a run fails.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]   # run as CI runs the main job, from here
MAIN_JOB = ["--pyargs", "pytest_folio.suites"]
NOTHING = "folio_xdist_scaling_selects_nothing"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_once(workers: int, args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one pytest run; exits 2 when it fails."""
    command = [sys.executable, "-m", "pytest", "-p", "pytest_folio", "-q",
               "-p", "no:cacheprovider", *args]
    if workers:
        command += ["-n", str(workers)]
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(command, env=env, cwd=CHECKOUT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    # exit 5: nothing collected, which is what the start-up run asks for
    if proc.returncode not in (0, 5):
        print(f"xdist scaling: {' '.join(command)} failed with status {proc.returncode}:\n"
              + proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
        sys.exit(2)
    return wall, _children_cpu() - cpu


def label(workers: int) -> str:
    return "serial" if workers == 0 else f"-n {workers}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (median shown)")
    parser.add_argument("--workers", default="1,2",
                        help="xdist worker counts to compare with serial (comma-separated)")
    parser.add_argument("--startup", action="store_true",
                        help="also time an empty selection: start-up and collection")
    parser.add_argument("--target", type=float, default=1.8,
                        help="the speed-up -n 2 must reach against serial")
    args = parser.parse_args(argv)
    try:
        counts = [int(w) for w in args.workers.split(",") if w.strip()]
    except ValueError:
        parser.error(f"--workers {args.workers!r}: comma-separated worker counts")
    if args.rounds < 1 or any(c < 1 for c in counts):
        parser.error("--rounds and --workers must be at least 1")
    pytest_args = extra or MAIN_JOB
    configs = [(w, False) for w in [0, *counts]]
    if args.startup:
        configs += [(w, True) for w in [0, *counts]]

    print(f"xdist scaling: pytest {' '.join(pytest_args)}; {args.rounds} round(s), "
          f"{os.cpu_count()} CPUs", flush=True)
    walls: dict[tuple[int, bool], list[float]] = {c: [] for c in configs}
    cpus: dict[tuple[int, bool], list[float]] = {c: [] for c in configs}
    for rnd in range(args.rounds):
        before = _load()
        order = configs[rnd % len(configs):] + configs[:rnd % len(configs)]
        for workers, empty in order:
            run_args = [*pytest_args, "-k", NOTHING] if empty else pytest_args
            wall, cpu = run_once(workers, run_args)
            walls[(workers, empty)].append(wall)
            cpus[(workers, empty)].append(cpu)
        print(f"round {rnd + 1}: load average {before} before, {_load()} after; "
              + ", ".join(f"{label(w)}{' empty' if e else ''} {walls[(w, e)][-1]:.1f} s"
                          for w, e in order), flush=True)

    print()
    print(f"{'run':<16} {'wall (median)':>14} {'min':>8} {'CPU':>8} {'vs serial':>10}")
    status = 0
    for empty in (False, True):
        if empty and not args.startup:
            break
        base = statistics.median(walls[(0, empty)])
        for workers in [0, *counts]:
            w = walls[(workers, empty)]
            median = statistics.median(w)
            ratio = base / median
            name = label(workers) + (" (empty)" if empty else "")
            print(f"{name:<16} {median:>12.1f} s {min(w):>6.1f} s "
                  f"{statistics.median(cpus[(workers, empty)]):>6.1f} s {ratio:>9.2f}x")
            if workers == 2 and not empty and ratio < args.target:
                status = 1
    if 2 in counts:
        verdict = "met" if status == 0 else "missed"
        print(f"-n 2 against serial: target {args.target}x {verdict} "
              f"(load average {_load()} at the end)")
    return status


if __name__ == "__main__":
    sys.exit(main())
