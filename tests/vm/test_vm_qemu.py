"""qemu's command line and running a guest under deadlines (with stand-in processes)."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_folio.vm import VMError, qemu
from pytest_folio.vm.qemu import Disk, Machine, find_qemu, kvm_usable, qemu_command, run_guest
from tests.helpers.vm import alive


def machine(tmp_path: Path, accel: str = "tcg") -> Machine:
    return Machine(image=tmp_path / "vmlinux", initrd=tmp_path / "initrd",
                   cmdline="console=ttyS0 rdinit=/init", out=tmp_path / "out",
                   mem_mib=768, cpus=2, accel=accel)


def option(cmd: list[str], name: str) -> list[str]:
    return [cmd[i + 1] for i, arg in enumerate(cmd) if arg == name]


def test_tcg_command_line(tmp_path: Path) -> None:
    cmd = qemu_command("/usr/bin/qemu-system-x86_64", machine(tmp_path))
    assert cmd[0] == "/usr/bin/qemu-system-x86_64"
    assert option(cmd, "-accel") == ["tcg,thread=multi"]
    assert option(cmd, "-m") == ["768"] and option(cmd, "-smp") == ["2"]
    assert option(cmd, "-kernel") == [str(tmp_path / "vmlinux")]
    assert option(cmd, "-initrd") == [str(tmp_path / "initrd")]
    assert option(cmd, "-append") == ["console=ttyS0 rdinit=/init"]
    assert "-no-reboot" in cmd and "-nodefaults" in cmd
    root, out = option(cmd, "-fsdev")
    assert root.startswith("local,id=root,path=/,") and "readonly=on" in root
    assert out.startswith(f"local,id=out,path={tmp_path / 'out'},")
    assert "readonly" not in out
    assert option(cmd, "-device") == ["virtio-9p-pci,fsdev=root,mount_tag=folioroot",
                                      "virtio-9p-pci,fsdev=out,mount_tag=folioout"]


def test_bytecode_share_is_optional(tmp_path: Path) -> None:
    cmd = qemu_command("qemu", dataclasses.replace(machine(tmp_path), pycache=tmp_path / "pyc"))
    assert option(cmd, "-fsdev")[2] == f"local,id=pyc,path={tmp_path / 'pyc'},security_model=none"
    assert option(cmd, "-device")[2] == "virtio-9p-pci,fsdev=pyc,mount_tag=foliopyc"


def test_each_disk_is_virtio_blk_with_its_block_size_and_serial(tmp_path: Path) -> None:
    disks = (Disk(tmp_path / "a.img", "folio-mtd-16K", 16384), Disk(tmp_path / "b.img", "x"))
    cmd = qemu_command("qemu", dataclasses.replace(machine(tmp_path), disks=disks))
    assert option(cmd, "-drive") == [
        f"file={tmp_path / 'a.img'},if=none,id=disk0,format=raw,cache=unsafe",
        f"file={tmp_path / 'b.img'},if=none,id=disk1,format=raw,cache=unsafe"]
    assert option(cmd, "-device")[2:] == [
        "virtio-blk-pci,drive=disk0,serial=folio-mtd-16K,logical_block_size=16384,"
        "physical_block_size=16384",
        "virtio-blk-pci,drive=disk1,serial=x,logical_block_size=512,physical_block_size=512"]


def test_a_tcg_guest_gets_no_byte_granular_string_instructions(tmp_path: Path) -> None:
    cmd = qemu_command("qemu", machine(tmp_path, "tcg"))
    assert option(cmd, "-cpu") == ["max,-erms,-fsrm"]


def test_kvm_command_line(tmp_path: Path) -> None:
    cmd = qemu_command("qemu", machine(tmp_path, "kvm"))
    assert option(cmd, "-accel") == ["kvm"] and option(cmd, "-cpu") == ["host"]
    with pytest.raises(ValueError):
        qemu_command("qemu", machine(tmp_path, "hvf"))


def test_no_qemu_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(VMError, match=r"^qemu-system-x86_64 not found: install qemu "
                                      r"\(apt-get install qemu-system-x86\)$"):
        find_qemu()


def test_kvm_usable_needs_an_openable_device(tmp_path: Path) -> None:
    assert not kvm_usable(str(tmp_path / "no-kvm"))
    (tmp_path / "kvm").write_bytes(b"")
    assert kvm_usable(str(tmp_path / "kvm"))


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "fake-qemu.py"
    path.write_text("import os, subprocess, sys, time\n" + textwrap.dedent(body))
    return [sys.executable, str(path)]


def test_console_lines_and_exit(tmp_path: Path) -> None:
    cmd = script(tmp_path, """
        sys.stdout.write("one\\r\\ntwo\\r\\npartial")
        sys.stderr.write("qemu says hi\\n")
        sys.exit(3)
    """)
    lines: list[str] = []
    result = run_guest(cmd, lines.append, timeout=30)
    assert lines == ["one", "two", "partial"]
    assert (result.ended, result.returncode) == ("exit", 3)
    assert result.stderr == "qemu says hi\n"


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    cmd = script(tmp_path, f"""
        child = subprocess.Popen(["sleep", "60"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        print("booting", flush=True)
        time.sleep(60)
    """)
    start = time.monotonic()
    result = run_guest(cmd, lambda line: None, timeout=1.5)
    assert result.ended == "timeout"
    assert time.monotonic() - start < 10
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_boot_timeout_when_not_ready(tmp_path: Path) -> None:
    cmd = script(tmp_path, "print('SeaBIOS', flush=True); time.sleep(60)")
    result = run_guest(cmd, lambda line: None, timeout=60, ready=lambda: False,
                       boot_timeout=0.5)
    assert result.ended == "boot-timeout"
    assert result.elapsed < 10


def test_ready_guest_is_not_cut_by_the_boot_timeout(tmp_path: Path) -> None:
    # the boot timeout leaves a loaded machine time to start Python; the guest then runs
    # on well past it
    cmd = script(tmp_path, "print('up', flush=True); time.sleep(3); print('done')")
    seen: list[str] = []
    result = run_guest(cmd, seen.append, timeout=30, ready=lambda: "up" in seen,
                       boot_timeout=2)
    assert result.ended == "exit" and seen == ["up", "done"]


def test_guest_stuck_after_done_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    monkeypatch.setattr(qemu, "EXIT_GRACE", 0.3)
    cmd = script(tmp_path, "print('@@folio-vm exit 0', flush=True); time.sleep(60)")
    seen: list[str] = []
    result = run_guest(cmd, seen.append, timeout=60, done=lambda: bool(seen))
    assert result.ended == "exit" and result.elapsed < 10


def test_unstartable_qemu_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "not-executable"
    target.write_text("")
    with pytest.raises(VMError, match=r"^cannot start .*not-executable: Permission denied$"):
        run_guest([str(target)], lambda line: None, timeout=5)


def test_sigterm_stops_the_guest_and_cleans_up(tmp_path: Path) -> None:
    """`timeout` or a CI runner stops `vm` with SIGTERM: the guest's process group is
    killed and its temporary directory removed, as for Ctrl-C."""
    script = f"""
import os, sys, tempfile
from pytest_folio.vm import runner
from pytest_folio.vm.qemu import run_guest

class Run:
    def __init__(self, opts):
        pass

    def execute(self):
        with tempfile.TemporaryDirectory(dir={str(tmp_path)!r}):
            run_guest(["sh", "-c", "echo $$ > {tmp_path}/guest.pid; echo up; exec sleep 60"],
                      lambda line: print(line, flush=True), timeout=60)
        return 0

runner.VMRun, runner.check_options = Run, lambda args: None
sys.exit(runner.run(None))
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "up"
    guest = int((tmp_path / "guest.pid").read_text())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert err.strip() == "python -m pytest_folio vm: terminated (qemu killed)"
    with pytest.raises(ProcessLookupError):
        os.kill(guest, 0)
    assert [p.name for p in tmp_path.iterdir()] == ["guest.pid"]
