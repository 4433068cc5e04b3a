"""The files an fsx run leaves for a person: ``.fsxops``, ``.fsxgood``, ``.fsxlog``, ``.dat``.

fsx writes them beside its test file; here they go to a base path the caller chose (the
test's ``tmp_path`` or ``--folio-fsx-dir``), because a directory target's scratch
directory, and a model's file, are gone once the test ends. Each function returns the
report lines it adds, so the engine prints them where fsx does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_folio.files import write_file
from pytest_folio.fsx.log import LogEntry, write_fsxops
from pytest_folio.targets.protocols import FileSystem


def _saved_line(ops: Path) -> str:
    return f'Log of operations saved to "{ops}"; replay with --replay-ops'


def record_fsxops(base: Path, log: Sequence[LogEntry], note: str = "") -> str:
    """fsx --record-ops: keep the log of a passing run too; the line to print."""
    base.parent.mkdir(parents=True, exist_ok=True)
    return _saved_line(write_fsxops(f"{base}.fsxops", log, note=note))


def read_target_file(fs: FileSystem, path: str) -> bytes | None:
    """What the target's file holds, for the hexdump fsx suggests; None when the target
    cannot be read any more."""
    try:
        fd = fs.open(path, os.O_RDONLY)
        try:
            size = fs.fstat(fd).st_size
            return fs.pread(fd, size, 0) if size else b""
        finally:
            fs.close(fd)
    except Exception:  # a target that already failed may fail here too: keep the report
        return None


def save_failure(base: Path, log: Sequence[LogEntry], badoff: int, good: bytes,
                 held: bytes | None, fname: str, prt: Callable[[str], None],
                 lines: list[str], note: str = "") -> dict[str, Path]:
    """fsx's save_buffer()/report_failure() files: the operation log with the entries
    that touched ``badoff`` starred, what the file should hold (``good``), a copy of
    what it held (``held``, when it could be read), and the report ``lines`` so far
    (``prt`` appends to them) as ``.fsxlog``; ``note`` is the log's comment line.
    Returns the paths by kind."""
    base.parent.mkdir(parents=True, exist_ok=True)
    ops = write_fsxops(f"{base}.fsxops", log, badoff, note)
    prt(_saved_line(ops))
    good_path = write_file(f"{base}.fsxgood", good)
    prt("Correct content saved for comparison")
    saved = {"fsxops": ops, "fsxgood": good_path}
    if held is not None:
        kept = write_file(f"{base}.dat", held)
        saved["dat"] = kept
        prt(f'(maybe hexdump "{kept}" vs "{good_path}"; {kept.name} is what '
            f'{fname} held)')
    else:
        prt(f'(maybe hexdump "{fname}" vs "{good_path}")')
    log_path = write_file(f"{base}.fsxlog", "\n".join(lines) + "\n")
    return {**saved, "fsxlog": log_path}
