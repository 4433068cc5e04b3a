"""Where the time goes in ``python -m pytest_folio vm``: prepare, boot, Python, first test.

Run: ``python benchmarks/vm_boot.py [ROUNDS]``. Boots the distribution kernel (cached
after the first run) with a one-test guest file, alternating plugin autoloading on and off
in the same run, and prints each phase as the host saw it, plus the guest's own uptime at
the first test. The load average is printed too: under TCG every figure scales with it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GUEST_TEST = '''
def test_first():
    print("FIRST-TEST uptime=" + open("/proc/uptime").read().split()[0], flush=True)
'''


def one_run(workdir: Path, autoload: bool) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_folio", "vm", "--mtd-size", "4M", "--", "-q", "-s",
         "-p", "no:randomly", "test_first.py"],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    marks: dict[str, float] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.monotonic() - start
        if "booting under" in line:
            marks["boot"] = now
        elif "erase_size =" in line:
            marks["ready"] = now
        elif line.startswith("FIRST-TEST") or ".FIRST-TEST" in line:
            marks["first"] = now
            marks["uptime"] = float(line.split("uptime=")[1].split()[0])
    if proc.wait() != 0 or len(marks) < 4:
        raise SystemExit(f"run failed (status {proc.returncode}, saw {sorted(marks)})")
    marks["total"] = time.monotonic() - start
    return marks


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with tempfile.TemporaryDirectory(prefix="bench-vm-") as tmp:
        workdir = Path(tmp)
        (workdir / "test_first.py").write_text(GUEST_TEST)
        one_run(workdir, autoload=False)  # fetch/unpack the kernel outside the figures
        results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
        for _ in range(rounds):
            for autoload in (True, False):
                results[autoload].append(one_run(workdir, autoload))
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'phase (median of ' + str(rounds) + ', seconds)':40} {'autoload':>9} "
          f"{'no autoload':>12}")
    rows = [
        ("prepare (cached kernel, initramfs)", lambda m: m["boot"]),
        ("boot: qemu start to guest ready", lambda m: m["ready"] - m["boot"]),
        ("guest ready to first test (Python)", lambda m: m["first"] - m["ready"]),
        ("boot to first test (host clock)", lambda m: m["first"] - m["boot"]),
        ("guest uptime at first test", lambda m: m["uptime"]),
        ("whole command", lambda m: m["total"]),
    ]
    for name, phase in rows:
        on = statistics.median(phase(m) for m in results[True])
        off = statistics.median(phase(m) for m in results[False])
        print(f"{name:40} {on:9.1f} {off:12.1f}")


if __name__ == "__main__":
    main()
