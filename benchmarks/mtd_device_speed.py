"""Our real-device runners against the kernel's own mtd tests, on one device in one guest.

Run: ``python benchmarks/mtd_device_speed.py [--mtd-size 64M] [--passes 2] [--count 2000]
[VM-OPTIONS...]``. Boots the VM once with ``--mtd-tests`` (the kernel's drivers/mtd/tests
built from the booted kernel's source, cached) and, on the same /dev/mtd0 (the kernel's
block2mtd at 4K folios), times:

- mtd_speedtest's rows through our runner (pytest_folio.mtdtests.speed, which the
  speed suite runs) with the chunked preadv/pwritev path of the /dev/mtdN target, the
  same runner through plain read/write calls (one per page, as the target did before),
  and the kernel's mtd_speedtest module: ms per pass, median of the passes;
- mtd_stresstest: our runner (every read checked against a copy of the device) and the
  kernel's module, the same operation count, wall time of the whole run;
- the userspace anchor, ``benchmarks/anchors/mtd_userspace.c`` (built here with gcc when
  there is one): a C program doing what a userspace tool such as mtd-utils' flash_speed
  and flash_stress does (one pread/pwrite per eraseblock, page or two pages, reads compared;
  the same stress op mix), on the same device. Debian's mtd-utils ships neither tool, so
  this is the fair anchor for a userspace runner: the kernel's module reads in the kernel,
  with no system call per page at all.

It prints one table: each row's figures and the ratio of ours to the kernel's (1.00x:
as fast as the kernel test; 2.00x: twice its time), and for the read rows a pass of the
bare preadv calls with nothing compared: what the /dev/mtdN interface itself costs.
Under TCG every figure is a property of qemu's code generation as much as of the
driver (docs/vm.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

GUEST = '''
import os, statistics, subprocess, time
from pathlib import Path
from pytest_folio.mtdtests.speed import run_speedtest
from pytest_folio.mtdtests.stress import run_stresstest
from pytest_folio.targets.mtdchar import open_mtd_char
from pytest_folio.mtdtests.kernel_modules import (KERNEL_TESTS, MODULES_ENV, kernel_mtd_devices,
                                      run_kernel_test, speed_rows)

PASSES, COUNT, ANCHOR = {passes}, {count}, {anchor!r}


class Plain:
    """The device without its chunked calls: one read/write call per page, as before."""

    def __init__(self, dev):
        self.dev = dev
        for name in ("name", "type", "flags", "size", "erasesize", "writesize", "oobsize"):
            setattr(self, name, getattr(dev, name))

    def read(self, offset, length):
        return self.dev.read(offset, length)

    def write(self, offset, data):
        self.dev.write(offset, data)

    def erase(self, offset, length):
        self.dev.erase(offset, length)


def say(*words):
    print("BENCH", *words, flush=True)


def userspace_rows(device):
    """The C anchor's ms per pass on ``device`` ({{}} when it was not built)."""
    if not ANCHOR:
        return {{}}
    out = subprocess.run([ANCHOR, device, str(PASSES), str(COUNT)], capture_output=True,
                         text=True, check=True).stdout
    return {{name: float(ms) for name, ms in
            (line[4:].split("\t") for line in out.splitlines() if line.startswith("ROW "))}}


def test_side_by_side():
    modules = Path(os.environ[MODULES_ENV])
    device = [d for d in kernel_mtd_devices() if d.folio_order == 0][0]
    dev = open_mtd_char(device.path, allow_destructive=True)
    try:
        ours = {{r.name: r.ms for r in run_speedtest(dev, passes=PASSES)}}
        plain = {{r.name: r.ms for r in run_speedtest(Plain(dev), passes=PASSES)}}
        start = time.perf_counter()
        run_stresstest(dev, count=COUNT, seed=1)
        stress = time.perf_counter() - start
        start = time.perf_counter()
        run_stresstest(Plain(dev), count=COUNT, seed=1)
        stress_plain = time.perf_counter() - start
        # the interface's own cost: the same preadv calls, nothing compared
        floor = {{}}
        buf = bytearray(dev.erasesize)
        for name, chunk in (("Eraseblock read (128 KiB)", 0), ("Page read (512 B)", 512),
                            ("2-page read (1 KiB)", 1024)):
            times = []
            for _ in range(PASSES):
                start = time.perf_counter()
                for off in range(0, dev.size, dev.erasesize):
                    dev.read_into(off, buf, chunk)
                times.append((time.perf_counter() - start) * 1000)
            floor[name] = statistics.median(times)
    finally:
        dev.close()
    c = userspace_rows(device.path)
    kernel = {{}}
    for _ in range(PASSES):
        run = run_kernel_test(modules, KERNEL_TESTS["speedtest"], device)
        assert run.errno == 0 and run.passed(), run.log[-3:]
        for name, ms in speed_rows(run.log, device.erasesize, device.writesize).items():
            kernel.setdefault(name, []).append(ms)
    start = time.perf_counter()
    run = run_kernel_test(modules, KERNEL_TESTS["stresstest"], device, {{"count": str(COUNT)}})
    kernel_stress = time.perf_counter() - start
    assert run.errno == 0 and run.passed(), run.log[-3:]
    for name, values in kernel.items():
        if name in ours:
            say(repr(name), ours[name], plain[name], statistics.median(values),
                floor.get(name, 0.0), c.get(name.split(" (")[0], 0.0))
    say(repr(f"Stress, {{COUNT}} operations (s)"), stress, stress_plain, kernel_stress, 0.0,
        c.get("Stress", 0.0) / 1000)
'''


def build_anchor(into: Path) -> Path | None:
    """Compile the userspace anchor (the guest runs the host's binaries over 9p)."""
    source = Path(__file__).parent / "anchors" / "mtd_userspace.c"
    binary = into / "mtd_userspace"
    built = subprocess.run(["gcc", "-O2", "-o", str(binary), str(source)],
                           capture_output=True, text=True, check=False) \
        if shutil.which("gcc") else None
    if built is None or built.returncode != 0:
        print("no userspace anchor: "
              f"{'gcc not found' if built is None else built.stderr.strip()[:200]}")
        return None
    return binary


def main(argv: list[str]) -> int:
    passes, count, size, vm_args = 2, 2000, "64M", []
    args = iter(argv)
    for arg in args:
        if arg == "--passes":
            passes = int(next(args))
        elif arg == "--count":
            count = int(next(args))
        elif arg == "--mtd-size":
            size = next(args)
        else:
            vm_args.append(arg)
    with tempfile.TemporaryDirectory(prefix="folio-bench-") as tmp:
        anchor = build_anchor(Path(tmp))
        (Path(tmp) / "guest_device_speed.py").write_text(GUEST.format(
            passes=passes, count=count, anchor=str(anchor) if anchor else ""))
        env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        proc = subprocess.run(
            [sys.executable, "-m", "pytest_folio", "vm", "--mtd-tests", "--mtd-size", size,
             *vm_args, "--", "-q", "-s", "-p", "no:randomly", "--folio-orders=0",
             "guest_device_speed.py"],
            cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            check=False)
    rows = [line.split("BENCH ", 1)[1] for line in proc.stdout.splitlines() if "BENCH " in line]
    if proc.returncode != 0 or not rows:
        print(proc.stdout[-3000:])
        return proc.returncode or 1
    load = os.getloadavg()
    print(f"one guest, /dev/mtd0 = the kernel's block2mtd ({size}, 4K folios), "
          f"{passes} passes, stress {count} operations; host load {load[0]:.1f}")
    print(f"{'row (ms per pass)':<34} {'chunked':>9} {'plain':>9} {'kernel':>9} "
          f"{'C':>9} {'chunk/k':>7} {'plain/k':>8} {'chunk/C':>7} {'preadv alone':>12}")
    for row in rows:
        name, rest = row.rsplit("' ", 1)[0].strip("'"), row.rsplit("' ", 1)[1]
        ours, before, kernel, floor, c = (float(v) for v in rest.split())
        print(f"{name:<34} {ours:>9.1f} {before:>9.1f} {kernel:>9.1f} "
              f"{f'{c:.1f}' if c else '-':>9} "
              f"{ours / kernel:>6.2f}x {before / kernel:>7.2f}x "
              f"{f'{ours / c:.2f}x' if c else '-':>7} "
              f"{f'{floor:.1f} ({floor / kernel:.2f}x)' if floor else '':>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
