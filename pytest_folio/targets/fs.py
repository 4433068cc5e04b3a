"""``--folio-fs``: which FileSystem the suites run against (SPEC section 4).

- ``reference`` / ``reference:features=full,memory=256M``: the bundled ramfs, mounted at
  the parametrized block size;
- a directory: a real mounted file system; suites work in a fresh subdirectory of it;
- ``package.module:factory`` or an entry-point name: ``factory(blocksize=..., root=...)``
  returns the user's FileSystem (``root`` is an empty scratch directory it may use).

The spec is resolved once, at configure time, so bad input is one line before any test
runs; :meth:`FsTarget.mount` then hands out a fresh file system per test.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.sizes import format_size, parse_size
from pytest_folio.targets.directory import directory_filesystem
from pytest_folio.targets.protocols import FileSystem
from pytest_folio.targets.spec import (
    TargetError,
    TargetSpec,
    parse_size_map,
    parse_target_spec,
)

OPTION = "--folio-fs"

# reference knobs: name -> parser of the value into a Ramfs keyword argument
_FEATURE_SETS = ("default", "full")


def _features(value: str) -> str:
    if value not in _FEATURE_SETS:
        raise ValueError(f"features must be one of {', '.join(_FEATURE_SETS)}, not {value!r}")
    return value


def _memory(value: str) -> int:
    """The model's physical memory: whole pages, and reservable now (an anonymous
    mapping, untouched, costs nothing), so it fails here rather than in every test."""
    size = parse_size(value)
    if size < PAGE_SIZE or size % PAGE_SIZE:
        raise ValueError(f"memory {value!r} must be a positive multiple of the page size "
                         f"({PAGE_SIZE})")
    try:
        mmap.mmap(-1, size).close()
    except (OSError, OverflowError) as exc:
        raise ValueError(f"cannot reserve {format_size(size)} of memory: {exc}") from None
    return size


REFERENCE_KNOBS: dict[str, Any] = {"features": _features, "memory": _memory}

_CALLS = ("open", "close", "pread", "pwrite", "ftruncate", "fstat", "fsync", "fallocate",
          "copy_file_range", "mmap_read", "mmap_write", "unlink", "mkdir", "rmdir", "rename",
          "listdir", "stat")


@dataclasses.dataclass(frozen=True)
class FsTarget:
    """A resolved ``--folio-fs``: what to mount for each test."""

    spec: TargetSpec
    ramfs_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    # ``4K=/mnt/a,16K=/mnt/b``: a real directory per block size (the VM's scratch file
    # systems, one made at each block size); empty for a single directory
    directories: dict[int, Path] = dataclasses.field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def per_block_size(self) -> bool:
        """A directory has its own block size; the others (and a directory per block
        size) are mounted at each one."""
        return self.spec.kind != "path" or bool(self.directories)

    def describe(self) -> str:
        return self.spec.text

    @contextmanager
    def mount(self, blocksize: int | None,
              scratch: str | os.PathLike[str] | None = None) -> Iterator[FileSystem]:
        """A fresh file system for one test; torn down afterwards even if the test failed.

        ``blocksize`` is ignored by a directory target; ``scratch`` is an empty directory
        handed to a factory as ``root`` (a new temporary one when not given).
        """
        if self.spec.kind == "path":
            path = (self.spec.path if not self.directories or blocksize is None
                    else self.directories.get(blocksize))
            if path is None:
                raise TargetError(f"{OPTION} {self.spec.text}: no directory at "
                                  f"{format_size(blocksize or 0)} blocks")
            with directory_filesystem(path) as dfs:
                yield dfs
            return
        if blocksize is None:
            raise TargetError(f"{OPTION} {self.spec.text}: needs a block size")
        if self.spec.kind == "reference":
            from pytest_folio.model.ramfs import Ramfs

            ramfs = Ramfs(blocksize=blocksize, **self.ramfs_options)
            try:
                yield ramfs
            finally:  # now, not when the cycle collector finds the model's objects
                ramfs.umount()
                ramfs.memory.release()
            return
        assert self.spec.factory is not None
        if scratch is None:
            with (tempfile.TemporaryDirectory(prefix="pytest-folio-fs-") as tmp,
                  self.mount(blocksize, tmp) as fs):
                yield fs
            return
        fs = self.spec.factory(blocksize=blocksize, root=os.fspath(scratch))
        if not isinstance(fs, FileSystem):
            missing = [name for name in ("blocksize", "features", *_CALLS)
                       if not hasattr(fs, name)]
            raise TargetError(
                f"{OPTION} {self.spec.text}: the factory returned {type(fs).__name__}, "
                f"not a FileSystem (missing: {', '.join(missing)})")
        try:
            yield fs
        finally:
            umount = getattr(fs, "umount", None)
            if callable(umount):
                umount()


def _check_directory(spec: TargetSpec, option: str) -> None:
    path = spec.path
    assert path is not None
    try:
        path.stat()
    except FileNotFoundError:
        raise TargetError(f"{option}: {spec.text} does not exist") from None
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte, no permission
        raise TargetError(f"{option}: {spec.text!r} is not a usable path: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    if not path.is_dir():
        raise TargetError(f"{option}: {spec.text} is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise TargetError(f"{option}: {spec.text} is not writable by this user")


def _reference_options(spec: TargetSpec, option: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name, value in spec.knobs.items():
        parser = REFERENCE_KNOBS.get(name)
        if parser is None:
            raise TargetError(
                f"{option}: unknown reference knob {name!r} (known: "
                f"{', '.join(sorted(REFERENCE_KNOBS))})")
        try:
            options[name] = parser(value)
        except ValueError as exc:
            raise TargetError(f"{option}: reference knob {name}: {exc}") from None
    return options


def resolve_fs_target(text: str, option: str = OPTION) -> FsTarget:
    """Parse and check ``--folio-fs``; raise TargetError with one line on bad input
    (``option`` names where the text came from: the option, or its ini key)."""
    per_size = parse_size_map(text, option)
    if per_size is not None:
        for path in per_size.values():
            _check_directory(TargetSpec("path", str(path), path=path), option)
        return FsTarget(TargetSpec("path", text.strip(), path=per_size[min(per_size)]),
                        directories=per_size)
    spec = parse_target_spec(text, option)
    if spec.kind == "path":
        _check_directory(spec, option)
        return FsTarget(spec)
    if spec.kind == "reference":
        return FsTarget(spec, _reference_options(spec, option))
    return FsTarget(spec)


ORACLE_OPTION = "--folio-fs-oracle"


def resolve_fs_oracle(text: str, option: str = ORACLE_OPTION) -> FsTarget:
    """``--folio-fs-oracle``: ``reference`` (with every feature unless its knobs say
    otherwise, so whatever the target supports is compared) or a directory."""
    target = resolve_fs_target(text, option)
    if target.kind == "factory":
        raise TargetError(f"{option}: {text!r}: the oracle is reference or a directory")
    if target.kind == "reference":
        return FsTarget(target.spec, {"features": "full", **target.ramfs_options})
    return target
