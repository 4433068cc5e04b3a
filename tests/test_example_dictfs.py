"""examples/own_fs's DictFS is a user's model: it keeps Linux's name rules, so the
differential test (on by default for a user's file system) finds no difference from the
reference, over many seeds, and each rule it keeps is Linux's errno."""

from __future__ import annotations

import errno
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any, cast

import pytest

from pytest_folio.errors import errno_of
from pytest_folio.fsx.differential import common, compare, generate
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.targets.protocols import AnyFileSystem
from tests.helpers import CHECKOUT


def _dictfs() -> Any:
    spec = importlib.util.spec_from_file_location(
        "example_dictfs", CHECKOUT / "examples" / "own_fs" / "dictfs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


DICTFS = _dictfs()


@pytest.mark.parametrize("seed", range(1, 9))
def test_dictfs_matches_the_reference_call_by_call(seed: int) -> None:
    target = cast(AnyFileSystem, DICTFS.DictFS(blocksize=4096))
    oracle = Ramfs(blocksize=4096, features="full")
    families = common(target, oracle)
    assert {"directories", "rename_directories", "mmap"} <= families
    compare(target, oracle, generate(seed, families, count=600))


def _tree(fs: Any) -> Any:
    """``d/f``, a file in a directory, and ``g``, an empty directory."""
    fs.mkdir("d")
    fs.mkdir("g")
    fs.close(fs.open("d/f", os.O_CREAT | os.O_RDWR))
    return fs


CASES: list[tuple[str, Callable[[Any], object], int]] = [
    ("a name of 256 bytes", lambda fs: fs.open("n" * 256, os.O_CREAT | os.O_RDWR),
     errno.ENAMETOOLONG),
    ("a directory name of 256 bytes on the way",
     lambda fs: fs.stat("n" * 256 + "/f"), errno.ENAMETOOLONG),
    ("a file on the way", lambda fs: fs.open("d/f/g", os.O_CREAT | os.O_RDWR),
     errno.ENOTDIR),
    ("a trailing slash on a file", lambda fs: fs.stat("d/f/"), errno.ENOTDIR),
    ("O_CREAT with a trailing slash", lambda fs: fs.open("d/new/", os.O_CREAT | os.O_RDWR),
     errno.EISDIR),
    ("a directory opened for writing", lambda fs: fs.open("d", os.O_RDWR), errno.EISDIR),
    ("O_CREAT|O_EXCL over a directory",
     lambda fs: fs.open("d", os.O_CREAT | os.O_EXCL | os.O_RDONLY), errno.EEXIST),
    ("mkdir over a file", lambda fs: fs.mkdir("d/f"), errno.EEXIST),
    ("rmdir of a non-empty directory", lambda fs: fs.rmdir("d"), errno.ENOTEMPTY),
    ("unlink of a directory", lambda fs: fs.unlink("d"), errno.EISDIR),
    ("rename of a file over a directory", lambda fs: fs.rename("d/f", "g"), errno.EISDIR),
    ("rename of a directory over a file", lambda fs: fs.rename("g", "d/f"), errno.ENOTDIR),
    ("rename over a non-empty directory", lambda fs: fs.rename("g", "d"), errno.ENOTEMPTY),
    ("rename of a directory into itself", lambda fs: fs.rename("d", "d/x"), errno.EINVAL),
    ("rename over its own ancestor", lambda fs: fs.rename("d/f", "d"), errno.ENOTEMPTY),
    ("rename of a file with a trailing slash", lambda fs: fs.rename("d/f", "g/"),
     errno.ENOTDIR),
]


@pytest.mark.parametrize(("what", "call", "code"), CASES, ids=[c[0] for c in CASES])
def test_dictfs_keeps_linuxs_name_rules(what: str, call: Callable[[Any], object],
                                        code: int) -> None:
    assert errno_of(lambda: call(_tree(DICTFS.DictFS()))) == code
    assert errno_of(lambda: call(_tree(Ramfs(blocksize=4096)))) == code  # as Linux says


def test_a_directory_moves_with_its_files() -> None:
    fs = _tree(DICTFS.DictFS())
    fd = fs.open("d/f", os.O_RDWR)
    fs.pwrite(fd, b"kept", 0)
    fs.rename("d", "g")                      # over an empty directory
    assert fs.listdir("") == ["g"] and fs.listdir("g") == ["f"]
    assert fs.pread(fs.open("g/f", os.O_RDONLY), 4, 0) == b"kept"
    assert fs.pread(fd, 4, 0) == b"kept"     # the descriptor follows its file
