"""Numbered runs under ``.folio/`` (``--folio-autosave``), in pytest-benchmark's spirit.

Each run is ``.folio/NNNN_NAME.json``: the next free number and a name from the code's
git commit (``-dirty`` with uncommitted changes), or the time outside git, followed by
what was measured: the target, and the kernel's release when a target is a real device
or directory (whose speed is the kernel's). Base and patched runs of one commit on two
kernels get two names. ``show`` and ``compare`` (and
``--folio-compare``) take a file, a run number (``3``) or a name (``1a2b3c4d-dirty``).
Two runs saving at once never take the same number: the number is chosen and claimed
(by a hard link, which fails when the name exists) under an exclusive lock on the
directory, so runs with different names cannot both take it.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
from datetime import UTC, datetime
from pathlib import Path

from pytest_folio.timing.meta import kernel_release, run_targets
from pytest_folio.timing.storage import TimingFileError, TimingRun, save_new

STORAGE = ".folio"
MODEL_TARGET = "reference"      # the model's targets: no kernel in their timings
MAX_NAME = 100                  # a run of many targets keeps a file name of sane length
_NUMBERED = re.compile(r"^(\d{4,})_(.*)\.json$")


def saved_runs(directory: Path) -> list[tuple[int, str, Path]]:
    """(number, name, path) of every numbered run in ``directory``, by number."""
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _NUMBERED.match(path.name)
        if match:
            found.append((int(match.group(1)), match.group(2), path))
    return sorted(found)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+]+", "-", text).strip("-")[:32]


def run_name(run: TimingRun) -> str:
    """``1a2b3c4d-dirty-reference-api-page``, ``20261203T182000-dev-mtd0-6.8.0-45-generic``."""
    git = run.meta.get("git") or {}
    if git.get("commit"):
        parts = [str(git["commit"])[:8] + ("-dirty" if git.get("dirty") else "")]
    else:
        parts = [datetime.now(UTC).strftime("%Y%m%dT%H%M%S")]
    targets = run_targets(run)
    parts += [_slug(t) for t in targets]
    if any(not t.startswith(MODEL_TARGET) for t in targets):
        parts.append(_slug(kernel_release(run)))
    return "-".join(p for p in parts if p)[:MAX_NAME].rstrip("-")


def check_storage(directory: Path) -> None:
    """Refuse, with one line, a ``.folio`` that could not take a run: not a directory, not
    writable, or missing where its parent cannot be written. Checked before the tests."""
    where = os.fspath(directory)
    try:
        info = directory.stat()
    except FileNotFoundError:
        parent = next((p for p in directory.parents if p.exists()), Path("."))
        if not os.access(parent, os.W_OK | os.X_OK):
            raise TimingFileError(f"{where}: cannot be created ({parent} is not "
                                  "writable)") from None
        return
    except OSError as exc:
        raise TimingFileError(f"{where}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise TimingFileError(f"{where}: is not a directory; saved runs go in a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise TimingFileError(f"{where}: directory is not writable")


def autosave(run: TimingRun, directory: Path) -> Path:
    """Save ``run`` as the next numbered run in ``directory`` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    name = run_name(run)
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)      # released when fd closes
        number = max((n for n, *_ in saved_runs(directory)), default=0) + 1
        while True:
            path = directory / f"{number:04d}_{name}.json"
            try:
                save_new(run, path)
                return path
            except FileExistsError:     # a run saved without the lock (another version)
                number += 1
    finally:
        os.close(fd)


def resolve(ref: str, directory: Path) -> Path:
    """The file ``ref`` names: a path, else a run number or name in ``directory``."""
    if os.path.lexists(ref) or not ref or os.sep in ref or ref.endswith(".json"):
        return Path(ref)
    runs = saved_runs(directory)
    if ref.isdigit():
        chosen = [p for n, _, p in runs if n == int(ref)]
    else:
        chosen = [p for _, name, p in runs if name == ref or p.stem == ref]
    if len(chosen) == 1:
        return chosen[0]
    if not runs:
        raise TimingFileError(f"{ref}: no such timing file, and no saved runs in {directory}")
    if len(chosen) > 1:
        raise TimingFileError(f"{ref}: names several saved runs in {directory} "
                              f"({', '.join(p.name for p in chosen)}); use the number")
    raise TimingFileError(f"{ref}: no such timing file or saved run in {directory} "
                          f"(runs {runs[0][0]}..{runs[-1][0]}; the latest is "
                          f"{runs[-1][2].name})")
