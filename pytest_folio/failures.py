"""Failure logs that outlive the run: ``--folio-failures DIR`` (default ``.folio/failures``).

pytest removes a test's ``tmp_path`` after three newer runs, so a replay command pointing
there stops working a few runs later. Every suite that fails with a log (``.fsxops``,
``.fsxgood``, ``.fsxlog``, ``.dat``, ``.mtdops``, the shrunk logs) copies it here, under
one directory per test id, and prints the replay command with the copy's path. A test's
directory holds its latest failure only; the newest :data:`KEEP` test directories are
kept, older ones are removed.

Copies are created exclusively, without following a symlink someone else planted.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from pytest_folio.session import settings

KEEP = 50


def failures_root(config: pytest.Config) -> Path | None:
    """The run's failures directory (relative paths under the rootdir), None when off."""
    chosen = settings(config).failures
    if chosen is None:
        return None
    return chosen if chosen.is_absolute() else Path(config.rootpath) / chosen


def failure_dir_name(item: pytest.Item) -> str:
    """A directory name for a test: its file's name and the rest of its id, as in
    ``test_fsx.py__TestFsx__test_fsx_4K`` (a suite run by ``--pyargs`` from outside the
    rootdir has no file in its id)."""
    name = "::".join([item.path.name, *item.nodeid.split("::")[1:]])
    return re.sub(r"[^\w.-]+", "_", name.replace("::", "__")).strip("_.")[:200] or "test"


def _copy(src: Path, dest: Path) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with open(src, "rb") as inp, os.fdopen(os.open(dest, flags, 0o644), "wb") as out:
        shutil.copyfileobj(inp, out)


def _prune(root: Path, keep: int) -> None:
    """Remove all but the ``keep`` newest test directories (other processes may be doing
    the same: whatever is already gone is fine)."""
    dirs = []
    for entry in root.iterdir():
        try:
            if entry.is_dir() and not entry.is_symlink():
                dirs.append((entry.stat().st_mtime, entry))
        except OSError:
            continue
    for _, old in sorted(dirs, reverse=True)[keep:]:
        shutil.rmtree(old, ignore_errors=True)


def keep_failure(item: pytest.Item, *paths: Path) -> list[Path]:
    """Copy ``paths`` (those that exist) to the test's failures directory, replacing its
    previous failure's files; returns where each now is (the original path when the
    directory is off or cannot be written: the failure itself matters more)."""
    root = failures_root(item.config)
    if root is None:
        return list(paths)
    dest = root / failure_dir_name(item)
    kept: list[Path] = []
    try:
        root.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
            dest.unlink()
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir()
        for path in paths:
            if path.is_file():
                _copy(path, dest / path.name)
                kept.append(dest / path.name)
            else:
                kept.append(path)
        _prune(root, KEEP)
    except OSError as exc:
        item.add_report_section("call", "folio", f"could not keep the failure's logs in "
                                                 f"{dest}: {exc}")
        return list(paths)
    return kept
