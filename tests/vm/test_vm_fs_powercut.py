"""``vm --power-cut --fs xfs|ext4``: the cut boot's run and the check boot's replay, on the
catalogue's power-cut file systems and on real directories standing in for the guest's
scratch file systems; the runner's defaults and module order; and one real pair of boots
(``vm_boot``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_folio.cli import main
from pytest_folio.fsx import guest as fscut
from pytest_folio.fsx.guest import (
    LOG_NAME,
    KernelPowerCutError,
    NamesSynced,
    check_after_cut,
    cut_directory,
    cut_ops,
    run_until_cut,
)
from pytest_folio.fsx.powercut import FsPowerCutRun, data_of
from pytest_folio.targets import syscalls
from pytest_folio.vmabi import POWERCUT_ENV
from tests.helpers.fsx_powercut import (
    FsyncCommitsWithoutTheData,
    FsyncLeavesTheNameBehind,
    PowerCutFS,
    SizeBeforeData,
)
from tests.vm.test_vm_boot import MISSING, leftover_qemus
from tests.vm.test_vm_powercut import outside_the_vm, suite_run


def _cut_and_check(fs: PowerCutFS, out: Path, seed: int) -> fscut.CheckResult:
    """The two boots on one of the catalogue's file systems: the run, its power cut, the
    check from the log alone."""
    run_until_cut({"4K": fs}, seed, out)
    fs.power_cut()
    return check_after_cut("4K", out, open_fs=lambda path: fs)


def test_cut_ops_end_unsynced_and_repeat_for_the_seed() -> None:
    ops = cut_ops(7)
    assert ops == cut_ops(7) != cut_ops(8)
    assert "cut" not in {op.kind for op in ops}
    assert {"write", "truncate", "fsync", "rename"} <= {op.kind for op in cut_ops(1)}
    assert ops[-1].kind != "fsync"  # the cut falls after unsynced changes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_correct_file_system_passes_after_the_cut(tmp_path: Path, seed: int) -> None:
    result = _cut_and_check(PowerCutFS(), tmp_path, seed)
    assert result.problem is None, result.summary
    assert re.match(r"4K \(4K blocks\): \d+ operations, then the power cut; \d files found",
                    result.summary), result.summary


@pytest.mark.parametrize("bug", [FsyncCommitsWithoutTheData, SizeBeforeData,
                                 FsyncLeavesTheNameBehind])
def test_the_catalogues_crash_only_bugs_are_caught(tmp_path: Path, bug: type) -> None:
    problems = []
    for seed in range(1, 9):
        out = tmp_path / str(seed)
        out.mkdir()
        problem = _cut_and_check(bug(), out, seed).problem
        if problem is not None:
            problems.append(problem)
            last = cut_ops(seed)[-1]
            assert problem.startswith(f"power cut after op {len(cut_ops(seed)) - 1} "
                                      f"({last}) of seed {seed}: "), problem
    assert problems, f"{bug.__name__} passed eight runs"


def test_on_a_directory_an_uncut_run_reads_as_its_last_changes(tmp_path: Path) -> None:
    root = cut_directory(tmp_path)
    run_until_cut({"4K": NamesSynced(root)}, 1, tmp_path)
    result = check_after_cut("4K", tmp_path)
    assert result.problem is None, result.summary
    assert f"{root} (4K blocks)" in result.summary
    assert "last change" in result.summary


def test_a_byte_of_an_fsynced_file_changed_is_caught(tmp_path: Path) -> None:
    root = cut_directory(tmp_path)
    run_until_cut({"4K": NamesSynced(root)}, 1, tmp_path)
    # a file unchanged since its fsync: its bytes must read back exactly
    replay = FsPowerCutRun(None)
    replay.run(cut_ops(1))
    synced = next(f.name for f in replay.files
                  if len(f.versions) == 1 and f.durable and f.name and f.now)
    path = root / synced
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x5A
    path.write_bytes(bytes(data))
    problem = check_after_cut("4K", tmp_path).problem
    assert problem is not None
    assert re.search(rf"of seed 1: file '{synced}' broke fsync's promise: byte "
                     rf"{len(data) // 2:#x} \(of "
                     rf"{len(data)}\) read {data[len(data) // 2]:#04x}, allowed", problem)


def test_an_fsynced_file_gone_is_caught(tmp_path: Path) -> None:
    root = cut_directory(tmp_path)
    run_until_cut({"4K": NamesSynced(root)}, 1, tmp_path)
    for name in os.listdir(root):
        os.unlink(root / name)
    problem = check_after_cut("4K", tmp_path).problem
    assert problem is not None and "is missing" in problem


def test_a_name_nobody_had_is_caught(tmp_path: Path) -> None:
    root = cut_directory(tmp_path)
    run_until_cut({"4K": NamesSynced(root)}, 1, tmp_path)
    (root / "z").write_bytes(data_of(cut_ops(1)[0]))
    problem = check_after_cut("4K", tmp_path).problem
    assert problem is not None and "no file was named 'z'" in problem


def test_the_guests_fsync_also_syncs_the_directory(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fs = NamesSynced(cut_directory(tmp_path))
    fd = fs.open("a", os.O_RDWR | os.O_CREAT)
    synced: list[str] = []
    real = os.fsync

    def fsync(n: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{n}"))
        real(n)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(syscalls, "fsync", fsync)     # the directory target's raw call
    fs.fsync(fd)
    fs.umount()
    assert synced == [str(Path(fs.root) / "a"), fs.root]


def test_the_file_system_of_a_path_is_its_deepest_mount() -> None:
    mounts = ("rootfs / 9p ro 0 0\ntmpfs /run tmpfs rw 0 0\n"
              "/dev/vdb /run/folio/xfs-4K xfs rw 0 0\nramfs /run/folio/ramfs ramfs rw 0 0\n"
              "/dev/vdc /run/folio/my\\040disk ext4 rw 0 0\n")
    assert fscut.fs_type(Path("/run/folio/xfs-4K"), mounts) == "xfs"
    assert fscut.fs_type(Path("/run/folio/xfs-4K/powercut"), mounts) == "xfs"
    assert fscut.fs_type(Path("/run/folio/xfs-4"), mounts) == "tmpfs"
    assert fscut.fs_type(Path("/run/folio/ramfs"), mounts) == "ramfs"
    assert fscut.fs_type(Path("/run/folio/my disk"), mounts) == "ext4"
    assert fscut.fs_type(Path("/usr"), mounts) == "9p"
    assert fscut.fs_type(Path("/usr"), "") == ""


def test_the_check_without_the_cut_boot_log_says_so(tmp_path: Path) -> None:
    with pytest.raises(KernelPowerCutError, match=f"no {LOG_NAME} on the results share"):
        check_after_cut("4K", tmp_path)
    run_until_cut({"4K": PowerCutFS()}, 1, tmp_path)
    with pytest.raises(KernelPowerCutError, match=r"wrote no 16K file system \(it had 4K\)"):
        check_after_cut("16K", tmp_path)


def test_power_cut_with_a_scratch_fs_defaults_to_the_fs_suite(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, list[str]] = {}
    monkeypatch.setattr("pytest_folio.vm.runner.VMRun.execute",
                        lambda self: seen.setdefault("args", self.opts.pytest_args) and 0)
    assert main(["vm", "--power-cut", "--fs", "xfs"]) == 0
    assert seen["args"] == ["--pyargs", "pytest_folio.suites.test_kernel_fs_powercut", "-rP"]


def test_the_suite_skips_outside_the_vm() -> None:
    out = outside_the_vm("pytest_folio.suites.test_kernel_fs_powercut")
    assert "python -m pytest_folio vm --power-cut --fs xfs" in out
    summary = out.strip().splitlines()[-1]     # ("passed" may be in a stale-failures note)
    assert re.search(r"\b\d+ skipped\b", summary) and "passed" not in summary, out


@pytest.mark.skipif(fscut.fs_type(Path("/dev/shm")) != "tmpfs",
                    reason="/dev/shm is no tmpfs here")
def test_the_cut_boot_refuses_a_file_system_without_a_disk() -> None:
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        proc = suite_run("pytest_folio.suites.test_kernel_fs_powercut", f"--folio-fs=4K={shm}",
                         "--folio-block-sizes=4K", "--folio-allow-destructive",
                         guest={"PYTEST_FOLIO_VM": "1", POWERCUT_ENV: "cut"})
        assert os.listdir(shm) == []
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{shm} is tmpfs, which keeps nothing on a disk" in proc.stdout


MKFS_XFS = shutil.which("mkfs.xfs", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")


@pytest.mark.slow
@pytest.mark.vm_boot
@pytest.mark.skipif(MISSING is not None, reason=str(MISSING))
@pytest.mark.skipif(MKFS_XFS is None, reason="mkfs.xfs not found (apt-get install xfsprogs)")
def test_real_power_cut_keeps_what_xfs_fsynced(tmp_path: Path) -> None:
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_folio", "vm", "--power-cut", "--fs", "xfs",
         "--mtd-size", "4M", "--timeout", "400", "--", "--pyargs",
         "pytest_folio.suites.test_kernel_fs_powercut", "-rP", "--folio-orders=0",
         "--folio-block-sizes=4K", "--folio-seed=1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "folio-vm: power cut: qemu killed" in proc.stderr
    assert re.search(r"/run/folio/xfs-4K/powercut \(4K blocks\): \d+ operations, then the "
                     r"power cut; \d files found", proc.stdout), proc.stdout
    assert "1 passed" in proc.stdout
    assert leftover_qemus() == []
