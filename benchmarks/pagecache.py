"""Page-cache model throughput against a plain memcpy, measured side by side.

Writes and then reads a 256 MiB mapping in 128 KiB chunks at folio orders 0, 2, 4 and 9
(the mapping's minimum and maximum order both set to it) and prints, per order, the ms
per pass (the first, allocating write pass shown apart) and the ratio to copying the
same bytes in the same 128 KiB chunks with a plain memoryview copy (one memcpy per
chunk), measured in the same run: memcpy and read passes alternate and the ratio is
the median of each read pass against the memcpy pass just before it, so a machine that
is busy for a while slows both sides alike.

Targets: a read pass within 1.05x of memcpy at order >= 4, within 1.5x at order 0; peak
RSS at most 1.15x the data plus 60 MiB (the model's memory is one anonymous mmap, folio
data is a view into it, so the data should be resident about once).

    python benchmarks/pagecache.py [--size 256M] [--chunk 128K] [--orders 0,2,4,9] [--passes 7]
                                   [--clock cpu] [--profile]

``--clock cpu`` times by this thread's CPU time (what a busy machine inflates least);
``--profile`` also runs one read pass per order under cProfile, after its row, and
prints the functions that take the most time themselves: what bounds the ratio.

Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable

from profiling import print_profile

from pytest_folio.model import AddressSpace, PhysicalMemory
from pytest_folio.sizes import format_size, parse_list, parse_size

MIB = 1 << 20


def _timed_ms(passes: int, run: Callable[[], None],
              clock: Callable[[], float] = time.perf_counter) -> tuple[float, float]:
    """The first and the median of ``passes`` timed runs of ``run()``, in ms (the median
    ignores a pass disturbed by the machine; the first write pass is the one that
    allocates the folios)."""
    times = []
    for _ in range(passes):
        t0 = clock()
        run()
        times.append((clock() - t0) * 1e3)
    return times[0], statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="256M", help="mapping size (default 256M)")
    parser.add_argument("--chunk", default="128K", help="read/write size (default 128K)")
    parser.add_argument("--orders", default="0,2,4,9", help="folio orders (default 0,2,4,9)")
    parser.add_argument("--passes", type=int, default=7, help="timed passes per figure")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this thread's CPU time, what a busy machine inflates least")
    parser.add_argument("--profile", action="store_true",
                        help="print each order's read pass under cProfile, by own time")
    args = parser.parse_args(argv)
    try:
        size = parse_size(args.size)
        chunk = parse_size(args.chunk)
        orders = [int(o) for o in parse_list(args.orders)]
    except ValueError as exc:
        parser.error(str(exc))
    if chunk <= 0 or size % chunk:
        parser.error(f"--chunk {args.chunk} must divide --size {args.size}")
    clock = time.perf_counter if args.clock == "wall" else time.thread_time

    # One memory for every order: each run truncates its mapping, so pages are reused
    # and RSS stays at one copy of the data.
    memory = PhysicalMemory(size + (4 << 20))
    # Two distinct chunks alternate, so a read returning the wrong chunk is caught.
    patterns = [os.urandom(chunk), os.urandom(chunk)]
    offsets = range(0, size, chunk)
    dst = memoryview(bytearray(chunk))
    buffer = memory.buffer   # the memory under every folio: same bytes, same cache effects

    def memcpy_pass() -> None:
        for off in offsets:
            dst[:] = buffer[off:off + chunk]

    print(f"page cache model: {format_size(size)} mapping, {format_size(chunk)} chunks, "
          f"median of {args.passes} passes ({args.clock} clock), Python "
          f"{sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}")
    header = (f"{'folio':>6} {'create ms':>9} {'write ms':>9} {'x memcpy':>9} {'read ms':>9} "
              f"{'memcpy ms':>10} {'x memcpy':>9} {'target':>7}  met")
    print(header)
    failed = False
    for order in orders:
        mapping = AddressSpace(memory)
        mapping.mapping_set_folio_order_range(order, order)

        def write_pass(mapping: AddressSpace = mapping) -> None:
            for i, off in enumerate(offsets):
                mapping.generic_perform_write(off, patterns[i & 1])

        def read_pass(mapping: AddressSpace = mapping) -> None:
            for off in offsets:
                mapping.filemap_read(off, chunk)

        create_ms, write_ms = _timed_ms(args.passes, write_pass, clock)
        for i, off in enumerate(offsets):          # untimed: the data must be right
            if mapping.filemap_read(off, chunk) != patterns[i & 1]:
                print(f"order {order}: wrong data read back at offset {off}")
                return 1
        # alternate the two, so a machine busy for a while slows both alike
        pairs = [(_timed_ms(1, memcpy_pass, clock)[0], _timed_ms(1, read_pass, clock)[0])
                 for _ in range(args.passes)]
        memcpy_ms = statistics.median(m for m, _ in pairs)
        read_ms = statistics.median(r for _, r in pairs)
        ratio = statistics.median(r / m for m, r in pairs)   # each read against its neighbour
        target = 1.05 if order >= 4 else 1.5 if order == 0 else None
        met = "-" if target is None else ("yes" if ratio <= target else "NO")
        failed |= met == "NO"
        print(f"{format_size(4096 << order):>6} {create_ms:9.1f} {write_ms:9.1f} "
              f"{write_ms / memcpy_ms:9.2f} {read_ms:9.1f} {memcpy_ms:10.1f} {ratio:9.2f} "
              f"{'-' if target is None else f'{target}x':>7}  {met}")
        if args.profile:
            print_profile(f"read pass at {format_size(4096 << order)}", read_pass)
        mapping.truncate_inode_pages(0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    limit = 1.15 * size + 60 * MIB
    rss_ok = peak <= limit
    failed |= not rss_ok
    print(f"peak RSS {peak / MIB:.1f} MiB, limit {limit / MIB:.1f} MiB "
          f"(1.15 x {format_size(size)} + 60 MiB): {'yes' if rss_ok else 'NO'}")
    print(f"counters: {memory.stats.snapshot()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
