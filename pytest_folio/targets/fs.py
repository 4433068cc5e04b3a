"""``--folio-fs``: which FileSystem the suites run against.

- ``reference`` / ``reference:features=full,memory=256M``: the bundled ramfs, mounted at
  the parametrized block size;
- a directory: a real mounted file system; suites work in a fresh subdirectory of it (a
  size map, ``4K=/mnt/a,16K=/mnt/b``, names one per block size);
- ``package.module:factory`` or an entry-point name: ``factory(blocksize=..., root=...)``
  returns the user's FileSystem (``root`` is an empty scratch directory it may use); a
  factory that also takes ``cache_bytes`` gets a small one on part of the runs, to bound
  its cache and force eviction (:func:`takes_cache_bytes`).

The spec is resolved once, at configure time, so bad input is one line before any test
runs; :meth:`FsTarget.open` then hands out a fresh file system per test.
"""

from __future__ import annotations

import dataclasses
import inspect
import mmap
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.sizes import format_size, parse_size
from pytest_folio.targets.answers import FS_RULES, answering
from pytest_folio.targets.base import Knob, Target
from pytest_folio.targets.capabilities import supports
from pytest_folio.targets.directory import directory_filesystem
from pytest_folio.targets.protocols import (
    AnyFileSystem,
    DropCaches,
    FileSystem,
    Unmountable,
)
from pytest_folio.targets.spec import TargetError

OPTION = "--folio-fs"
ORACLE_OPTION = "--folio-fs-oracle"
ORACLE_OFF = "none"              # --folio-fs-oracle=none: differential mode off


def _memory(value: str) -> int:
    """The model's physical memory: whole pages, and reservable now (an anonymous
    mapping, untouched, costs nothing), so it fails here rather than in every test."""
    size = parse_size(value)
    if size < PAGE_SIZE or size % PAGE_SIZE:
        raise ValueError(f"must be a positive multiple of the page size ({PAGE_SIZE})")
    try:
        mmap.mmap(-1, size).close()
    except (OSError, OverflowError) as exc:
        raise ValueError(f"cannot reserve {format_size(size)} of memory: {exc}") from None
    return size


class FsTarget(Target[AnyFileSystem]):
    """A resolved ``--folio-fs``: what to mount for each test."""

    option = OPTION
    protocol = FileSystem   # the core is checked; the optional calls are asked for
    capability_kind = "fs"
    what = "a FileSystem"
    reference = "file system"
    path_noun = "directory"
    size_name = "blocks"
    factory_keywords = ("blocksize", "root", "cache_bytes")
    KNOBS: ClassVar[tuple[Knob, ...]] = (
        Knob("features", ("default", "full")),
        Knob("memory", parse=_memory, metavar="SIZE"),
    )

    @property
    def takes_cache_bytes(self) -> bool:
        """Whether the target is a factory that takes ``cache_bytes``: the kit bounds
        its cache on part of the runs."""
        return self.kind == "factory" and takes_cache_bytes(self.spec.factory)

    @contextmanager
    def open(self, blocksize: int | None,
             scratch: str | os.PathLike[str] | None = None,
             cache_bytes: int | None = None) -> Iterator[AnyFileSystem]:
        """A fresh file system for one test; torn down afterwards even if the test failed.

        ``blocksize`` is ignored by a single directory; ``scratch`` is an empty directory
        handed to a factory as ``root`` (a new temporary one when not given);
        ``cache_bytes``, when given, to a factory that takes it.
        """
        if self.kind == "path":
            with directory_filesystem(self.path_at(blocksize)) as dfs:
                yield dfs
            return
        if blocksize is None:
            raise TargetError(f"{OPTION} {self.label}: needs a block size")
        if self.kind == "reference":
            from pytest_folio.model.ramfs import Ramfs

            ramfs = Ramfs(blocksize=blocksize, **self.options)
            try:
                yield ramfs
            finally:  # now, not when the cycle collector finds the model's objects
                ramfs.umount()
                ramfs.memory.release()
            return
        if scratch is None:
            with (tempfile.TemporaryDirectory(prefix="pytest-folio-fs-") as tmp,
                  self.open(blocksize, tmp, cache_bytes) as fs):
                yield fs
            return
        bound = {} if cache_bytes is None else {"cache_bytes": cache_bytes}
        fs = answering(self.call_factory(blocksize=blocksize, root=os.fspath(scratch),
                                         **bound), FS_RULES)
        try:
            yield fs
        finally:
            if isinstance(fs, Unmountable):
                fs.umount()

    @classmethod
    def check_made(cls, made: Any) -> str | None:
        """A block size that is a positive int, features (when it has them) a set of
        names."""
        blocksize = made.blocksize
        features: object = getattr(made, "features", frozenset())
        if isinstance(blocksize, bool) or not isinstance(blocksize, int) or blocksize <= 0:
            return f"returned a file system whose blocksize is {blocksize!r}, not a positive int"
        if (not isinstance(features, (set, frozenset))
                or not all(isinstance(f, str) for f in features)):
            return (f"returned a file system whose features are {features!r}, not a "
                    "frozenset of names")
        return None

    @classmethod
    def check_path_at(cls, size: int | None, path: Path, option: str) -> None:
        try:
            path.stat()
        except FileNotFoundError:
            raise TargetError(f"{option}: {path} does not exist") from None
        except (OSError, ValueError) as exc:  # a name too long, a NUL byte, no permission
            raise TargetError(f"{option}: {str(path)!r} is not a usable path: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
        if not path.is_dir():
            raise TargetError(f"{option}: {path} is not a directory")
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            raise TargetError(f"{option}: {path}: is on a read-only file system")
        if not os.access(path, os.W_OK | os.X_OK):
            raise TargetError(f"{option}: {path} is not writable by this user")
        try:        # what each test does: a fresh directory in it (not in /proc, /sys)
            os.rmdir(tempfile.mkdtemp(prefix=".pytest-folio-probe-", dir=path))
        except OSError as exc:
            raise TargetError(f"{option}: {path}: cannot create a directory in it "
                              f"({exc.strerror or exc})") from None


def takes_cache_bytes(factory: Callable[..., Any] | None) -> bool:
    """Whether ``factory`` names a ``cache_bytes`` keyword parameter (``**kwargs`` alone
    says nothing: such a factory would get the bounded runs and may ignore the bound)."""
    if factory is None:
        return False
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "cache_bytes" and p.kind is not p.POSITIONAL_ONLY for p in params)


def writeback_unreached(target: FsTarget, fs: object) -> str | None:
    """The end-of-run summary's line for a factory's file system whose writeback no
    check can reach (it takes no ``cache_bytes`` and has no ``drop_caches``), else None."""
    if target.kind != "factory" or target.takes_cache_bytes or supports(fs, DropCaches):
        return None
    return (f"fs {target.label}: writeback not reached: its factory takes no cache_bytes= "
            "and it has no drop_caches(path), so no check makes its cache evict or drop "
            "(fsx's close and reopen, the bounded [4K-cache64K] runs) and data lost on "
            "writeback passes unseen; to enable them accept cache_bytes=N in the factory "
            "or add drop_caches(path) (docs/fs.md)")


def resolve_fs_target(text: str, option: str = OPTION, kind: str | None = None) -> FsTarget:
    """Parse and check ``--folio-fs``; raise TargetError with one line on bad input."""
    return FsTarget.resolve(text, option, kind)


class FsOracle(FsTarget):
    """A resolved ``--folio-fs-oracle``: the reference (every feature unless its knobs
    say otherwise) or a directory. ``reference:errors=any`` compares whether a call
    failed, not which errno it failed with (for targets that do not promise Linux's
    errno order)."""

    option = ORACLE_OPTION
    KNOBS: ClassVar[tuple[Knob, ...]] = (*FsTarget.KNOBS, Knob("errors", ("exact", "any")))

    @property
    def any_errno(self) -> bool:
        """Whether an error on both sides matches whatever the errnos."""
        return self.knobs.get("errors") == "any"


def oracle_text(text: str | None, target: FsTarget) -> str | None:
    """What ``--folio-fs-oracle`` means for ``target``: unset is ``reference`` (at the
    target's block size) unless the target is the reference itself; ``none`` is off."""
    if text is None:
        return None if target.kind == "reference" else "reference"
    return None if text.strip() == ORACLE_OFF else text


def resolve_fs_oracle(text: str | None, target: FsTarget, option: str = ORACLE_OPTION,
                      kind: str | None = None) -> FsOracle | None:
    """``--folio-fs-oracle`` for ``target`` (see :func:`oracle_text`); None when off."""
    text = oracle_text(text, target)
    if text is None:
        return None
    oracle = FsOracle.resolve(text, option, kind)
    if oracle.kind == "factory":
        raise TargetError(f"{option}: {text!r}: the oracle is reference, a directory or "
                          f"{ORACLE_OFF}")
    if oracle.kind == "reference":
        model = {k: v for k, v in oracle.options.items() if k != "errors"}
        return dataclasses.replace(oracle, knobs={"features": "full", **oracle.knobs},
                                   options={"features": "full", **model})
    return oracle


def fs_oracle_header(oracle: FsOracle | None) -> str:
    """The run header's line about differential mode."""
    if oracle is None:
        return (f"folio: fs oracle none (differential tests off; {ORACLE_OPTION}=DIR compares "
                f"--folio-fs with a directory)")
    return (f"folio: fs oracle {oracle.label} (the differential tests compare --folio-fs "
            f"with it; {ORACLE_OPTION}={ORACLE_OFF} turns them off)")
