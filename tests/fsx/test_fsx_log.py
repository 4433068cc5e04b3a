"""fsx's two log formats: the LOG DUMP line and the .fsxops replay file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_folio.fsx.log import (
    FL_CLOSE_OPEN,
    FL_KEEP_SIZE,
    FL_SKIPPED,
    FSYNC_NOTE,
    OP_CLONE_RANGE,
    OP_COPY_RANGE,
    OP_FALLOCATE,
    OP_FSYNC,
    OP_MAPREAD,
    OP_READ,
    OP_TRUNCATE,
    OP_WRITE,
    FsxopsError,
    LogEntry,
    dump_line,
    format_fsxops,
    parse_fsxops,
    read_fsxops,
    write_fsxops,
)


@pytest.mark.parametrize(("opnum", "entry", "badoff", "line"), [
    (1, LogEntry(OP_WRITE, (0x1000, 0x200, 0x800)), -1,
     "1(  1 mod 256): WRITE    0x1000 thru 0x11ff\t(0x200 bytes) HOLE"),
    (2, LogEntry(OP_WRITE, (0x700, 0x200, 0x800)), 0x750,
     "2(  2 mod 256): WRITE    0x700 thru 0x8ff\t(0x200 bytes) EXTEND\t***WWWW"),
    (258, LogEntry(OP_READ, (0, 0x10, 0x800)), 0x5,
     "258(  2 mod 256): READ     0x0 thru 0xf\t(0x10 bytes)\t***RRRR***"),
    (3, LogEntry(OP_MAPREAD, (0, 0x10, 0x800), FL_CLOSE_OPEN), -1,
     "3(  3 mod 256): MAPREAD  0x0 thru 0xf\t(0x10 bytes)\n\t\tCLOSE/OPEN"),
    (4, LogEntry(OP_TRUNCATE, (0, 0x100, 0x800)), 0x200,
     "4(  4 mod 256): TRUNCATE DOWN\tfrom 0x800 to 0x100\t******WWWW"),
    (5, LogEntry(OP_TRUNCATE, (0, 0x900, 0x800)), -1,
     "5(  5 mod 256): TRUNCATE UP\tfrom 0x800 to 0x900"),
    (6, LogEntry(OP_FALLOCATE, (0x700, 0x200, 0x800), FL_KEEP_SIZE), -1,
     "6(  6 mod 256): FALLOC   0x700 thru 0x900\t(0x200 bytes) PAST_EOF"),
    (7, LogEntry(OP_FALLOCATE, (0x100, 0x200, 0x800)), -1,
     "7(  7 mod 256): FALLOC   0x100 thru 0x300\t(0x200 bytes) INTERIOR"),
    (8, LogEntry(OP_COPY_RANGE, (0x0, 0x100, 0x400, 0x800)), 0x410,
     "8(  8 mod 256): COPY 0x0 thru 0xff\t(0x100 bytes) to 0x400 thru 0x4ff\t******EEEE"),
    (9, LogEntry(OP_FSYNC, (0, 0, 0x800)), -1, "9(  9 mod 256): FSYNC"),
    (10, LogEntry(OP_READ, (0, 0, 0x800), FL_SKIPPED), -1,
     "10( 10 mod 256): SKIPPED (no operation)"),
])
def test_dump_lines_have_fsx_format(opnum: int, entry: LogEntry, badoff: int,
                                    line: str) -> None:
    assert dump_line(opnum, entry, badoff) == line


def test_fsxops_round_trip_keeps_every_field(tmp_path: Path) -> None:
    entries = [
        LogEntry(OP_WRITE, (0x10, 0x20, 0x0)),
        LogEntry(OP_FALLOCATE, (0x0, 0x1000, 0x30), FL_KEEP_SIZE | FL_CLOSE_OPEN),
        LogEntry(OP_READ, (0x0, 0x0, 0x30), FL_SKIPPED),
        LogEntry(OP_COPY_RANGE, (0x0, 0x10, 0x100, 0x30)),
        LogEntry(OP_FSYNC, (0, 0, 0x110)),
    ]
    path = write_fsxops(tmp_path / "x.fsxops", entries, badoff=0x15)
    lines = path.read_text().splitlines()
    assert lines[0] == FSYNC_NOTE          # a comment to fsx: fsync lines follow as skips
    assert lines[1] == "write 0x10 0x20 0x0 *"
    assert lines[2] == "fallocate 0x0 0x1000 0x30 keep_size close_open *"
    assert lines[3] == "skip read 0x0 0x0 0x30"
    assert lines[4] == "copy_range 0x0 0x10 0x100 0x30"
    assert lines[5] == "skip fsync 0x0 0x0 0x110"
    assert read_fsxops(path) == entries
    assert not (tmp_path / "x.fsxops.tmp").exists()


def test_parse_reads_c_numbers_comments_aliases_and_old_copy_lines() -> None:
    entries = parse_fsxops(
        "# recorded by fsx\n"
        "\n"
        "write 4096 010 0x0\n"
        "write_dontcache 0X10 0x10 0x1008 *\n"
        "read_dontcache 0x0 0x10 0x1008\n"
        "copy_range 0x0 0x10 0x2000 close_open\n"
        "clone_range 0x0 0x1000 0x2000 0x3000\n"
        "fallocate 0x0 0x10 0x3000 unshare\n")
    assert entries[0] == LogEntry(OP_WRITE, (4096, 8, 0))
    assert entries[1].op == OP_WRITE and entries[2].op == OP_READ
    assert entries[3] == LogEntry(OP_COPY_RANGE, (0, 0x10, 0x2000, 0), FL_CLOSE_OPEN)
    assert entries[4].op == OP_CLONE_RANGE
    assert len(entries) == 6


@pytest.mark.parametrize(("text", "message"), [
    ("frobnicate 0x0 0x0 0x0\n", "x.fsxops:1: parse error: unknown operation 'frobnicate'"),
    ("# c\nwrite 0x0 0x10\n", "x.fsxops:2: parse error: write needs 3 numbers, found 2"),
    ("read 0x0 0x10 0x20 bogus\n", "x.fsxops:1: parse error: unexpected 'bogus'"),
    ("skip\n", "x.fsxops:1: parse error: 'skip' without an operation"),
    ("read 0x0 -1 0x20\n", "x.fsxops:1: parse error: read needs 3 numbers, found 1"),
])
def test_parse_errors_name_file_and_line(text: str, message: str) -> None:
    with pytest.raises(FsxopsError) as info:
        parse_fsxops(text, "x.fsxops")
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_missing_file_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(FsxopsError, match=r"^cannot read .*nope.fsxops"):
        read_fsxops(tmp_path / "nope.fsxops")


def test_format_is_what_fsx_replay_reads_back() -> None:
    entries = [LogEntry(OP_TRUNCATE, (0, 0x4000, 0x0))]
    assert parse_fsxops(format_fsxops(entries)) == entries
