"""The ``vm`` subcommand end to end, with a stand-in qemu that plays the guest's part."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import pytest

from pytest_folio.cli import main
from pytest_folio.vm import EXIT_VM_ERROR, runner
from pytest_folio.vm.disks import kernel_version
from pytest_folio.vm.guest import (
    device_lines,
    guest_env,
    guest_pytest_argv,
    split_save,
    warm_bytecode,
    warmup_argv,
)
from pytest_folio.vm.initramfs import GUEST_RAMFS, GUEST_RAMFS_ARGS
from tests.helpers.vm import alive, bzimage, fake_machine, kernel_tree, module

FAKE_QEMU = r'''
import os, re, subprocess, sys, time
args = sys.argv[1:]
accel = args[args.index("-accel") + 1]
out = [a for a in args if a.startswith("local,id=out,")][0].split("path=")[1].split(",")[0]
init = open(args[args.index("-initrd") + 1], "rb").read()
chroot = re.search(rb"\nchroot [^\n]*", init).group(0).decode().strip()
open(os.path.join(os.environ["FAKE_DIR"], "qemu.pid"), "a").write(f"{os.getpid()}\n")
mode = os.environ["FAKE_QEMU"]
def say(line):
    sys.stdout.write(line + "\r\n"); sys.stdout.flush()
if accel == "kvm" and mode == "kvm-fails":
    sys.stderr.write("qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69\n")
    sys.exit(1)
if accel == "kvm" and mode == "kvm-hangs":
    time.sleep(60)
if mode == "crash":
    say("SeaBIOS (version 1.16)")
    sys.stderr.write("qemu-system-x86_64: could not load kernel\n")
    sys.exit(1)
say("@@folio-vm init")
if mode == "guest-error":
    say("@@folio-vm error cannot mount the host root over 9p (needs CONFIG_9P_FS)")
    sys.exit(0)
if mode == "hang":
    subprocess.Popen(["sleep", "60"])
    say("@@folio-vm start")
    say("suites/test_mtd_stress.py ...")
    # what pytest_folio.vm.nowrunning keeps in the results share
    open(os.path.join(out, "running"), "w").write(
        "3 suites/test_mtd_stress.py::TestMTDStress::test_stress[part4of4-4K]\n")
    time.sleep(60)
say("@@folio-vm kernel [    0.000000] Linux version 6.1.0-fake (gcc) #1 SMP")
say("@@folio-vm mtd /dev/mtd0 /dev/vda 4096 64x0 ")
say("@@folio-vm fs /run/folio/ramfs ramfs - 4096")
say("@@folio-vm start")
say("ARGV " + chroot)
say("=== 1 failed, 2 passed in 0.10s ===")
open(os.path.join(out, "timings.json"), "w").write('{"format": "fake"}')
open(os.path.join(out, "dmesg.txt"), "w").write("[ 2.0] WARNING: CPU: 0 PID: 1 at mm/filemap.c:1\n")
say("@@folio-vm exit 1")
say("[    3.0] reboot: Power down")
'''


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A qemu-system-x86_64 on PATH that acts the guest; a bzImage; a busybox stand-in."""
    return fake_machine(tmp_path, monkeypatch, FAKE_QEMU)


def vm(fake: Path, *args: str) -> int:
    return main(["vm", "--kernel", str(fake / "bzImage"), "--cache-dir", str(fake / "cache"),
                 "--timeout", "20", *args])


def qemu_pids(fake: Path) -> list[int]:
    return [int(p) for p in (fake / "qemu.pid").read_text().split()]


def test_run_streams_output_and_returns_pytest_status(fake: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    status = vm(fake, "--", "-k", "not slow", "--folio-save", "runs/base.json")
    out, err = capsys.readouterr()
    assert status == 1
    lines = out.splitlines()
    assert lines[-1] == "=== 1 failed, 2 passed in 0.10s ==="
    outer = shlex.split(lines[0].removeprefix("ARGV "))
    inner = shlex.split(outer[outer.index("-c") + 1])
    assert inner[:3] == ["cd", str(fake), "&&"]
    assert inner[inner.index("exec") + 1:] == [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_folio",
        "-p", "pytest_folio.vm.nowrunning",
        "--folio-mtd=4K=/dev/mtd0", f"--folio-fs={GUEST_RAMFS}", "--folio-orders=0",
        "--folio-mtd-size=16777216", "--folio-erasesize=131072", "--folio-allow-destructive",
        "-k", "not slow", "--folio-save=/run/folio/out/timings.json",
        # the ramfs per block size the guest could mount, over the user's sizes
        "$(cat", f"{GUEST_RAMFS_ARGS})"]
    assert "reboot" not in out  # the console after the exit mark is not pytest's
    assert "folio-vm: [    0.000000] Linux version 6.1.0-fake" in err
    assert "folio-vm: /dev/mtd0: block2mtd on /dev/vda, logical block size 4096 (4K folios)" \
        in err
    assert "folio-vm: /run/folio/ramfs: ramfs, block size 4096 (4K)" in err
    # 6.1 gives block devices 4K folios only: the default orders are cut, and said so
    assert ("folio-vm: kernel 6.1.0-test: no 16K, 64K folio devices (folios above PAGE_SIZE "
            "in a block device's page cache need Linux 6.15 or later)") in err
    assert "booting under TCG" in err
    assert "guest kernel log has 1 warning line(s)" in err
    assert json.loads((fake / "runs" / "base.json").read_text()) == {"format": "fake"}
    assert not any(alive(pid) for pid in qemu_pids(fake))


def test_dmesg_is_saved_on_request(fake: Path) -> None:
    vm(fake, "--dmesg", str(fake / "guest.log"), "--")
    assert "WARNING: CPU: 0" in (fake / "guest.log").read_text()


def test_kvm_failing_early_falls_back_to_tcg(fake: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runner, "kvm_usable", lambda: True)
    monkeypatch.setenv("FAKE_QEMU", "kvm-fails")
    assert vm(fake) == 1
    err = capsys.readouterr().err
    assert "KVM guest failed (qemu-system-x86_64: error: failed to set MSR" in err
    assert "falling back to TCG" in err
    assert len(qemu_pids(fake)) == 2
    # the next run remembers and goes straight to TCG
    assert vm(fake) == 1
    assert "using TCG: KVM failed on this host before" in capsys.readouterr().err
    assert len(qemu_pids(fake)) == 3


def test_kvm_hanging_falls_back_to_tcg(fake: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runner, "kvm_usable", lambda: True)
    monkeypatch.setattr(runner, "KVM_BOOT_TIMEOUT", 0.5)
    monkeypatch.setenv("FAKE_QEMU", "kvm-hangs")
    assert vm(fake) == 1
    assert "KVM guest hung before init; falling back to TCG" in capsys.readouterr().err
    assert not any(alive(pid) for pid in qemu_pids(fake))


def test_forced_kvm_does_not_fall_back(fake: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_QEMU", "kvm-fails")
    assert vm(fake, "--accel", "kvm") == EXIT_VM_ERROR
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == ("python -m pytest_folio vm: error: qemu exited before "
                                    "the tests finished: qemu-system-x86_64: error: failed "
                                    "to set MSR 0x10a to 0x69")


@pytest.mark.parametrize(("mode", "message"), [
    ("hang", r"the guest did not finish within 2 s \(qemu killed; it was running "
             r"suites/test_mtd_stress.py::TestMTDStress::test_stress\[part4of4-4K\] for "
             r"[0-3] s, after 3 finished test\(s\); last console line: "
             r"suites/test_mtd_stress.py ...\)$"),
    ("guest-error", r"guest: cannot mount the host root over 9p \(needs CONFIG_9P_FS\)$"),
    ("crash", r"qemu exited before the tests finished: qemu-system-x86_64: could not "
              r"load kernel$"),
])
def test_guest_failures_are_one_line(fake: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str], mode: str,
                                     message: str) -> None:
    import re
    monkeypatch.setenv("FAKE_QEMU", mode)
    assert vm(fake, "--timeout", "2") == EXIT_VM_ERROR
    last = capsys.readouterr().err.splitlines()[-1]
    assert re.search("^python -m pytest_folio vm: error: " + message, last), last
    time.sleep(0.1)
    assert not any(alive(pid) for pid in qemu_pids(fake))


def test_no_qemu(fake: Path, monkeypatch: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(fake / "empty"))
    assert vm(fake) == EXIT_VM_ERROR
    assert capsys.readouterr().err == ("python -m pytest_folio vm: error: qemu-system-x86_64 "
                                       "not found: install qemu (apt-get install "
                                       "qemu-system-x86)\n")


def test_no_kernel_package_reachable(fake: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PATH", str(fake / "bin"))  # qemu, but no apt-cache
    status = main(["vm", "--cache-dir", str(fake / "cache"), "--"])
    assert status == EXIT_VM_ERROR
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("python -m pytest_folio vm: error: no kernel package "
                              "reachable: apt-cache not found")
    assert len(err) == 1


def test_kernel_without_block2mtd(fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel_tree(fake / "staging", "6.1.0-test", {"kernel/brd.ko": module()})
    assert vm(fake, "--modules", str(fake / "staging")) == EXIT_VM_ERROR
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("python -m pytest_folio vm: error: kernel 6.1.0-test has no "
                              "virtio_pci (CONFIG_VIRTIO_PCI)")


@pytest.mark.parametrize(("args", "message"), [
    (["--modules", "x"], "--modules needs --kernel"),
    (["--kernel", "debian:sid", "--modules", "x"], "--modules needs --kernel IMAGE"),
    (["--kernel", "debian:../x"], "--kernel debian:../x: not a Debian suite name"),
    (["--mtd-size", "1M", "--erasesize", "384K"], "erasesize 384K does not divide"),
    (["--mtd-size", "lots"], "argument --mtd-size: not a size: 'lots'"),
    (["--mem", "0"], "argument --mem: must be positive: '0'"),
    (["--mem", "256"], "--mem 256 is too small for a 16M MTD device (needs at least 400 MiB)"),
    (["--fs", "btrfs"], "argument --fs: invalid choice: 'btrfs'"),
    (["--timeout", "soon"], "argument --timeout: not a number: 'soon'"),
    (["--accel", "hvf"], "argument --accel: invalid choice: 'hvf'"),
])
def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                   message: str) -> None:
    with pytest.raises(SystemExit) as exc:
        status = main(["vm", *args, "--", "-x"])
        raise SystemExit(status)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err


def test_split_save_forms() -> None:
    guest = "--folio-save=/run/folio/out/timings.json"
    assert split_save(["-x", "--folio-save", "a.json"]) == (["-x", guest], Path("a.json"))
    assert split_save(["--folio-save=/abs/b.json", "t.py"]) == ([guest, "t.py"],
                                                                Path("/abs/b.json"))
    assert split_save(["-k", "x"]) == (["-k", "x"], None)
    # after pytest's own "--" everything is a path or argument, never our option
    assert split_save(["--", "--folio-save", "f"]) == (["--", "--folio-save", "f"], None)


def test_guest_argv_puts_the_kernel_targets_before_user_arguments() -> None:
    argv = guest_pytest_argv("/usr/bin/python3", ["--folio-mtd", "reference", "t.py"],
                             4 << 20, 64 << 10)
    assert argv[:3] == ["/usr/bin/python3", "-m", "pytest"]
    assert argv.index("--folio-mtd=/dev/mtd0") < argv.index("--folio-mtd")
    assert "/dev/mtd0" not in argv  # a bare path would drag pytest's rootdir to /
    assert "--folio-mtd-size=4194304" in argv and "--folio-erasesize=65536" in argv


def test_warmup_collects_the_user_paths_without_guest_options(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("")
    args = ["-q", "--folio-fs", "x", "--pyargs", "pytest_folio.suites", "t.py::test_a",
            "no_such_module"]
    argv = warmup_argv("/py", args, tmp_path)
    assert argv[:4] == ["/py", "-m", "pytest", "--co"]
    assert argv[-3:] == ["--pyargs", "pytest_folio.suites", "t.py::test_a"]
    assert "--folio-fs" not in argv and "x" not in argv
    assert "pytest_folio.suites" not in warmup_argv("/py", ["pytest_folio.suites"], tmp_path)


def test_warm_bytecode_fills_the_prefix(tmp_path: Path) -> None:
    (tmp_path / "mod_for_warmup.py").write_text("X = 1\n")
    argv = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
                                  "import mod_for_warmup"]
    warm_bytecode(argv, tmp_path / "pyc", {"PATH": os.environ["PATH"],
                                           "PYTHONDONTWRITEBYTECODE": "1"})
    assert list((tmp_path / "pyc").rglob("mod_for_warmup.*.pyc"))


def test_guest_env_is_fresh_but_keeps_the_interpreter_setup() -> None:
    env = guest_env({"PATH": "/venv/bin:/usr/bin", "PYTHONPATH": "/src", "SECRET": "x",
                     "HOME": "/root"}, colors=True)
    assert env["PATH"] == "/venv/bin:/usr/bin" and env["PYTHONPATH"] == "/src"
    assert "SECRET" not in env
    assert env["HOME"].startswith("/run/folio") and env["TMPDIR"].startswith("/run/folio")
    assert env["PY_COLORS"] == "1" and env["PYTEST_FOLIO_VM"] == "1"
    assert env["PYTHONPYCACHEPREFIX"] == "/run/folio/pycache"
    assert "PY_COLORS" not in guest_env({"NO_COLOR": "1"}, colors=True)
    assert guest_env({}, colors=False)["PY_COLORS"] == "0"


def test_an_order_the_kernel_cannot_give_is_refused_in_one_line(
        fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert vm(fake, "--", "--folio-orders=0,2") == EXIT_VM_ERROR
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == ("python -m pytest_folio vm: error: kernel 6.1.0-test cannot give "
                       "block2mtd 16K folios (folios above PAGE_SIZE in a block device's "
                       "page cache need Linux 6.15 or later); pass --folio-orders the kernel "
                       "can give")
    assert not (fake / "qemu.pid").exists()  # refused before booting


def test_one_disk_per_folio_order_on_a_new_kernel(fake: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (fake / "bzImage").write_bytes(bzimage(b"", "7.2.13+deb14-amd64"))
    vm(fake, "--mtd-size", "4M", "--", "--folio-orders", "0,2,4")
    out = capsys.readouterr().out
    assert "--folio-mtd=4K=/dev/mtd0,16K=/dev/mtd1,64K=/dev/mtd2" in out
    assert "--folio-orders=0,2,4" in out


def test_the_orders_come_from_the_ini_file_pytest_selects(fake: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """The host makes the disks the guest's pytest will ask for: the ini key counts."""
    (fake / "bzImage").write_bytes(bzimage(b"", "7.2.13+deb14-amd64"))
    (fake / "pytest.ini").write_text("[pytest]\nfolio_orders = 0,2\n")
    vm(fake, "--mtd-size", "4M")
    out = capsys.readouterr().out
    assert "--folio-mtd=4K=/dev/mtd0,16K=/dev/mtd1 " in out and "--folio-orders=0,2 " in out


@pytest.mark.parametrize("how", ["-o", "PYTEST_ADDOPTS", "addopts", "-c"])
def test_the_orders_follow_pytests_precedence(fake: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch,
                                              how: str) -> None:
    """-o over the ini file, PYTEST_ADDOPTS and the ini's addopts as options, -c naming
    another ini file: whatever pytest reads, the disks follow."""
    (fake / "bzImage").write_bytes(bzimage(b"", "7.2.13+deb14-amd64"))
    (fake / "pytest.ini").write_text("[pytest]\nfolio_orders = 0,2\n")
    args = []
    if how == "-o":
        args = ["-o", "folio_orders=4"]
    elif how == "PYTEST_ADDOPTS":
        monkeypatch.setenv("PYTEST_ADDOPTS", "--folio-orders=4")
    elif how == "addopts":
        (fake / "pytest.ini").write_text("[pytest]\nfolio_orders = 0,2\n"
                                         "addopts = --folio-orders=4\n")
    else:
        (fake / "other.ini").write_text("[pytest]\nfolio_orders = 4\n")
        args = ["-c", "other.ini"]
    vm(fake, "--mtd-size", "4M", "--", *args)
    out = capsys.readouterr().out
    assert "--folio-mtd=64K=/dev/mtd0 " in out and "--folio-orders=4 " in out


def test_ini_orders_the_kernel_cannot_give_are_refused(fake: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    (fake / "bzImage").write_bytes(bzimage(b"", "7.2.13+deb14-amd64"))
    (fake / "pyproject.toml").write_text("[tool.pytest.ini_options]\nfolio_orders = [0, 5]\n")
    assert vm(fake) == EXIT_VM_ERROR
    assert "cannot give block2mtd 128K folios" in capsys.readouterr().err


@pytest.mark.parametrize(("ini", "args", "message"), [
    ("folio_orders = 0,x", [], "ini key folio_orders: "),
    ("", ["--folio-block-sizes="], "--folio-block-sizes: needs a value, not an empty"),
    ("", ["--no-such-option"], "unrecognized arguments: --no-such-option"),
])
def test_a_setting_pytest_would_refuse_is_one_line_before_booting(
        fake: Path, capsys: pytest.CaptureFixture[str], ini: str, args: list[str],
        message: str) -> None:
    (fake / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    assert vm(fake, "--", *args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (fake / "qemu.pid").exists()


def test_order_above_64k_is_refused_on_any_kernel(fake: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (fake / "bzImage").write_bytes(bzimage(b"", "7.2.13+deb14-amd64"))
    assert vm(fake, "--", "--folio-orders=0,5") == EXIT_VM_ERROR
    assert "cannot give block2mtd 128K folios (block devices take logical blocks up to " \
        "64K)" in capsys.readouterr().err


def test_xfs_block_sizes_the_kernel_cannot_mount_are_skipped(
        fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("mkfs.xfs", path="/usr/sbin:/sbin:/usr/bin:/bin") is None:
        pytest.skip("needs mkfs.xfs (xfsprogs)")
    (fake / "bzImage").write_bytes(bzimage(b"", "7.2.13+deb14-amd64"))
    vm(fake, "--fs", "xfs", "--", "--folio-block-sizes=4k,64k,2M")
    out, err = capsys.readouterr()
    assert "folio-vm: xfs at 2M blocks: skipped (xfs blocks are at most 64K)" in err
    assert ("--folio-fs=4K=/run/folio/xfs-4K,64K=/run/folio/xfs-64K" in out
            and "--folio-block-sizes=4K,64K" in out)


def test_ramfs_lines_name_the_block_size_and_the_folio_orders_seen() -> None:
    assert device_lines("ramfs", "/run/folio/ramfs-16K 16384 16x2 1x4 ") == [
        "ramfs blocksize=16k at /run/folio/ramfs-16K (folio orders seen: 16 of order 2 "
        "(16K), 1 of order 4 (64K))"]
    assert device_lines("ramfs", "/run/folio/ramfs-4K 4096 none") == [
        "ramfs blocksize=4k at /run/folio/ramfs-4K (folio orders seen: none: no "
        "filemap:mm_filemap_add_to_page_cache tracepoint)"]
    assert device_lines("ramfs-skip", "65536 the kernel has no ramfs blocksize mount option") \
        == ["ramfs at 64K blocks: skipped (the kernel has no ramfs blocksize mount option)"]


def test_device_lines_read_like_the_spec() -> None:
    assert device_lines("mtd", "/dev/mtd1 /dev/vdb 16384 16x2 16x4 ") == [
        "/dev/mtd1: block2mtd on /dev/vdb, logical block size 16384 (16K folios)",
        "/dev/vdb: the page cache added folios 16 of order 2 (16K), 16 of order 4 (64K) "
        "(filemap:mm_filemap_add_to_page_cache)"]
    assert device_lines("mtd", "/dev/mtd0 /dev/vda 4096 none")[1] == (
        "/dev/vda: no filemap:mm_filemap_add_to_page_cache tracepoint to confirm the "
        "folio sizes")
    assert device_lines("fs", "/run/folio/xfs-16K xfs /dev/vde 16384") == [
        "/run/folio/xfs-16K: xfs on /dev/vde, block size 16384 (16K)"]


def test_kernel_version_from_release() -> None:
    assert kernel_version("7.2.13+deb14-amd64") == (7, 2)
    assert kernel_version("6.1.0-57-amd64") == (6, 1)
    assert kernel_version("unknown") is None


def test_help_mentions_pytest_args(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["vm", "--help"])
    assert "-- PYTEST-ARGS" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["others-write", "other-owner", "env"])
def test_a_cache_others_could_write_is_refused(tmp_path: Path, how: str,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Byte code, kernels and modules from the cache run as the user: a cache someone
    else owns or may write is refused in one line before anything is read from it."""
    cache = tmp_path / "cache"
    cache.mkdir()
    args = ["--cache-dir", str(cache)]
    if how == "others-write":
        cache.chmod(0o777)
    elif how == "other-owner":
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another user needs root")
        os.chown(cache, 4242, -1)
    else:
        cache.chmod(0o775)
        monkeypatch.setenv("PYTEST_FOLIO_CACHE", str(cache))
        args = []
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["vm", *args, "--", "-x"]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f"cache {cache}: " in err, err
    assert ("writable by other users" in err) if how != "other-owner" else (
        "owned by uid 4242" in err)


def test_the_guest_keeps_the_running_tests_id_in_the_results_share(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What a timeout's report names: the test in progress and how many had finished."""
    from pytest_folio.vm import nowrunning
    share = tmp_path / "out"
    share.mkdir()
    monkeypatch.setattr(nowrunning, "GUEST_OUT", str(share))
    monkeypatch.setenv("PYTEST_FOLIO_VM", "1")
    pytester.makepyfile(test_x=f"""
        import pathlib
        def test_a():
            pass
        def test_b():
            assert pathlib.Path({str(share / "running")!r}).read_text() == \\
                "1 test_x.py::test_b\\n"
        """)
    pytester.runpytest_inprocess("-p", "pytest_folio.vm.nowrunning").assert_outcomes(
        passed=2)
    written = (share / "running").stat().st_mtime
    assert nowrunning.describe(share, written + 30) == (
        "it was running test_x.py::test_b for 30 s, after 1 finished test(s)")
    assert nowrunning.describe(tmp_path, time.time()) == ""   # no test started


def test_the_running_test_is_kept_only_inside_a_guest(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pytest_folio.vm import nowrunning
    monkeypatch.setattr(nowrunning, "GUEST_OUT", str(tmp_path))
    monkeypatch.delenv("PYTEST_FOLIO_VM", raising=False)
    pytester.makepyfile(test_x="def test_a():\n    pass\n")
    pytester.runpytest_inprocess("-p", "pytest_folio.vm.nowrunning").assert_outcomes(
        passed=1)
    assert not (tmp_path / "running").exists()
