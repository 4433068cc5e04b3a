"""Our .fsxops logs and xfstests' fsx, both ways; replays of logs fsx and richer targets
recorded; and fsx's command line carried over.

``fsx_replay_problems`` states what xfstests' ltp/fsx.c (read_op(), test()) accepts when
it replays a log, taken from its source: a log it would stop on is a bug here."""

from __future__ import annotations

import errno
import fnmatch
import os
import shlex
from pathlib import Path

import pytest

from pytest_folio.fsx.config import FsxOptions, parse_fsx_args
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from pytest_folio.fsx.log import (
    FL_SKIPPED,
    OP_FSYNC,
    FsxopsError,
    parse_fsxops,
    read_fsxops,
)
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.targets.directory import directory_filesystem
from tests.helpers.fsx_broken import PassThrough, StaleDataAfterTruncateUp
from tests.helpers.fsx_memfs import MemFS

# xfstests fsx's op_names[] and op_args_count()
FSX_OPS = {"read": 3, "read_dontcache": 3, "write": 3, "write_dontcache": 3,
           "write_atomic": 3, "mapread": 3, "mapwrite": 3, "truncate": 3, "fallocate": 3,
           "punch_hole": 3, "zero_range": 3, "collapse_range": 3, "insert_range": 3,
           "clone_range": 4, "dedupe_range": 4, "copy_range": 4, "exchange_range": 4,
           "fsync": 3}
FSX_FLAGS = {"keep_size", "close_open", "unshare", "*"}


def _strtoul_whole(word: str) -> bool:
    try:
        int(word, 0 if not (len(word) > 1 and word[0] == "0" and word[1] in "01234567")
            else 8)
    except ValueError:
        return False
    return True


def fsx_replay_problems(text: str) -> list[str]:
    """Why xfstests' fsx --replay-ops (without -i) would stop on this log, line by line."""
    problems = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if len(line) + 1 >= 256:  # fgets(line, 256): a longer line is split in two
            problems.append(f"{lineno}: longer than fsx's 256-byte line buffer")
        words = line.replace("\t", " ").split()
        if not words or words[0].startswith("#"):
            continue
        skipped = words[0] == "skip"
        words = words[1:] if skipped else words
        if not words or words[0] not in FSX_OPS:
            problems.append(f"{lineno}: not an fsx operation: {line!r}")
            continue
        count = FSX_OPS[words[0]]
        numbers, rest = words[1:1 + count], words[1 + count:]
        if len(numbers) < count or not all(map(_strtoul_whole, numbers)):
            problems.append(f"{lineno}: fsx wants {count} numbers: {line!r}")
        if set(rest) - FSX_FLAGS:
            problems.append(f"{lineno}: words fsx does not know: {line!r}")
        if words[0] == "fsync" and not skipped:
            problems.append(f"{lineno}: fsx runs fsync only with -i LOGDEV, and exits here")
    return problems


def _run_with_every_operation(tmp_path: Path) -> Path:
    engine = FsxEngine(Ramfs(blocksize=4096, features="full"),
                       FsxOptions(numops=600, seed=11, maxfilelen=64 << 10,
                                  maxoplen=16 << 10), artifacts=tmp_path / "fsx", record=True)
    result = engine.run()
    assert result.done["fsync"] > 0 and result.skipped_noop  # fsyncs and skip lines both
    return tmp_path / "fsx.fsxops"


def test_our_logs_are_what_xfstests_fsx_replays(tmp_path: Path) -> None:
    text = _run_with_every_operation(tmp_path).read_text()
    assert fsx_replay_problems(text) == []
    assert "\nskip fsync 0x0 0x0 0x" in text


def test_our_logs_replay_on_ours_with_every_fsync_they_recorded(tmp_path: Path) -> None:
    ops = _run_with_every_operation(tmp_path)
    entries = read_fsxops(ops)
    fsyncs = [e for e in entries if e.op == OP_FSYNC]
    assert fsyncs and not any(e.flags & FL_SKIPPED for e in fsyncs)
    result = FsxEngine(Ramfs(blocksize=4096, features="full"), FsxOptions(closeprob=0)).run(
        replay=entries)
    assert result.done["fsync"] == len(fsyncs)


def test_a_skip_fsync_line_without_our_note_stays_skipped() -> None:
    (entry,) = parse_fsxops("skip fsync 0x0 0x0 0x10\n")
    assert entry.flags & FL_SKIPPED


def test_a_log_with_fsxs_skip_lines_replays(tmp_path: Path) -> None:
    """fsx logs what it skipped with the raw random offset and length it drew."""
    log = ("write 0x0 0x2000 0x0\n"
           "skip fallocate 0x6a3b9f21 0x7e11 0x2000\n"
           "skip punch_hole 0x7fffffff 0xffff 0x2000 *\n"
           "read 0x100 0x1000 0x2000\n")
    result = FsxEngine(MemFS(), FsxOptions(closeprob=0)).run(replay=parse_fsxops(log))
    assert result.lines[-2] == "All 2 operations completed A-OK!"  # skips are no calls
    assert result.skipped_noop["fallocate"] == result.skipped_noop["punch_hole"] == 1


def test_a_log_from_a_target_with_more_features_keeps_its_file_sizes() -> None:
    """A clone that grew the file where the log was recorded cannot run here: the replay
    truncates to the size the log had next, so the copy after it is not a false failure."""
    log = ("write 0x0 0x3000 0x0\n"
           "clone_range 0x0 0x1000 0x5000 0x3000\n"       # grew the file to 0x6000 there
           "copy_range 0x5000 0x800 0x1000 0x6000\n"
           "read 0x0 0x6000 0x6000\n")
    engine = FsxEngine(MemFS(), FsxOptions(closeprob=0))
    result = engine.run(replay=parse_fsxops(log))
    assert result.lines[-2].endswith("operations completed A-OK!")
    assert result.skipped_unsupported["clone_range"] == 1
    assert result.done["copy_range"] == 1 and engine.model.size == 0x6000
    assert any("operation 2 (clone_range) ran when the log was recorded, not here: "
               "truncating 0x3000 to 0x6000" in line for line in result.lines)


def test_a_log_that_diverges_for_other_reasons_says_so_once() -> None:
    log = ("write 0x0 0x3000 0x0\n"
           "truncate 0x0 0x1000 0x5000\n"                # the log's file was 0x5000
           "read 0x0 0x800 0x1000\n")
    result = FsxEngine(MemFS(), FsxOptions(closeprob=0)).run(replay=parse_fsxops(log))
    notes = [line for line in result.lines if "leaves the log's file sizes" in line]
    assert notes == ["fsx: the replay leaves the log's file sizes after operation 1 (write): "
                     "0x3000 here, 0x5000 when recorded (replay with the fsx options and block "
                     "size the log was recorded with)"]


@pytest.mark.parametrize(("text", "message"), [
    ("", "x.fsxops: holds no operations"),
    ("# only a comment\n\n", "x.fsxops: holds no operations"),
    ("write 0x0 0xffffffffffff 0x0\n",
     "x.fsxops:1: parse error: write reaches 0xffffffffffff, past the 1 GiB a replayed file "
     "may have"),
    ("read 0x0 0x10 0x10\ncopy_range 0x0 0x10 0x7fffffffffff 0x10\n",
     "x.fsxops:2: parse error: copy_range reaches 0x80000000000f, past the 1 GiB*"),
])
def test_an_empty_log_or_a_huge_length_is_one_line(text: str, message: str) -> None:
    with pytest.raises(FsxopsError) as info:
        parse_fsxops(text, "x.fsxops")
    assert "\n" not in str(info.value)
    assert fnmatch.fnmatch(str(info.value), message), str(info.value)


def test_an_empty_log_is_a_usage_error_before_any_test(pytester: pytest.Pytester) -> None:
    empty = pytester.path / "empty.fsxops"
    empty.write_text("")
    result = pytester.runpytest("-p", "pytest_folio", f"--folio-fsx-replay={empty}",
                                "--pyargs", "pytest_folio.suites.test_fsx")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line.strip()] == [
        f"ERROR: --folio-fsx-replay: {empty}: holds no operations"]


def test_the_replay_command_of_a_failure_with_skip_lines_works(
        pytester: pytest.Pytester) -> None:
    """On the default reference ramfs fallocate and friends are skipped: the failure's log
    holds skip lines, and the command it prints replays it to the same failure."""
    pytester.makepyfile(test_stale="""
        import pytest
        from tests.helpers.fsx_broken import StaleDataAfterTruncateUp
        from pytest_folio.model.ramfs import Ramfs
        from pytest_folio.suites.fsx import FsxSuite

        class TestStale(FsxSuite):
            @pytest.fixture
            def filesystem(self):
                return StaleDataAfterTruncateUp(Ramfs(blocksize=4096))
    """)
    first = pytester.runpytest("-p", "pytest_folio", "--folio-fsx-seed=5",
                               "test_stale.py::TestStale::test_fsx")
    first.assert_outcomes(failed=1)
    out = first.stdout.str()
    ops = next(line.split("fsx: operation log: ", 1)[1].split()[0]
               for line in out.splitlines() if "fsx: operation log: " in line)
    assert "\nskip " in Path(ops).read_text()
    command = next(line.split("fsx: replay it: ", 1)[1] for line in out.splitlines()
                   if "fsx: replay it: " in line)
    again = pytester.runpytest(*shlex.split(command)[3:])
    again.assert_outcomes(failed=1)
    assert "fsx: READ BAD DATA" in again.stdout.str()


def test_fsxs_flags_for_what_we_never_do_are_accepted() -> None:
    assert parse_fsx_args("-a -T -J -B -0 -u -q -l 1m") == FsxOptions(maxfilelen=1 << 20)


class DropsCaches(PassThrough):
    def __init__(self, inner: MemFS) -> None:
        super().__init__(inner)
        self.dropped: list[str] = []

    def drop_caches(self, path: str) -> None:
        self.dropped.append(path)


def test_close_open_drops_the_targets_cached_pages_where_it_can() -> None:
    fs = DropsCaches(MemFS())
    result = FsxEngine(fs, FsxOptions(numops=200, closeprob=4, seed=2)).run()
    assert result.testcalls == 200
    assert len(fs.dropped) > 10 and set(fs.dropped) == {"fsx.dat"}  # one per close/open


def test_a_directory_drops_a_files_pages_without_root(tmp_path: Path) -> None:
    with directory_filesystem(tmp_path) as fs:
        fd = fs.open("f", os.O_CREAT | os.O_RDWR)
        fs.pwrite(fd, b"x" * 8192, 0)
        fs.fsync(fd)
        fs.drop_caches("f")
        assert fs.pread(fd, 4, 0) == b"xxxx"
        with pytest.raises(FileNotFoundError):
            fs.drop_caches("missing")
        fs.close(fd)


def test_the_hexdump_hint_names_a_copy_that_outlives_the_directory_target(
        tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    with pytest.raises(FsxFailure) as info, directory_filesystem(target) as dfs:
        FsxEngine(StaleDataAfterTruncateUp(dfs), FsxOptions(seed=5, numops=3000),
                  fname=f"{dfs.root}/fsx.dat", artifacts=tmp_path / "out" / "fsx").run()
    assert list(target.iterdir()) == []                      # the scratch dir is gone
    hint = next(line for line in info.value.report.splitlines() if "maybe hexdump" in line)
    kept = tmp_path / "out" / "fsx.dat"
    assert hint.startswith(f'(maybe hexdump "{kept}" vs "{tmp_path / "out" / "fsx.fsxgood"}"')
    assert kept.is_file() and info.value.artifacts["dat"] == kept
    assert kept.read_bytes() != (tmp_path / "out" / "fsx.fsxgood").read_bytes()


def test_an_enospc_from_the_target_is_one_fsx_failure() -> None:
    class Full(PassThrough):
        def pwrite(self, fd: int, data: bytes, offset: int) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(FsxFailure) as info:
        FsxEngine(Full(MemFS()), FsxOptions(seed=1, numops=100)).run()
    assert "No space left on device" in info.value.report
