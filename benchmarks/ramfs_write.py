"""Write bandwidth of the reference ramfs by block size, like the seed's dd run:

    mount ramfs -t ramfs -o blocksize=$bs /media/test/
    dd if=/mnt/rand of=/media/test/rand bs=2M count=2048

Writes SIZE (default 256 MiB) of random data in 2 MiB pwrites into one file on a fresh
reference ramfs mounted at each block size, and prints the seed's table beside a memcpy
bandwidth measured in the same run (the same 2 MiB copies from the same source into
touched memory, so the ratio is what the page cache costs on top of copying).

Each block size gets one warm-up pass (so the model's physical memory is touched, as a
running kernel's is), then the best of ``--repeat`` timed passes; the file is truncated
to 0 between passes, which frees every folio back to the buddy allocator: no
fragmentation and no memory pressure, as in the seed.

    python benchmarks/ramfs_write.py [--size 256M] [--repeat 3] [--block-sizes 4k,...,2M]
"""

from __future__ import annotations

import argparse
import mmap
import os
import sys
import time

from pytest_folio.model.constants import MAX_PAGECACHE_ORDER, PAGE_SIZE
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.options import parse_block_size
from pytest_folio.sizes import format_size, parse_list, parse_size

WRITE_SIZE = 2 << 20
SEED_4K, SEED_2M = 1.7, 5.6          # the seed's GB/s at 4k and 2M


def memcpy_bandwidth(src: memoryview, repeat: int) -> float:
    """GB/s of 2 MiB memoryview copies from ``src`` into touched anonymous memory."""
    dst_map = mmap.mmap(-1, len(src))
    dst = memoryview(dst_map)
    best = float("inf")
    for _ in range(repeat + 1):                       # the first pass touches dst
        start = time.perf_counter()
        for off in range(0, len(src), WRITE_SIZE):
            dst[off:off + WRITE_SIZE] = src[off:off + WRITE_SIZE]
        best = min(best, time.perf_counter() - start)
    dst.release()
    dst_map.close()
    return len(src) / best / 1e9


def ramfs_bandwidth(block_size: int, src: memoryview, repeat: int) -> float:
    """GB/s of writing ``src`` in 2 MiB pwrites to a file on ramfs at ``block_size``."""
    fs = Ramfs(blocksize=block_size, memory=len(src) + (8 << 20))
    fd = fs.open("rand", os.O_RDWR | os.O_CREAT)
    best = float("inf")
    for _ in range(repeat + 1):                       # the first pass touches memory
        fs.ftruncate(fd, 0)
        start = time.perf_counter()
        for off in range(0, len(src), WRITE_SIZE):
            fs.pwrite(fd, src[off:off + WRITE_SIZE], off)
        best = min(best, time.perf_counter() - start)
    assert fs.fstat(fd).st_size == len(src)
    mapping = fs.file_inode(fd).i_mapping
    assert mapping is not None and {f.order for f in mapping.folios()} == {
        (block_size // PAGE_SIZE).bit_length() - 1}
    fs.close(fd)
    return len(src) / best / 1e9


def table(rows: list[tuple[str, float]]) -> str:
    """The seed's dd table."""
    lines = ["+------+----------+", "|  bs  | BW(GB/s) |", "+------+----------+"]
    lines += [f"| {bs:<4} | {bw:8.1f} |" for bs, bw in rows]
    lines.append("+------+----------+")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="256M", help="bytes written per pass (256M)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per block size")
    parser.add_argument("--block-sizes", default=",".join(
        format_size(PAGE_SIZE << o) for o in range(MAX_PAGECACHE_ORDER + 1)))
    args = parser.parse_args(argv)
    try:
        size = parse_size(args.size)
        block_sizes = [parse_block_size(b) for b in parse_list(args.block_sizes)]
        if size < WRITE_SIZE or size % WRITE_SIZE:
            raise ValueError(f"--size must be a positive multiple of {format_size(WRITE_SIZE)}")
        if args.repeat < 1:
            raise ValueError("--repeat must be at least 1")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    source = memoryview(os.urandom(size))
    print(f"writing {format_size(size)} in {format_size(WRITE_SIZE)} pwrites, best of "
          f"{args.repeat} after a warm-up pass")
    memcpy = memcpy_bandwidth(source, args.repeat)
    rows = []
    results: dict[int, float] = {}
    for bs in block_sizes:
        results[bs] = ramfs_bandwidth(bs, source, args.repeat)
        rows.append((format_size(bs).replace("K", "k"), results[bs]))
    print(table(rows))
    print(f"memcpy (same 2M copies, same run): {memcpy:.1f} GB/s")
    for bs in block_sizes:
        print(f"  {format_size(bs):>4}: {results[bs] / memcpy:6.1%} of memcpy")
    small, large = PAGE_SIZE, PAGE_SIZE << MAX_PAGECACHE_ORDER
    if small in results and large in results:
        ratio = results[large] / results[small]
        print(f"2M at {results[large] / memcpy:.0%} of memcpy (target >= 50%): "
              f"{'met' if results[large] >= memcpy / 2 else 'NOT met'}")
        print(f"2M/4k = {ratio:.1f}x (target >= seed's {SEED_2M / SEED_4K:.1f}x): "
              f"{'met' if ratio >= SEED_2M / SEED_4K else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
