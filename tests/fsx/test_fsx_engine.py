"""The engine: fsx's choices, checks, reports, skips and replay, on a healthy file system."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pytest_folio.fsx.config import FsxOptions
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from pytest_folio.fsx.log import FL_SKIPPED, OP_NAMES, format_fsxops, read_fsxops
from pytest_folio.targets.capabilities import FS_FEATURES
from tests.helpers.fsx_broken import PassThrough
from tests.helpers.fsx_memfs import MemFS

SMALL = FsxOptions(numops=2000, maxfilelen=64 << 10, maxoplen=16 << 10)


def test_healthy_file_system_passes_with_fsx_report() -> None:
    result = FsxEngine(MemFS(), SMALL.replace(seed=3)).run()
    assert result.lines[-2] == "All 2000 operations completed A-OK!"
    assert result.lines[-1].startswith("fsx: 2000 operations in ")
    assert result.testcalls == 2000
    # fsx's distribution: every operation is chosen, roughly uniformly
    for name in OP_NAMES[:12]:
        assert result.done[name] + result.skipped_noop[name] > 2000 // 12 // 2, name


def test_same_seed_same_log_other_seed_other_log() -> None:
    first = FsxEngine(MemFS(), SMALL.replace(seed=11, numops=500))
    first.run()
    second = FsxEngine(MemFS(), SMALL.replace(seed=11, numops=500))
    second.run()
    third = FsxEngine(MemFS(), SMALL.replace(seed=12, numops=500))
    third.run()
    assert format_fsxops(first.log) == format_fsxops(second.log)
    assert format_fsxops(first.log) != format_fsxops(third.log)


def test_replaying_a_log_does_the_same_operations(tmp_path: Path) -> None:
    original = FsxEngine(MemFS(), SMALL.replace(seed=5, numops=800),
                         artifacts=tmp_path / "run", record=True)
    original.run()
    entries = read_fsxops(tmp_path / "run.fsxops")
    assert entries == original.log
    again = FsxEngine(MemFS(), FsxOptions(seed=99))
    again.run(replay=entries)
    # skipped entries are replayed as skipped; everything else runs as recorded
    assert [(e.op, e.args[:2]) for e in again.log] == [(e.op, e.args[:2]) for e in entries]


def test_options_limit_lengths_and_alignment() -> None:
    opts = FsxOptions(numops=1500, maxfilelen=32 << 10, maxoplen=4096, readbdy=512,
                      writebdy=1024, truncbdy=4096, seed=2)
    engine = FsxEngine(MemFS(), opts)
    engine.run()
    for entry in engine.log:
        if entry.flags & FL_SKIPPED:
            continue
        offset, length = entry.args[0], entry.args[1]
        name = OP_NAMES[entry.op]
        if name in ("read", "mapread"):
            assert offset % 512 == 0 and length <= 4096
        if name in ("write", "mapwrite"):
            assert offset % 1024 == 0 and offset + length <= 32 << 10
        if name == "truncate":
            assert length % 4096 == 0 and length < 32 << 10


def test_toggles_turn_operations_into_skips_or_plain_calls() -> None:
    opts = SMALL.replace(numops=600, mapped_reads=False, mapped_writes=False,
                         punch_hole_calls=False, fsync_calls=False, seed=4)
    result = FsxEngine(MemFS(), opts).run()
    assert result.done["mapread"] == result.done["mapwrite"] == 0
    assert result.converted["mapread"] > 0 and result.converted["mapwrite"] > 0
    assert result.skipped_disabled["punch_hole"] > 0 and result.done["punch_hole"] == 0
    assert result.skipped_disabled["fsync"] > 0
    assert not result.skipped_unsupported


def test_unsupported_features_are_skipped_and_counted() -> None:
    fs = MemFS(features=frozenset({"fallocate"}))
    result = FsxEngine(fs, SMALL.replace(numops=1200, seed=6)).run()
    for name in ("punch_hole", "zero_range", "collapse_range", "insert_range",
                 "copy_range"):
        assert result.skipped_unsupported[name] > 0 and result.done[name] == 0, name
    assert result.converted["mapread"] > 0
    assert "unsupported by MemFS: collapse_range" in result.lines[-1]


def test_without_q_the_probe_says_what_it_disables_in_fsx_words() -> None:
    fs = MemFS(features=frozenset({"fallocate", "copy_range"}))
    result = FsxEngine(fs, SMALL.replace(numops=10, seed=6, quiet=False)).run()
    assert result.lines[:4] == [
        "Seed set to 6",
        "main: filesystem does not support mmap (it has no mmap): mapped reads "
        "and writes become reads and writes",
        "main: filesystem does not support fallocate mode FALLOC_FL_PUNCH_HOLE | "
        "FALLOC_FL_KEEP_SIZE, disabling! (it has no punch_hole)",
        "main: filesystem does not support fallocate mode FALLOC_FL_ZERO_RANGE, "
        "disabling! (it has no zero_range)",
    ]


class SaysNoToZeroRange(PassThrough):
    """Lists zero_range but answers EOPNOTSUPP once asked for real (after the probe)."""

    calls = 0

    def fallocate(self, fd: int, mode: int, offset: int, length: int) -> None:
        if mode & 0x10:
            self.calls += 1
            if self.calls > 1:
                raise OSError(errno.EOPNOTSUPP, "no zero range today")
        self.inner.fallocate(fd, mode, offset, length)


def test_eopnotsupp_at_run_time_skips_from_then_on() -> None:
    result = FsxEngine(SaysNoToZeroRange(MemFS()), SMALL.replace(numops=1200, seed=6)).run()
    assert result.done["zero_range"] == 0
    assert result.skipped_unsupported["zero_range"] > 1


class JunkPastEof(PassThrough):
    """Mapped reads show junk in the EOF page past EOF."""

    def mmap_read(self, fd: int, offset: int, length: int) -> bytes:
        data = self.inner.mmap_read(fd, offset, length)
        size = self.size(fd)
        if offset + length > size:
            keep = max(0, size - offset)
            data = data[:keep] + b"\x77" * (length - keep)
        return data


def test_mapped_eof_page_must_read_zeroes() -> None:
    with pytest.raises(FsxFailure) as info:
        FsxEngine(JunkPastEof(MemFS()), SMALL.replace(seed=1)).run()
    report = info.value.report
    assert "Mapped " in str(info.value)
    line = next(line for line in report.splitlines() if line.startswith("Mapped "))
    assert "non-zero data past EOF" in line and line.endswith("is 0x7777")
    assert info.value.status == 205


class LiesAboutSize(PassThrough):
    def fstat(self, fd: int) -> os.stat_result:
        st = self.inner.fstat(fd)
        fields = list(st[:10])
        fields[6] = st.st_size + 1 if 0x8000 < st.st_size <= 0xC000 else st.st_size
        return os.stat_result(fields, {"st_blksize": st.st_blksize})


def test_size_is_checked_after_every_operation() -> None:
    engine = FsxEngine(LiesAboutSize(MemFS()), SMALL.replace(seed=1))
    with pytest.raises(FsxFailure) as info:
        engine.run()
    first = info.value.report.splitlines()[0]
    assert first.startswith("Size error: expected 0x") and info.value.status == 120
    expected = int(first.split()[3], 16)
    assert 0x8000 < expected <= 0xC000 and info.value.badoff == expected
    assert len(engine.log) < 100  # caught right after the operation that grew the file


class FlipsOneByte(PassThrough):
    """Reads return one corrupted byte at a fixed offset once the file is long enough."""

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        data = bytearray(self.inner.pread(fd, n, offset))
        if offset <= 0x1234 < offset + len(data):
            data[0x1234 - offset] ^= 0xFF
        return bytes(data)


def test_bad_read_report_has_fsx_format(tmp_path: Path) -> None:
    engine = FsxEngine(FlipsOneByte(MemFS()), SMALL.replace(seed=1),
                       artifacts=tmp_path / "fsx")
    with pytest.raises(FsxFailure) as info:
        engine.run()
    failure = info.value
    lines = failure.report.splitlines()
    assert lines[0].startswith("READ BAD DATA: offset = 0x") and ", fname = fsx.dat" in lines[0]
    # current fsx's layout: "%-10s  %-6s  %-6s  %s" and "0x%-8x  0x%04x  0x%04x  0x%x"
    assert lines[1] == "OFFSET      GOOD    BAD     RANGE"
    assert lines[2].startswith("0x1234      0x") and lines[2].endswith("  0x0")
    offset, good, bad, count = lines[2].split()
    assert (offset, count) == ("0x1234", "0x0") and good != bad and len(good) == 6
    assert lines[3].startswith("operation# (mod 256) for the bad data")
    assert failure.badoff == 0x1234 and failure.status == 110
    dump = lines.index(f"LOG DUMP ({len(engine.log)} total operations):")
    assert lines[dump + 1].startswith("1(  1 mod 256): ")
    assert "***RRRR***" in failure.report
    assert str(failure).endswith("first bad offset 0x1234")
    # the files fsx leaves behind
    assert failure.fsxops == tmp_path / "fsx.fsxops"
    assert read_fsxops(tmp_path / "fsx.fsxops") == engine.log
    assert (tmp_path / "fsx.fsxgood").read_bytes() == engine.model.contents()
    assert (tmp_path / "fsx.fsxlog").read_text().splitlines() == lines
    assert f'Log of operations saved to "{tmp_path / "fsx.fsxops"}"' in failure.report


def test_check_file_compares_the_whole_file_after_each_operation() -> None:
    class CorruptsBeyondReads(FlipsOneByte):
        pass

    engine = FsxEngine(CorruptsBeyondReads(MemFS()), SMALL.replace(seed=1, check_file=True))
    with pytest.raises(FsxFailure) as info:
        engine.run()
    assert info.value.report.startswith("READ BAD DATA: offset = 0x0, size = 0x")


class Crashes(PassThrough):
    def fsync(self, fd: int) -> None:
        raise RuntimeError("kernel BUG at fs/ramfs/file-mmu.c:42")


def test_a_crashing_target_is_reported_with_the_log() -> None:
    with pytest.raises(FsxFailure) as info:
        FsxEngine(Crashes(MemFS()), SMALL.replace(seed=1)).run()
    assert "RuntimeError from the target: kernel BUG" in info.value.report
    assert "LOG DUMP (" in info.value.report
    assert isinstance(info.value.__cause__, RuntimeError)


def test_a_target_with_no_optional_calls_still_runs() -> None:
    result = FsxEngine(MemFS(features=frozenset()), SMALL.replace(numops=600, seed=8)).run()
    assert result.done["read"] > 0 and result.done["truncate"] > 0
    assert set(result.skipped_unsupported) == FS_FEATURES - {"mmap"}
    assert result.converted["mapread"] > 0 and result.converted["mapwrite"] > 0


def test_echo_streams_the_output_as_it_is_printed() -> None:
    seen: list[str] = []
    result = FsxEngine(MemFS(), SMALL.replace(numops=50, quiet=False), echo=seen.append).run()
    assert seen == result.lines
    assert seen[0] == "Seed set to 1"
