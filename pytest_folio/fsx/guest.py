"""A power cut of a real file system on a real kernel, the guest's side (``vm --power-cut
--fs xfs|ext4``): the cut boot runs the file-system power-cut suite's operations
(:func:`~pytest_folio.fsx.powercut.fs_powercut_ops`: writes, truncates, renames and
fsyncs over a few files, the cut at the end) in a directory of every scratch file system
and logs them; the check boot, after the file system's log recovery at mount, replays the
log on :class:`~pytest_folio.fsx.powercut.FsPowerCutRun` and checks every name, size and
4K page against what the cut may leave. The host's side is :mod:`pytest_folio.vm.powercut`;
the suite is ``suites/test_kernel_fs_powercut.py``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from pytest_folio.fsx.powercut import (
    KERNEL_RULES,
    FileStates,
    FsOp,
    FsPowerCutRun,
    fs_powercut_ops,
    read_files,
)
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.powercut import CheckResult, read_cut_log, write_cut_log
from pytest_folio.targets.directory import DirectoryFS
from pytest_folio.targets.protocols import FileSystem

LOG_NAME = "powercut-fs.json"
CUT_DIR = "powercut"    # the run's directory on each file system, its own name made durable
ROUNDS = 4              # rounds of the suite's "renames" schedule, the cuts between left out
SCHEDULE = "renames"


class KernelPowerCutError(Exception):
    """The check cannot start: the cut boot left no log, or none for this file system."""


class NamesSynced(DirectoryFS):
    """A directory whose fsync also fsyncs the directory: POSIX makes a new or renamed
    name durable only through its directory's fsync, so the check rests on fsync(2)'s
    promise alone, not on what a journalling file system adds to it."""

    def fsync(self, fd: int) -> None:
        super().fsync(fd)
        sync_directory(Path(self.root))


def sync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fs_type(path: Path, mounts: str | None = None) -> str:
    """The type of the file system ``path`` is on: that of the deepest mount point above
    it in ``mounts`` (/proc/mounts' text when not given); "" when none is."""
    if mounts is None:
        mounts = Path("/proc/mounts").read_text()
    best, kind = "", ""
    target = os.path.realpath(path)
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def cut_directory(mountpoint: Path) -> Path:
    """The run's directory on a freshly made file system, durable before the run starts."""
    path = mountpoint / CUT_DIR
    path.mkdir()
    sync_directory(path)
    sync_directory(mountpoint)
    return path


def cut_ops(seed: int) -> list[FsOp]:
    """The cut boot's operations: :data:`ROUNDS` rounds of changes, fsyncs and more
    changes; one boot makes one cut, at the end, after unsynced changes."""
    return [op for op in fs_powercut_ops(seed, ROUNDS, SCHEDULE) if op.kind != "cut"]


def run_until_cut(file_systems: Mapping[str, FileSystem], seed: int,
                  out: Path) -> list[FsPowerCutRun]:
    """The cut boot: run :func:`cut_ops` on every file system (by block size label) and
    write the log to ``out`` (the results share). The runs are returned with their files
    open: the power goes with them open, as a machine's does."""
    ops = cut_ops(seed)
    runs = []
    for fs in file_systems.values():
        run = FsPowerCutRun(fs, PAGE_SIZE, sync_directory=False)  # the journal's promise
        run.run(ops)
        runs.append(run)
    log = {"seed": seed, "ops": [dataclasses.asdict(op) for op in ops],
           "file_systems": {label: str(getattr(fs, "root", label))
                            for label, fs in file_systems.items()}}
    write_cut_log(out / LOG_NAME, log)
    return runs


def check_after_cut(label: str, out: Path,
                    open_fs: Callable[[str], FileSystem] = DirectoryFS,
                    rules: str = KERNEL_RULES) -> CheckResult:
    """The check boot: replay the cut boot's log on ``rules`` (ordered mode's, unless
    ``--folio-power-cut-rules`` says otherwise: ext4 and XFS promise them) and read the
    ``label`` file system's directory back (``open_fs`` opens it by the path logged)."""
    log = read_cut_log(out / LOG_NAME)
    if log is None:
        raise KernelPowerCutError(f"no {LOG_NAME} on the results share: the cut boot "
                                  "wrote no log")
    path = log["file_systems"].get(label)
    if path is None:
        raise KernelPowerCutError(f"the cut boot wrote no {label} file system (it had "
                                  f"{', '.join(log['file_systems']) or 'none'})")
    ops = [FsOp(**op) for op in log["ops"]]
    run = FsPowerCutRun(None, PAGE_SIZE, rules)
    run.run(ops)
    fs = open_fs(path)
    try:
        found = read_files(fs)
    finally:
        umount = getattr(fs, "umount", None)
        if umount is not None:
            umount()
    problem = run.match(found)
    if problem is not None:
        last = f"op {len(ops) - 1} ({ops[-1]})" if ops else "no op"
        problem = f"power cut after {last} of seed {log['seed']}: {problem}"
    return CheckResult(problem, _summary(path, label, run.assigned, found, len(ops)))


def _summary(path: str, label: str, assigned: dict[str, FileStates],
             found: dict[str, bytes], nops: int) -> str:
    """Each name found and the state its file read as: its durable one (as fsync'd, or
    empty as created), its last change, an earlier one, or a mix per page."""
    parts = []
    for name, data in found.items():
        f = assigned.get(name)
        if f is None:
            parts.append(f"{name} ({len(data)} bytes)")
            continue
        first, *later = f.versions
        durable = (f"as fsync'd by {first.how}" if ": fsync " in first.how else
                   f"as it was before {first.how}")
        versions = [v.data for v in later]
        state = (f"{durable}{', its changes since lost' if later else ''}"
                 if data == first.data else
                 f"as of its last change ({later[-1].how})" if data == versions[-1] else
                 "as of an earlier change" if data in versions else "old or new per page")
        parts.append(f"{name} ({len(data)} bytes) {state}")
    return (f"{path} ({label} blocks): {nops} operations, then the power cut; "
            f"{len(found)} files found: {'; '.join(parts) or 'none'}")
