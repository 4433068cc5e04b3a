"""Variants of the fresh file systems, each one choice a user might make differently."""

from __future__ import annotations

import os
import stat
from typing import Any

from tests.helpers.fresh2.flatfs import FlatFS
from tests.helpers.fresh2.treefs import Dir, Inode, TreeFS


class ProbedTreeFS(TreeFS):
    """TreeFS without a ``features`` list: the kit probes its fallocate modes."""

    features = None  # type: ignore[assignment]

    def __getattribute__(self, name: str) -> Any:
        if name == "features":
            raise AttributeError(name)
        return super().__getattribute__(name)


class NoBlocksTreeFS(TreeFS):
    """stat results built the short way, os.stat_result of ten fields: no st_blocks or
    st_blksize (they read as None), as many simple FUSE file systems leave them."""

    def _stat(self, node: Inode | Dir) -> os.stat_result:
        if isinstance(node, Dir):
            return os.stat_result((stat.S_IFDIR | 0o755, 0, 0, 2, 0, 0, 0, 0, 0, 0))
        return os.stat_result((stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, node.size, 0, 0, 0))


def probed(blocksize: int) -> ProbedTreeFS:
    return ProbedTreeFS(blocksize)


def noblocks(blocksize: int) -> NoBlocksTreeFS:
    return NoBlocksTreeFS(blocksize)


def kwargs_flat(**kwargs: Any) -> FlatFS:
    """A factory that takes everything as keywords (so no cache_bytes is promised)."""
    return FlatFS(kwargs["blocksize"])
