"""Every file the package writes where others may write goes through
:func:`pytest_folio.files.write_file`: a symlink planted at the final name or at a
predictable temporary name is replaced, never followed, and nothing is half written."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_folio.files import write_file
from pytest_folio.fixtures.hypothesis import MachineRun
from pytest_folio.fsx.artifacts import save_failure
from pytest_folio.fsx.log import LogEntry, write_fsxops
from pytest_folio.timing.storage import TimingRun, save_run
from tests.helpers import subprocess_env

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pytest_folio/**/*.py", "fixtures/*.py", "suites/**/*.py")
# a direct write is fine in a directory only this user can write: the VM runner's own
# temporary directories and its cache (refused when others own or may write it)
PRIVATE_DIRS = ("pytest_folio/vm/",)
PRIVATE = {
    "pytest_folio/mtdtests/kernel_modules.py",       # a sysfs parameter, not a file
    "pytest_folio/mtdtests/kernel_blockdev.py",      # /proc/sys/vm/drop_caches, not a file
    "pytest_folio/mtdtests/guest.py",      # the guest's results share (vm's own)
    "pytest_folio/targets/directory.py",             # the target's own scratch directory
}
_WRITES = re.compile(r"write_text\(|write_bytes\(|(?<![\w.])open\([^)]*,\s*['\"][wax]b?\+?['\"]|"
                     r"shutil\.copy(?!fileobj)|os\.replace\(|"
                     r"\.open\(['\"][wax]b?\+?['\"](\)|,\s*(encoding|newline|buffering))|"
                     r"savefig\((?!image\b)|os\.open\([^)]*O_CREAT")
# removals: only pytest_folio/files.py's remove_owned (by marker) and what made the path
# itself a moment before (a target's own mkdtemp scratch, its probe file, a mount point)
_REMOVES = re.compile(r"shutil\.rmtree\(|os\.(remove|unlink|rmdir|removedirs)\(|"
                      r"\.unlink\(\)|\.unlink\(missing_ok|\.rmdir\(\)")
OWN_REMOVALS = {
    "pytest_folio/targets/directory.py",    # its mkdtemp scratch, its O_EXCL probe file
    "pytest_folio/targets/kernel_ramfs.py",  # its mkdtemp mount point, once unmounted
    "pytest_folio/targets/fs.py",           # the probe directory it has just made
    "pytest_folio/files.py",
}
OWN_REMOVAL_LINES = {   # the mkdtemp just made
    ("fixtures/failures.py", "old.rmdir()"),
    ("pytest_folio/ktap/run.py", "shutil.rmtree(scratch, ignore_errors=True)   # ours, made above"),
}


def _lines(pattern: re.Pattern[str], skip: set[str]) -> list[str]:
    found = []
    for path in sorted({p for glob in SOURCES for p in ROOT.glob(glob)}):
        name = str(path.relative_to(ROOT))
        if name in skip or name.startswith(PRIVATE_DIRS):
            continue
        found += [f"{name}:{n}: {line.strip()}"
                  for n, line in enumerate(path.read_text().splitlines(), 1)
                  if pattern.search(line) and (name, line.strip()) not in OWN_REMOVAL_LINES]
    return found


def test_every_write_outside_private_directories_goes_through_write_file() -> None:
    found = _lines(_WRITES, PRIVATE | {"pytest_folio/files.py"})
    assert not found, found


def test_every_removal_is_of_what_the_package_made() -> None:
    found = _lines(_REMOVES, OWN_REMOVALS)
    assert not found, found


def _plant(directory: Path, names: list[str]) -> Path:
    victim = directory / "victim"
    victim.write_text("keep")
    for name in names:
        (directory / name).symlink_to(victim)
    return victim


@pytest.mark.parametrize("writer", ["fsx-failure", "fsxops", "timing", "write_file"])
def test_a_planted_symlink_is_replaced_not_followed(tmp_path: Path, writer: str) -> None:
    names = {"fsx-failure": ["t.fsxops", "t.fsxops.tmp", "t.fsxgood", "t.dat", "t.fsxlog"],
             "fsxops": ["t.fsxops", "t.fsxops.tmp"], "timing": ["t.json"],
             "write_file": ["t"]}[writer]
    victim = _plant(tmp_path, names)
    log = [LogEntry(op=1, args=(0, 4096, 0))] if writer != "timing" else []
    if writer == "fsx-failure":
        save_failure(tmp_path / "t", log, 0, b"good", b"held", "f", lambda _: None, [])
    elif writer == "fsxops":
        write_fsxops(tmp_path / "t.fsxops", log)
    elif writer == "timing":
        save_run(TimingRun(records=[]), tmp_path / "t.json")
    else:
        write_file(tmp_path / "t", b"x")
    assert victim.read_text() == "keep"
    for name in names:
        if not name.endswith(".tmp"):
            assert not (tmp_path / name).is_symlink() and (tmp_path / name).is_file()


def _machine_run(database: Path, run: str, nodeid: str) -> MachineRun:
    request = SimpleNamespace(config=SimpleNamespace(workerinput={"testrunuid": run}),
                              node=SimpleNamespace(nodeid=nodeid))
    return MachineRun(request, "quick", 1, database)  # type: ignore[arg-type]


def test_shrink_claims_are_one_per_group_and_only_the_plugins_are_pruned(
        tmp_path: Path) -> None:
    assert _machine_run(tmp_path, "r1", "t1").claim("a/b") is None
    assert _machine_run(tmp_path, "r1", "t2").claim("a:b") is None   # cleans up alike
    assert _machine_run(tmp_path, "r1", "t3").claim("a/b") == "t1"
    [made] = tmp_path.glob("claims-*")
    mine = tmp_path / "claims-mine"
    mine.mkdir()
    (mine / "claim-data").write_text("mine")
    for old in (made, mine):
        os.utime(old, (0, 0))
    assert _machine_run(tmp_path, "r2", "t1").claim("a/b") is None   # a new run prunes
    assert not made.exists()
    assert (mine / "claim-data").read_text() == "mine"


DIFFERENTIAL = ("-p", "pytest_folio", "--pyargs", "pytest_folio.suites.test_fs_differential",
                "--folio-fs=tests.helpers.fsx_broken:OAppendIgnored",
                "--folio-block-sizes=16k", "--folio-fsx-seed=7")


def test_the_differential_log_replaces_a_planted_symlink(pytester: pytest.Pytester) -> None:
    keep = pytester.path / "kept"
    keep.mkdir()
    victim = _plant(keep, ["differential-16K.fsdiff"])
    result = pytester.runpytest(*DIFFERENTIAL, "-p", "no:cacheprovider",
                                f"--folio-fsx-dir={keep}")
    result.assert_outcomes(failed=2)    # [16K] and its bounded-cache run, a log each
    assert victim.read_text() == "keep"
    log = keep / "differential-16K.fsdiff"
    assert not log.is_symlink() and log.read_text().startswith("# pytest-folio differential")


def _snapshot(top: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``top`` with its size and mtime (Python's own byte-code caches
    and the tools' caches aside)."""
    skip = {".git", "__pycache__", ".mypy_cache", ".ruff_cache"}
    seen = {}
    for path, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in [*dirs, *files]:
            st = os.lstat(os.path.join(path, name))
            seen[os.path.relpath(os.path.join(path, name), top)] = (st.st_size, st.st_mtime_ns)
    return seen


def test_a_printed_replay_runs_where_the_user_runs_and_writes_nothing_elsewhere(
        pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> None:
    result = pytester.runpytest(*DIFFERENTIAL)
    result.assert_outcomes(failed=2)    # [16K] and its bounded-cache run
    replay = next(x for x in result.stdout.lines if x.startswith("replay: "))
    words = shlex.split(replay[len("replay: "):])
    assert words[:3] == ["python", "-m", "pytest"]
    assert "--pyargs" in words and not any(str(ROOT) in w for w in words), words
    fresh = tmp_path_factory.mktemp("elsewhere")
    project, checkout = _snapshot(pytester.path), _snapshot(ROOT)
    again = subprocess.run([sys.executable, *words[1:]], cwd=fresh, capture_output=True,
                           text=True, timeout=300, check=False,
                           env=subprocess_env(PYTHONDONTWRITEBYTECODE="1"))
    assert again.returncode == 1 and "differential: op " in again.stdout, again.stdout
    assert f"rootdir: {fresh}" in again.stdout
    assert (fresh / ".folio" / "failures").is_dir()       # its own failure kept here
    assert _snapshot(pytester.path) == project
    assert _snapshot(ROOT) == checkout
