"""The real thing: boot the distribution kernel under qemu and run pytest inside it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_folio.vm import VMError, cache_root
from pytest_folio.vm.apt import resolve_kernel_package
from pytest_folio.vm.initramfs import find_busybox
from pytest_folio.vm.kernel import KernelCache
from tests.helpers import run_result


def _missing() -> str | None:
    """Why a real boot cannot run here, or None."""
    if shutil.which("qemu-system-x86_64") is None:
        return "needs qemu-system-x86_64 (apt-get install qemu-system-x86)"
    try:
        find_busybox()
        if KernelCache(cache_root()).newest() is None:
            resolve_kernel_package()
    except VMError as exc:
        return str(exc)
    return None


MISSING = _missing()

GUEST_TESTS = '''
import os

def test_kernel_targets_are_there(folio_timer):
    with folio_timer("read /proc/mtd"):    # a measurement, so --folio-save writes the run
        mtd = open("/proc/mtd").read()
    assert "block2mtd: /dev/vda" in mtd
    assert " /run/folio/ramfs ramfs " in open("/proc/mounts").read()

def test_fails_on_purpose():
    assert os.uname().release == "not this one"
'''


def leftover_qemus() -> list[int]:
    """qemu processes whose initramfs is gone: only a run that did not clean up has those."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"qemu-system-x86_64") and b"-initrd" in args:
            initrd = args[args.index(b"-initrd") + 1].decode()
            if "pytest-folio-vm-" in initrd and not os.path.exists(initrd):
                pids.append(int(proc.name))
    return pids


@pytest.mark.slow
@pytest.mark.vm_boot
@pytest.mark.skipif(MISSING is not None, reason=str(MISSING))
def test_real_boot_runs_pytest_in_the_kernel(tmp_path: Path) -> None:
    (tmp_path / "test_in_guest.py").write_text(GUEST_TESTS)
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_folio", "vm", "--mtd-size", "4M", "--timeout", "300",
         "--", "-q", "test_in_guest.py", "--folio-save", "saved/run.json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 1, proc.stderr  # pytest's status: one test fails on purpose
    run_result(proc).assert_outcomes(failed=1, passed=1)
    version = re.search(r"folio-vm: \[ *[\d.]+\] Linux version (\S+)", proc.stderr)
    assert version, proc.stderr
    assert "folio-vm: /dev/mtd0: block2mtd on /dev/vda, logical block size 4096 (4K folios)" \
        in proc.stderr
    saved = json.loads((tmp_path / "saved" / "run.json").read_text())
    assert version.group(1) in saved["machine"]["kernel"]  # written in the guest
    assert leftover_qemus() == []
