"""What the differential test costs beside the target's own operations, by CPU time.

For each target, one sequence of N operations (the suite's generator at the given block
size) is run three ways in one process, interleaved over several rounds: on the target
alone and on the oracle alone (the Runner applying each operation, as the test does), and
through compare() (both, every outcome and size compared, the final snapshot). Printed:
the median CPU time of each and the ratios compare / target alone and compare / (target
alone + oracle alone), the latter being what the comparison itself adds. The goal,
compare / target alone at most 1.3x, holds only where the reference is much the cheaper
side (a kernel in a guest, a device); against tmpfs or a file system in Python the
reference costs about what the target does, so the comparison about twice the target
(docs/fs.md)::

    python benchmarks/fs_differential.py --ops 10000 --block-size 16K --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_folio.fsx.differential import MAXLEN, Runner, common, compare, generate
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.sizes import parse_size
from pytest_folio.targets.directory import directory_filesystem
from pytest_folio.targets.protocols import AnyFileSystem
from tests.helpers.fsx_cachedfs import CachedFS

GOAL = 1.3      # compare / target alone: where the reference is the cheaper side


def alone(fs: AnyFileSystem, ops: list[tuple]) -> None:  # type: ignore[type-arg]
    runner = Runner(fs)
    for op in ops:
        runner.apply(runner.resolve(op))
    runner.close_all()
    runner.snapshot()


def cpu(call: Callable[[], None]) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10000)
    parser.add_argument("--block-size", default="4K")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tmpfs", default="/dev/shm", help="a tmpfs directory target")
    args = parser.parse_args()
    bs = parse_size(args.block_size)

    @contextmanager
    def tmpfs() -> Iterator[AnyFileSystem]:
        with directory_filesystem(args.tmpfs) as fs:
            yield fs

    @contextmanager
    def cached() -> Iterator[AnyFileSystem]:
        yield CachedFS(bs)

    targets: dict[str, Callable[[], AbstractContextManager[AnyFileSystem]]] = {
        "CachedFS (Python)": cached, f"tmpfs ({args.tmpfs})": tmpfs}
    print(f"{args.ops} operations, block size {args.block_size}, seed {args.seed}, "
          f"median of {args.rounds} rounds, CPU seconds")
    for name, make in targets.items():
        times: dict[str, list[float]] = {"target": [], "oracle": [], "compare": []}
        for _ in range(args.rounds):
            with make() as probe:
                ops = generate(args.seed, common(probe, Ramfs(blocksize=bs, features="full")),
                               args.ops, maxlen=max(MAXLEN, 3 * bs), unit=bs)
            with make() as fs:
                times["target"].append(cpu(lambda fs=fs, ops=ops: alone(fs, ops)))
            times["oracle"].append(cpu(lambda ops=ops: alone(
                Ramfs(blocksize=bs, features="full"), ops)))
            with make() as fs:
                times["compare"].append(cpu(lambda fs=fs, ops=ops: compare(
                    fs, Ramfs(blocksize=bs, features="full"), ops)))
        t, o, c = (statistics.median(times[k]) for k in ("target", "oracle", "compare"))
        print(f"{name}: target alone {t:.2f}, oracle alone {o:.2f}, compare {c:.2f}; "
              f"compare/target {c / t:.2f}x (goal {GOAL}x{'' if c / t <= GOAL else ', above it'}),"
              f" compare/(target+oracle) {c / (t + o):.2f}x")


if __name__ == "__main__":
    main()
