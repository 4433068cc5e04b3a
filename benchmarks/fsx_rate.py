"""fsx operations per second against the reference ramfs and a tmpfs directory.

Runs the fsx engine at fsx's default sizes (256 KiB file, 64 KiB operations) against the
reference ramfs at each block size (default features, as kernel ramfs, and
``features=full``) and against a fresh directory on tmpfs, all in one run and
interleaved (each round runs every combination once; the median round is shown), and
prints operations per second, the share of operations skipped (unsupported or nothing to
do, which fsx counts as operations too) and the ratio to the targets: 30,000 ops/s on
tmpfs and 20,000 ops/s on the reference. Two rates are shown: by the wall clock, and by
this process's CPU time (user + system, so tmpfs's kernel work counts), which is what the
wall-clock rate would be with a core to itself; on a busy machine only the second one
says something about fsx, and the targets are judged on it. Every run is checked: a
failure is reported and the exit status is 2.

    python benchmarks/fsx_rate.py [--ops 10000] [--rounds 3] [--block-sizes 4k,16k,64k,2M]
                                  [--tmpfs /dev/shm] [--seed 1]
    python benchmarks/fsx_rate.py --ops 100000 --rounds 1     # the long correctness run

Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from pytest_folio.fsx import FsxEngine, FsxFailure, FsxOptions
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.sizes import format_size, parse_list, parse_size
from pytest_folio.targets.directory import directory_filesystem
from pytest_folio.targets.protocols import FileSystem

TARGET_TMPFS = 30_000
TARGET_REFERENCE = 20_000


@contextmanager
def _ramfs(blocksize: int, features: str) -> Iterator[FileSystem]:
    yield Ramfs(blocksize=blocksize, features=features)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=10000, help="operations per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (median shown)")
    parser.add_argument("--block-sizes", default="4k,16k,64k,2M",
                        help="reference ramfs block sizes")
    parser.add_argument("--tmpfs", default="/dev/shm", help="a tmpfs directory ('' skips)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        sizes = [parse_size(s) for s in parse_list(args.block_sizes)]
    except ValueError as exc:
        parser.error(str(exc))
    if args.tmpfs and not os.path.isdir(args.tmpfs):
        parser.error(f"--tmpfs {args.tmpfs} is not a directory")

    combos: list[tuple[str, int, Callable[[], AbstractContextManager[FileSystem]]]] = []
    for bs in sizes:
        for features in ("default", "full"):
            label = f"reference ramfs {format_size(bs)}" + (
                ", features=full" if features == "full" else "")
            combos.append((label, TARGET_REFERENCE, functools.partial(_ramfs, bs, features)))
    if args.tmpfs:
        combos.append((f"tmpfs directory {args.tmpfs}", TARGET_TMPFS,
                       functools.partial(directory_filesystem, args.tmpfs)))

    opts = FsxOptions(numops=args.ops, seed=args.seed)
    rates: dict[str, list[float]] = {label: [] for label, _, _ in combos}
    cpu_rates: dict[str, list[float]] = {label: [] for label, _, _ in combos}
    skipped: dict[str, float] = {}
    status = 0
    print(f"fsx rate: {args.ops} operations per run, 256 KiB file, 64 KiB operations, "
          f"{args.rounds} round(s), load average {os.getloadavg()[0]:.1f}", flush=True)
    for _ in range(args.rounds):
        for label, _, mount in combos:
            with mount() as fs:
                try:
                    result = FsxEngine(fs, opts).run()
                except FsxFailure as failure:
                    print(f"{label}: FAILED: {failure}", flush=True)
                    status = 2
                    continue
            rates[label].append(result.ops_per_second)
            cpu_rates[label].append(result.ops_per_cpu_second)
            skipped[label] = result.skipped / result.testcalls

    print(f"{'target':42} {'wall ops/s':>10} {'cpu ops/s':>10} {'skipped':>8} {'goal':>7} "
          f"{'ratio':>6}")
    for label, goal, _ in combos:
        if not rates[label]:
            continue
        rate, cpu_rate = statistics.median(rates[label]), statistics.median(cpu_rates[label])
        ratio = cpu_rate / goal
        if ratio < 1 and status == 0:
            status = 1
        print(f"{label:42} {rate:10,.0f} {cpu_rate:10,.0f} {skipped[label]:8.0%} "
              f"{goal:7,} {ratio:5.2f}x" + ("" if ratio >= 1 else "  (below target)"))
    print(f"load average at the end {os.getloadavg()[0]:.1f} (2-core machine figures "
          "drop when it is busy)")
    return status


if __name__ == "__main__":
    sys.exit(main())
