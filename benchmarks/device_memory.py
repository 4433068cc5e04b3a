"""Peak memory of a run of large reference devices, with and without releasing each
finished test's model memory.

The model's objects refer to each other (a mapping and its folios, a block device and its
address_space_operations), so reference counting never frees a finished test's device:
without an explicit release its buffers wait for Python's cycle collector. This runs the
same pytest session (N tests, each filling one reference MTD device of SIZE through
``mtd_device``) in a child process, once as the fixtures do now and once with the release
turned off, each with the cycle collector on (Python's default) and off, and prints the
child's peak RSS side by side.

    python benchmarks/device_memory.py [--size 64M] [--tests 12]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

TESTS = """
import gc, resource
import pytest

if {gc_off}:
    gc.disable()
if {no_release}:  # what the fixtures did before: close only
    from pytest_folio.model.blockdev import BlockDevice
    from pytest_folio.model.memory import PhysicalMemory
    BlockDevice.release = BlockDevice.close
    PhysicalMemory.release = lambda self: None

@pytest.mark.parametrize("i", range({tests}))
def test_fill(mtd_device, i):
    chunk = bytes([i + 1]) * mtd_device.erasesize
    for off in range(0, mtd_device.size, mtd_device.erasesize):
        mtd_device.write(off, chunk)
    mtd_device.sync()

def test_zz_report():
    print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def peak_mib(size: str, tests: int, gc_off: bool, no_release: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "test_memory.py")
        with open(path, "w") as f:
            f.write(textwrap.dedent(TESTS.format(gc_off=gc_off, no_release=no_release,
                                                 tests=tests)))
        out = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "pytest_folio", "-p", "no:cacheprovider",
             "-q", "-s", f"--folio-mtd-size={size}", "--folio-orders=0", path],
            capture_output=True, text=True, check=False, cwd=tmp).stdout
    for line in out.splitlines():
        if "PEAK" in line:
            return int(line.rsplit(None, 1)[-1])
    raise SystemExit(f"the child run printed no peak:\n{out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="64M", help="device size (default 64M)")
    parser.add_argument("--tests", type=int, default=12, help="tests in the run (default 12)")
    args = parser.parse_args()
    print(f"{args.tests} tests, each filling a {args.size} reference device "
          "(its store and its page cache); peak RSS of the run, MiB")
    print(f"{'cycle collector':<16} {'close only':>11} {'released':>9} {'ratio':>6}")
    for gc_off in (False, True):
        before = peak_mib(args.size, args.tests, gc_off, no_release=True)
        after = peak_mib(args.size, args.tests, gc_off, no_release=False)
        print(f"{'off' if gc_off else 'on (default)':<16} {before:>11} {after:>9} "
              f"{before / after:>5.1f}x")


if __name__ == "__main__":
    main()
