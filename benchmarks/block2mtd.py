"""Side-by-side timing of block2mtd's page and folio paths (not a test: run it).

    python benchmarks/block2mtd.py [--size 256M] [--passes 3] [--orders 0,2,4] [--clock cpu]
    python benchmarks/block2mtd.py --opcodes [--orders 0,2,4]
    python benchmarks/block2mtd.py --profile [--size 64M] [--orders 0,4]

It builds one device per path and folio size, warms the page caches with a write pass,
then alternates timed passes of every path and size over the whole device (eraseblock
write, eraseblock read, erase of blocks holding data, erase of erased blocks), so a busy
machine slows them alike, and prints the best pass of each in ms with the folio/page
change, as the seed's table does, and how much the page path's pass varies with the
folio size (the kernel's does not).

``--opcodes`` prints instead what one eraseblock costs in Python bytecodes and calls
(counted with ``sys.settrace``), the cost shape without the clock: the same on any
machine at any load, where the timed figures want a quiet one.

``--profile`` runs one pass of every row, path and size under cProfile instead and
prints the functions that take the most time themselves: what bounds a row.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from profiling import print_profile

from pytest_folio.model.block2mtd import Block2MTD, make_reference_block2mtd
from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.sizes import format_kib, format_size, parse_list, parse_size


def passes(dev: Block2MTD, pattern: bytes) -> dict[str, Callable[[], None]]:
    ebs = dev.erasesize
    blocks = range(0, dev.size, ebs)

    def write() -> None:
        for ofs in blocks:
            dev.write(ofs, pattern)

    def read() -> None:
        for ofs in blocks:
            dev.read(ofs, ebs)

    def erase() -> None:
        for ofs in blocks:
            dev.erase(ofs, ebs)

    return {f"Eraseblock write ({format_kib(ebs)})": write,
            f"Eraseblock read ({format_kib(ebs)})": read,
            "Erase, blocks hold data": erase,
            "Erase, already erased": erase}


def timed(fn: Callable[[], None], clock: Callable[[], float] = time.perf_counter) -> float:
    """Time of one pass in ms, with the garbage collector off (as timeit does): a full
    collection over the cache's folios would land in a random pass."""
    gc.collect()
    gc.disable()
    try:
        start = clock()
        fn()
        return (clock() - start) * 1000
    finally:
        gc.enable()


def bytecodes(fn: Callable[[], None]) -> tuple[int, int]:
    """(bytecodes, Python calls) that running ``fn`` executes."""
    counts = [0, 0]

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        counts[event == "call"] += event in ("opcode", "call")
        return trace

    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
    return counts[0], counts[1]


def print_bytecodes(orders: list[int], erasesize: int, pattern: bytes) -> None:
    """One eraseblock's cost per path in bytecodes and calls, and the page-cache lookups
    and compound_heads it makes, for each row and order."""
    print(f"block2mtd, one {format_size(erasesize)} eraseblock: Python bytecodes (calls) "
          "lookups/compound_heads")
    print(f"{'Test':<30} {'Folio':>5} {'page':>21} {'folio':>21}")
    for order in orders:
        devs = {api: make_reference_block2mtd(size=erasesize, erasesize=erasesize,
                                              folio_order=order, api=api)
                for api in ("page", "folio")}
        costs: dict[str, dict[str, str]] = {}
        for api, dev in devs.items():
            rows = passes(dev, pattern)
            for name, run in rows.items():
                prepare(rows, list(rows), name)
                before = dev.stats.snapshot()
                ops, calls = bytecodes(run)
                change = dev.stats.delta(before)
                costs.setdefault(name, {})[api] = (
                    f"{ops} ({calls}) {change.get('folio_lookups', 0)}/"
                    f"{change.get('compound_head', 0)}")
            dev.close()
        for name, by_api in costs.items():
            print(f"{name:<30} {format_size(PAGE_SIZE << order):>5} {by_api['page']:>21} "
                  f"{by_api['folio']:>21}")


def prepare(rows: dict[str, Callable[[], None]], names: list[str], name: str) -> None:
    """As mtd_speedtest: write into erased blocks, erase blocks holding data."""
    if name == names[0]:
        rows["Erase, already erased"]()
    elif name == "Erase, blocks hold data":
        rows[names[0]]()


def profile_rows(devs: dict[tuple[int, str], Block2MTD], names: list[str],
                 pattern: bytes) -> None:
    """One pass of every row, path and size under cProfile, its top functions each."""
    for name in names:
        for (order, api), dev in devs.items():
            rows = passes(dev, pattern)
            prepare(rows, names, name)
            print_profile(f"{name}, {format_size(PAGE_SIZE << order)}, {api}", rows[name])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="256M")
    parser.add_argument("--erasesize", default="128K")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--orders", default="0,2,4")
    parser.add_argument("--opcodes", action="store_true",
                        help="count bytecodes per eraseblock instead of timing passes")
    parser.add_argument("--profile", action="store_true",
                        help="profile one pass of each row instead of timing passes")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this thread's CPU time, what a busy machine inflates least")
    args = parser.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.thread_time
    size, erasesize = parse_size(args.size), parse_size(args.erasesize)
    pattern = os.urandom(erasesize)
    if args.opcodes:
        print_bytecodes([int(o) for o in parse_list(args.orders)], erasesize, pattern)
        return
    print(f"block2mtd, {format_size(size)} device, {format_size(erasesize)} eraseblocks, "
          f"best of {args.passes} passes, ms per pass over the device ({args.clock} clock), "
          f"load average {os.getloadavg()[0]:.1f}")
    orders = [int(o) for o in parse_list(args.orders)]
    devs = {(order, api): make_reference_block2mtd(size=size, erasesize=erasesize,
                                                   folio_order=order, api=api)
            for order in orders for api in ("page", "folio")}
    for dev in devs.values():      # populate the page cache: every pass below is warm
        passes(dev, pattern)[f"Eraseblock write ({format_kib(erasesize)})"]()
    names = list(passes(devs[orders[0], "page"], pattern))
    if args.profile:
        profile_rows(devs, names, pattern)
        return
    best: dict[tuple[str, int, str], float] = {}
    for name in names:
        for _ in range(args.passes):
            for (order, api), dev in devs.items():   # every path and size in turn
                rows = passes(dev, pattern)
                prepare(rows, names, name)
                ms = timed(rows[name], clock)
                best[name, order, api] = min(best.get((name, order, api), float("inf")), ms)
    print(f"{'Test':<30} {'Folio':>5} {'page':>9} {'folio':>9} {'change':>8}")
    for order in orders:
        for name in names:
            page, folio = best[name, order, "page"], best[name, order, "folio"]
            print(f"{name:<30} {format_size(PAGE_SIZE << order):>5} {page:>9.1f} "
                  f"{folio:>9.1f} {(folio / page - 1) * 100:>+7.1f}%")
    print("the page path across folio sizes, slowest / fastest pass (the kernel's: 1.02):")
    for name in names:
        times = [best[name, order, "page"] for order in orders]
        print(f"  {name:<30} {max(times) / min(times):.2f}")
    for dev in devs.values():
        dev.close()
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
