"""Side-by-side timing of block2mtd's page and folio paths (not a test: run it).

    python benchmarks/block2mtd.py [--size 256M] [--passes 3] [--orders 0,2,4]
    python benchmarks/block2mtd.py --opcodes [--orders 0,2,4]

For each folio size it builds one device per path, warms the page cache with a write
pass, then alternates timed passes of the two paths over the whole device (eraseblock
write, eraseblock read, erase of blocks holding data, erase of erased blocks) and prints
the best pass of each in ms with the folio/page ratio, as the seed's table does.

``--opcodes`` prints instead what one eraseblock costs in Python bytecodes and calls
(counted with ``sys.settrace``), the cost shape without the clock: the same on any
machine at any load, where the timed figures want a quiet one.
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


def timed(fn: Callable[[], None]) -> float:
    """Wall time of one pass in ms, with the garbage collector off (as timeit does): a
    full collection over the cache's folios would land in a random pass."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1000
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
    """One eraseblock's cost per path in bytecodes and calls, for each row and order."""
    print(f"block2mtd, one {format_size(erasesize)} eraseblock: Python bytecodes (calls)")
    print(f"{'Test':<30} {'Folio':>5} {'page':>13} {'folio':>13}")
    for order in orders:
        devs = {api: make_reference_block2mtd(size=erasesize, erasesize=erasesize,
                                              folio_order=order, api=api)
                for api in ("page", "folio")}
        costs: dict[str, dict[str, tuple[int, int]]] = {}
        for api, dev in devs.items():
            rows = passes(dev, pattern)
            for name, run in rows.items():
                if name.startswith("Eraseblock write"):
                    rows["Erase, already erased"]()      # write into an erased block
                elif name == "Erase, blocks hold data":
                    next(iter(rows.values()))()          # erase a block holding data
                costs.setdefault(name, {})[api] = bytecodes(run)
            dev.close()
        for name, by_api in costs.items():
            cells = [f"{ops} ({calls})" for ops, calls in (by_api["page"], by_api["folio"])]
            print(f"{name:<30} {format_size(PAGE_SIZE << order):>5} {cells[0]:>13} "
                  f"{cells[1]:>13}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="256M")
    parser.add_argument("--erasesize", default="128K")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--orders", default="0,2,4")
    parser.add_argument("--opcodes", action="store_true",
                        help="count bytecodes per eraseblock instead of timing passes")
    args = parser.parse_args()
    size, erasesize = parse_size(args.size), parse_size(args.erasesize)
    pattern = os.urandom(erasesize)
    if args.opcodes:
        print_bytecodes([int(o) for o in parse_list(args.orders)], erasesize, pattern)
        return
    print(f"block2mtd, {format_size(size)} device, {format_size(erasesize)} eraseblocks, "
          f"best of {args.passes} passes, ms per pass over the device")
    print(f"{'Test':<30} {'Folio':>5} {'page':>9} {'folio':>9} {'change':>8}")
    for order in map(int, parse_list(args.orders)):
        devs = {api: make_reference_block2mtd(size=size, erasesize=erasesize,
                                              folio_order=order, api=api)
                for api in ("page", "folio")}
        for dev in devs.values():  # populate the page cache: every pass below is warm
            passes(dev, pattern)[f"Eraseblock write ({format_kib(erasesize)})"]()
        best: dict[str, dict[str, float]] = {}
        names = list(passes(devs["page"], pattern))
        for name in dict.fromkeys(names):
            for _ in range(args.passes):
                for api, dev in devs.items():
                    # as mtd_speedtest: write into erased blocks, erase blocks holding data
                    if name == names[0]:
                        passes(dev, pattern)["Erase, already erased"]()
                    elif name == "Erase, blocks hold data":
                        passes(dev, pattern)[names[0]]()
                    ms = timed(passes(dev, pattern)[name])
                    slot = best.setdefault(name, {})
                    slot[api] = min(slot.get(api, float("inf")), ms)
        for name, by_api in best.items():
            change = (by_api["folio"] / by_api["page"] - 1) * 100
            print(f"{name:<30} {format_size(PAGE_SIZE << order):>5} {by_api['page']:>9.1f} "
                  f"{by_api['folio']:>9.1f} {change:>+7.1f}%")
        for dev in devs.values():
            dev.close()


if __name__ == "__main__":
    main()
