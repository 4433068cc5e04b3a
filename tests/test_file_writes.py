"""Every file the package writes where others may write goes through
:func:`pytest_folio.files.write_file`: a symlink planted at the final name or at a
predictable temporary name is replaced, never followed, and nothing is half written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_folio.files import write_file
from pytest_folio.fsx.artifacts import save_failure
from pytest_folio.fsx.log import LogEntry, write_fsxops
from pytest_folio.timing.storage import TimingRun, save_run

ROOT = Path(__file__).resolve().parent.parent
# a direct write is fine in a directory only this user can write: the VM runner's own
# temporary directories and its cache (refused when others own or may write it)
PRIVATE_DIRS = ("pytest_folio/vm/",)
PRIVATE = {
    "pytest_folio/mtdtests/kernel_modules.py",       # a sysfs parameter, not a file
    "pytest_folio/mtdtests/kernel_blockdev.py",      # /proc/sys/vm/drop_caches, not a file
    "pytest_folio/mtdtests/kernel_powercut.py",      # the guest's results share (vm's own)
    "pytest_folio/targets/directory.py",             # the target's own scratch directory
    "fixtures/hypothesis.py",                        # its own O_EXCL | O_NOFOLLOW create
}
_WRITES = re.compile(r"write_text\(|write_bytes\(|open\([^)]*['\"][wax]b?['\"]|"
                     r"shutil\.copy(?!fileobj)|os\.replace\(|\.open\(['\"][wax]")


def test_every_write_outside_private_directories_goes_through_write_file() -> None:
    found = []
    for path in [*ROOT.glob("pytest_folio/**/*.py"), *ROOT.glob("fixtures/*.py")]:
        name = str(path.relative_to(ROOT))
        if (name in PRIVATE or name.startswith(PRIVATE_DIRS)
                or name == "pytest_folio/files.py"):
            continue
        found += [f"{name}:{n}: {line.strip()}"
                  for n, line in enumerate(path.read_text().splitlines(), 1)
                  if _WRITES.search(line)]
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
