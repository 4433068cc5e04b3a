"""Replaying an .fsxops file written by hand in the real fsx's format, on every target."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_folio.fsx import state
from pytest_folio.fsx.config import FsxOptions
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from pytest_folio.fsx.log import (
    FL_CLOSE_OPEN,
    FL_KEEP_SIZE,
    FL_SKIPPED,
    OP_NAMES,
    parse_fsxops,
    read_fsxops,
)
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.targets.capabilities import features_of
from pytest_folio.targets.directory import directory_filesystem
from pytest_folio.targets.protocols import AnyFileSystem
from tests.helpers.fsx_broken import StaleDataAfterTruncateUp
from tests.helpers.fsx_memfs import MemFS

HANDWRITTEN = Path(__file__).parent / "data" / "handwritten.fsxops"
SHM = Path("/dev/shm")


def test_handwritten_file_parses() -> None:
    entries = read_fsxops(HANDWRITTEN)
    names = [OP_NAMES[e.op] for e in entries]
    assert len(entries) == 22
    assert names[:5] == ["write", "mapread", "truncate", "truncate", "read"]
    assert entries[6].flags == FL_KEEP_SIZE
    assert entries[11].args == (0x0, 0x800, 0x6000, 0x5000)
    assert entries[15].args == (0x6800, 16, 0x6800) and entries[15].flags == FL_CLOSE_OPEN
    assert entries[16].flags == FL_SKIPPED
    assert names[18:21] == ["clone_range", "read", "write"]  # *_dontcache/atomic: plain


@pytest.fixture(params=["memfs", "ramfs-4K", "ramfs-64K-full", "tmpfs"])
def target(request: pytest.FixtureRequest) -> Iterator[AnyFileSystem]:
    if request.param == "memfs":
        yield MemFS()
    elif request.param == "ramfs-4K":
        yield Ramfs(blocksize=4096)
    elif request.param == "ramfs-64K-full":
        yield Ramfs(blocksize=64 << 10, features="full")
    else:
        if not SHM.is_dir():
            pytest.skip("no /dev/shm tmpfs on this machine")
        with directory_filesystem(SHM) as fs:
            yield fs


def test_handwritten_file_replays_on_any_target(target: AnyFileSystem) -> None:
    engine = FsxEngine(target, FsxOptions(closeprob=0))
    result = engine.run(replay=read_fsxops(HANDWRITTEN))
    assert result.lines[-2] == f"All {result.testcalls} operations completed A-OK!"
    assert engine.model.size == 0x6810
    assert result.skipped_unsupported["clone_range"] == 1  # no AnyFileSystem can clone
    assert result.skipped_noop["read"] == 1                # the recorded "skip read"
    assert result.done["read"] >= 3 and result.done["fsync"] == 1
    if "collapse_range" not in features_of(target):
        assert result.skipped_unsupported["collapse_range"] == 1


def test_handwritten_file_catches_stale_data_after_truncate_up() -> None:
    with pytest.raises(FsxFailure) as info:
        FsxEngine(StaleDataAfterTruncateUp(MemFS()), FsxOptions(closeprob=0)).run(
            replay=read_fsxops(HANDWRITTEN))
    failure = info.value
    assert failure.report.startswith("READ BAD DATA: offset = 0x1000, size = 0x1800, ")
    assert failure.badoff == 0x1800
    assert "5(  5 mod 256): READ     0x1000 thru 0x27ff\t(0x1800 bytes)\t***RRRR***" in (
        failure.report.splitlines())


def test_random_data_made_in_chunks_is_what_one_call_makes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state, "RANDBYTES_CHUNK", 8)
    assert state.randbytes(random.Random(5), 29) == random.Random(5).randbytes(29)


def test_a_log_reaching_past_256_mib_replays() -> None:
    # random.randbytes() overflows at 256 MiB; the parser allows up to 1 GiB
    far = (256 << 20) + 0x1000
    entries = parse_fsxops(f"write {far:#x} 0x1000 0x0\nread {far:#x} 0x1000 {far + 0x1000:#x}\n")
    fsx = FsxEngine(MemFS(), FsxOptions(closeprob=0))
    assert fsx.run(replay=entries).testcalls == 2
