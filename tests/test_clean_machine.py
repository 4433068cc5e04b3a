"""README command 2 on a machine with nothing but Python: a test that needs a tool the
README's commands do not install (make, flex, bison, bc, a C compiler, qemu, ssh, git,
patch, dpkg-deb, mkfs, ...) skips with the reason, it does not fail.

The project's tests that start external tools are run again with ``env -i`` and a PATH
holding only this Python, and every one must pass or skip. They are the test files that
start programs (the VM runner's, the C ABI probe, ssh, git); the rest of the suite runs
no program but Python, so this costs a fraction of a CI run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# every test file that starts a program other than Python (grep subprocess, shutil.which),
# and the VM runner's, whose code under test starts them
TOOL_USERS = ["tests/vm", "tests/targets/test_mtd_abi.py",
              "tests/targets/test_directory_faults.py", "tests/test_options_reliability.py",
              "tests/timing/test_timing_ssh.py", "tests/timing/test_timing_results.py"]


def test_the_tool_users_list_names_every_test_file_that_starts_a_program() -> None:
    """A new test file that runs a program joins the clean-machine run."""
    starters = ("shutil.which(", "subprocess.run([\"", "Popen([\"")
    found = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
             if "guest" not in p.parts and any(s in p.read_text() for s in starters)
             and p.name != Path(__file__).name}
    missing = [f for f in found if not any(f == t or f.startswith(f"{t}/")
                                           for t in TOOL_USERS)]
    assert not missing, missing


def _essential_commands() -> list[Path]:
    """The programs of this Debian's Essential packages (coreutils, dash, util-linux,
    dpkg, ...): what every fresh Debian or Ubuntu machine has, build tools excluded."""
    try:
        listed = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Essential}\n"],
                                capture_output=True, text=True, check=True).stdout
        packages = [line.split()[0] for line in listed.splitlines()
                    if line.endswith(" yes")]
        files = subprocess.run(["dpkg-query", "-L", *packages], capture_output=True,
                               text=True, check=False).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs dpkg-query to tell a fresh Debian machine's programs")
    bins = ("/bin/", "/usr/bin/", "/sbin/", "/usr/sbin/")
    return [Path(f) for f in files if f.startswith(bins) and os.access(f, os.X_OK)
            and Path(f).is_file()]


@pytest.mark.slow   # a whole pytest -n 2 over the tool users' files
def test_tests_needing_absent_tools_skip_on_a_bare_machine(tmp_path: Path) -> None:
    bare = tmp_path / "bin"     # a fresh machine's PATH: no make, cc, flex, ssh, git, qemu
    bare.mkdir()
    for program in _essential_commands():
        if not (bare / program.name).exists():
            (bare / program.name).symlink_to(program)
    env = {"PATH": str(bare), "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1"}
    # -rsf: the skips, then the failures last, where the assertion's tail shows them
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "-rsf",
         "-o", "addopts=", "--ignore=tests/vm/guest", *TOOL_USERS], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=900, check=False)
    tail = done.stdout[-3000:]
    assert done.returncode == 0, tail
    assert "skipped" in tail, tail      # the tools really were missing
