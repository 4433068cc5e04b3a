"""One guest against ``vm --guests 2``: the same selection's wall and CPU time side by side.

Runs ``python -m pytest_folio vm [VM options] -- PYTEST-ARGS`` in each configuration,
interleaved (each round runs every configuration once, in a rotated order, so a load
that comes and goes hits them alike), and prints the median wall time of each, its CPU
time (user and system of the runner and everything it waited for: the qemus, the
controller and its relays), both as ratios to the first configuration, and what each
run's pytest summary said (they must agree: the same items ran). For ``--guests`` runs
it also prints the session's own line (its wall time against its guests' busy times
added up). The load average is printed before and after each round: under TCG every
figure scales with it, so measure on a quiet machine.

    python benchmarks/vm_guests.py [--rounds 1] [--configs one,two-cpus1,two] \\
        [--vm "--mtd-size 8M"] [-- PYTEST-ARGS]

Configurations: ``one`` (one guest, the default ``--cpus``), ``one-cpus1`` (one guest,
``--cpus 1``), ``two-cpus1`` (``--guests 2 --cpus 1``), ``two`` (``--guests 2``, the
default ``--cpus`` each). The default selection is the MTD read suite and fsx at 300
operations. A first, untimed run of the first configuration fetches the kernel and
compiles the bytecode (``--no-warmup`` skips it). Exit status 2 when a run fails, 1 when
the configurations' pytest summaries differ (they did not run the same items).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import time

CONFIGS = {
    "one": [],
    "one-cpus1": ["--cpus", "1"],
    "two-cpus1": ["--guests", "2", "--cpus", "1"],
    "two": ["--guests", "2"],
}
DEFAULT_ARGS = ["-q", "-p", "no:randomly", "--folio-fsx-ops", "300", "--pyargs",
                "pytest_folio.suites.test_mtd_read", "pytest_folio.suites.test_fsx"]
SUMMARY = re.compile(r"^=* ?(\d+ (?:passed|failed|skipped|error|deselected).*?) in "
                     r"[\d.]+s", re.M)
SESSION = re.compile(r"^folio: session ([\d.]+) s, guests busy ([\d.]+) s in all", re.M)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_once(config: str, vm_args: list[str], pytest_args: list[str]
             ) -> tuple[float, float, str, str]:
    """(wall s, CPU s, pytest's summary, the session's line) of one ``vm`` run; exits 2
    when it fails."""
    command = [sys.executable, "-m", "pytest_folio", "vm", *vm_args, *CONFIGS[config],
               "--", *pytest_args]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        print(f"vm guests: {shlex.join(command)} failed with status {proc.returncode}:\n"
              + proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
        sys.exit(2)
    # a session whose workers are guests does not count what -k or -m deselected (its
    # controller collects nothing), one guest's pytest does: the rest must agree
    summaries = [", ".join(part for part in said.split(", ") if not part.endswith(" deselected"))
                 for said in SUMMARY.findall(proc.stdout)]
    session = SESSION.findall(proc.stdout)
    return (wall, _children_cpu() - cpu, summaries[-1] if summaries else "?",
            f"session {session[-1][0]} s, guests busy {session[-1][1]} s" if session
            else "")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    pytest_args = DEFAULT_ARGS
    if "--" in argv:
        cut = argv.index("--")
        argv, pytest_args = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1, help="rounds (median shown)")
    parser.add_argument("--configs", default="one,two-cpus1,two",
                        help=f"comma-separated, from {', '.join(CONFIGS)}; the first is "
                             "the ratios' base")
    parser.add_argument("--vm", default="--mtd-size 8M", metavar="OPTIONS",
                        help="vm options every configuration gets (one string)")
    parser.add_argument("--no-warmup", action="store_true",
                        help="no untimed first run (kernel fetch, bytecode)")
    args = parser.parse_args(argv)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs or args.rounds < 1:
        parser.error(f"--configs: {', '.join(unknown) or 'none'} (from {', '.join(CONFIGS)}); "
                     "--rounds at least 1")
    vm_args = shlex.split(args.vm)
    if not args.no_warmup:
        run_once(configs[0], vm_args, pytest_args)
    walls: dict[str, list[float]] = {c: [] for c in configs}
    cpus: dict[str, list[float]] = {c: [] for c in configs}
    said: dict[str, set[str]] = {c: set() for c in configs}
    sessions: dict[str, list[str]] = {c: [] for c in configs}
    for round_ in range(args.rounds):
        order = configs[round_ % len(configs):] + configs[:round_ % len(configs)]
        before = _load()
        for config in order:
            wall, cpu, summary, session = run_once(config, vm_args, pytest_args)
            walls[config].append(wall)
            cpus[config].append(cpu)
            said[config].add(summary)
            if session:
                sessions[config].append(session)
        print(f"round {round_ + 1}: load average {before} before, {_load()} after "
              f"({os.cpu_count()} CPUs)")
    base_wall = statistics.median(walls[configs[0]])
    base_cpu = statistics.median(cpus[configs[0]])
    print(f"{'configuration':12} {'wall s':>8} {'x ' + configs[0]:>9} {'CPU s':>8} "
          f"{'x ' + configs[0]:>9}  pytest said")
    for config in configs:
        wall, cpu = statistics.median(walls[config]), statistics.median(cpus[config])
        print(f"{config:12} {wall:8.1f} {wall / base_wall:9.2f} {cpu:8.1f} "
              f"{cpu / base_cpu:9.2f}  {' | '.join(sorted(said[config]))}")
    for config in configs:
        for session in sessions[config]:
            print(f"{config}: {session}")
    if len({frozenset(s) for s in said.values()}) > 1:
        print("vm guests: the configurations' pytest summaries differ: they did not run "
              "the same items", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
