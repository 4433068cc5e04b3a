"""Faults under a directory target: a file system that fills up (a small tmpfs, as root)
and a run ended by SIGTERM. Each must end in one clear failure with the scratch directory
removed, never a process killed by SIGBUS or a directory left for the next run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

FULL_SIZE = "128k"  # smaller than fsx's 256 KiB file: every directory suite fills it


def _mount_tmpfs(where: Path, size: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    where.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                               str(where)], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        pytest.skip("needs mount(8) (Debian: apt-get install mount)")
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 128 KiB, unmounted afterwards."""
    where = tmp_path / "small"
    _mount_tmpfs(where, FULL_SIZE)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


@pytest.mark.parametrize("access", ["mmap_read", "mmap_write"])
def test_a_mapped_access_to_a_hole_of_a_full_tmpfs_is_enospc_not_sigbus(
        small_tmpfs: Path, access: str) -> None:
    """tmpfs backs a fault on a hole with a new page, read or write; with none left the
    kernel sends SIGBUS. Run in a child so a regression kills it, not this test run."""
    script = textwrap.dedent(f"""
        import errno, os
        from pytest_folio.targets.directory import DirectoryFS
        fs = DirectoryFS({str(small_tmpfs)!r})
        fill = fs.open("fill", os.O_CREAT | os.O_RDWR)
        try:
            while True:
                fs.pwrite(fill, b"x" * 4096, fs.fstat(fill).st_size)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        fd = fs.open("sparse", os.O_CREAT | os.O_RDWR)
        fs.ftruncate(fd, 1 << 20)
        try:
            fs.{access}(fd, 8192, {"4096" if access == "mmap_read" else 'b"y" * 4096'})
        except OSError as exc:
            print("errno", errno.errorcode[exc.errno])
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "errno ENOSPC"


# The ready-made fsx suite on the plugin's filesystem fixture (the --folio-fs target);
# the Hypothesis form with a small profile that does not shrink, so a full disk costs
# seconds, not minutes of shrinking ENOSPC.
FULL_MODULE = """
from hypothesis import Phase, settings
from pytest_folio.suites.fsx import FsxSuite

settings.register_profile("fill", max_examples=10, stateful_step_count=30, deadline=None,
                          phases=[Phase.generate])


class TestFull(FsxSuite):
    fsx_hypothesis_profile = "fill"
"""


@pytest.mark.parametrize("suite", ["test_fsx", "test_fsx_hypothesis"])
def test_every_directory_suite_on_a_full_file_system_fails_once_and_cleans_up(
        pytester: pytest.Pytester, small_tmpfs: Path, suite: str) -> None:
    pytester.makepyfile(test_full=FULL_MODULE)
    result = pytester.runpytest_subprocess(
        "-p", "pytest_folio", f"--folio-fs={small_tmpfs}", "--folio-fsx-seed=7",
        f"test_full.py::TestFull::{suite}", timeout=600)
    result.assert_outcomes(failed=1)
    out = result.stdout.str() + result.stderr.str()
    assert "Fatal Python error" not in out and "Bus error" not in out
    assert any(word in out for word in ("No space left on device", "short write"))
    assert list(small_tmpfs.iterdir()) == []      # the scratch directory is gone


def test_a_full_file_system_under_xdist_still_saves_the_runs_timings(
        pytester: pytest.Pytester, small_tmpfs: Path) -> None:
    pytester.makepyfile(test_full=FULL_MODULE, test_timed="""
        def test_timed(folio_timer):
            with folio_timer("a timed block"):
                sum(range(1000))
    """)
    saved = pytester.path / "run.json"
    result = pytester.runpytest_subprocess(
        "-p", "pytest_folio", "-n", "2", f"--folio-fs={small_tmpfs}", "--folio-fsx-seed=7",
        f"--folio-save={saved}", "test_timed.py", "test_full.py::TestFull::test_fsx",
        "test_full.py::TestFull::test_fsx_hypothesis", timeout=600)
    # the two workers share the small file system: when one has filled it before the
    # other's set-up probes it, that probe's ENOSPC makes a set-up error, not a failure
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == 1
    assert outcomes.get("failed", 0) + outcomes.get("errors", 0) == 2, outcomes
    assert "a timed block" in json.dumps(json.loads(saved.read_text()))
    assert list(small_tmpfs.iterdir()) == []


def test_sigterm_during_a_directory_target_test_removes_the_scratch_directory(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    pytester.makepyfile(test_killed="""
        import os, signal

        def test_killed(filesystem):
            fd = filesystem.open("f", os.O_CREAT | os.O_RDWR)
            filesystem.pwrite(fd, b"data", 0)
            assert os.listdir(os.path.dirname(filesystem.root))  # the scratch dir is there
            os.kill(os.getpid(), signal.SIGTERM)
    """)
    result = pytester.runpytest_subprocess("-p", "pytest_folio", f"--folio-fs={target}")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert list(target.iterdir()) == []
