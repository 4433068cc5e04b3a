"""``benchmarks/vm_guests.py`` end to end, with a stand-in qemu: one guest and two guests
run the same selection, and the table names each configuration's time, CPU and items.

The stand-in plays both kinds of guest: one that runs pytest itself (the command line its
init would run in the guest, run here) and one that serves an xdist worker on its
channel's socket, as a ``--guests`` guest does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_folio.vm import VMError
from pytest_folio.vm.initramfs import find_busybox
from tests.helpers.vm import bzimage

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "vm_guests.py"

STANDIN = r'''
import os, re, shlex, subprocess, sys, time
args = sys.argv[1:]
init = open(args[args.index("-initrd") + 1], "rb").read().decode("latin-1")
fake = os.environ["FAKE_DIR"]
def say(line):
    sys.stdout.write(line + "\r\n"); sys.stdout.flush()
socks = [a for a in args if a.startswith("socket,id=worker,")]
name = re.search(r"--name ([\w-]+)", init).group(1) if socks else "guest"
say("@@folio-vm init")
say("@@folio-vm kernel [    0.000000] Linux version 6.1.0-test (gcc) #1")
say("@@folio-vm mtd /dev/mtd0 /dev/vda 4096 64x0 ")
kept = {}
for size in dict.fromkeys(re.findall(r"-o blocksize=(\d+)k", init)):
    where = os.path.join(fake, f"{name}-ramfs-{size}K")
    os.makedirs(where, exist_ok=True)
    kept[size] = where
    say(f"@@folio-vm ramfs {where} {int(size) << 10} 64x0")
env = {**os.environ, "PYTEST_FOLIO_GUEST_TARGETS": "1"}
say("@@folio-vm start")
if socks:
    sock = socks[0].split("path=")[1].split(",")[0]
    child = subprocess.Popen([sys.executable, "-m", "pytest_folio.vm.gateway", "serve",
                              "--listen", sock, "--name", name], env=env)
    while child.poll() is None:
        say("@@folio-vm alive")
        time.sleep(0.2)
    status = child.returncode
else:
    # the guest's pytest command line, its ramfs options as the guest would write them
    chroot = shlex.split(re.search(r"\nchroot [^\n]*", init).group(0))
    script = shlex.split(chroot[chroot.index("-c") + 1])
    cwd, argv = script[1], script[script.index("exec") + 1:]
    if "$(cat" in argv:
        at = argv.index("$(cat")
        argv[at:at + 2] = [",".join(f"--folio-fs={s}K={w}" for s, w in kept.items()),
                           "--folio-block-sizes=" + ",".join(f"{s}k" for s in kept)]
    status = subprocess.run(argv, cwd=cwd, env=env).returncode
say(f"@@folio-vm exit {status}")
'''

TESTS = """
import time, pytest

@pytest.mark.parametrize("i", range(4))
def test_item(i):
    time.sleep(0.3)
"""


def test_the_benchmark_runs_one_and_two_guests_and_prints_them_side_by_side(
        tmp_path: Path) -> None:
    try:
        find_busybox()
    except VMError as exc:
        pytest.skip(str(exc))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    qemu = bin_dir / "qemu-system-x86_64"
    qemu.write_text(f"#!{sys.executable}\n{STANDIN}")
    qemu.chmod(0o755)
    (tmp_path / "bzImage").write_bytes(bzimage(b"", "6.1.0-test"))
    (tmp_path / "test_items.py").write_text(TESTS)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "FAKE_DIR": str(tmp_path)}
    vm = (f"--kernel {tmp_path / 'bzImage'} --cache-dir {tmp_path / 'cache'} --accel tcg "
          "--timeout 120 --mtd-size 4M")
    proc = subprocess.run(
        [sys.executable, str(BENCHMARK), "--no-warmup", "--configs", "one,two-cpus1,two",
         "--vm", vm, "--", "test_items.py", "-q", "-p", "no:randomly",
         "--folio-block-sizes=4k"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {m[1]: m for m in re.finditer(
        r"^(one|two-cpus1|two) +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+)  (.*)$",
        proc.stdout, re.M)}
    assert set(rows) == {"one", "two-cpus1", "two"}, proc.stdout
    # the base's ratios are 1; every configuration ran the same 4 items and took at
    # least their sleeps, and CPU (the runner, the stand-in guests, their pytest)
    assert rows["one"][3] == "1.00" and rows["one"][5] == "1.00", proc.stdout
    for row in rows.values():
        assert float(row[2]) >= 1.2 and float(row[4]) > 0, proc.stdout
        assert row[6] == "4 passed", proc.stdout
    # the two-guest runs' own session lines
    assert re.search(r"^two-cpus1: session [\d.]+ s, guests busy [\d.]+ s$", proc.stdout,
                     re.M), proc.stdout
    assert re.search(r"^two: session [\d.]+ s, guests busy [\d.]+ s$", proc.stdout,
                     re.M), proc.stdout
    assert "did not run the same items" not in proc.stderr
