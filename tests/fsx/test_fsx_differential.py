"""Differential mode (``--folio-fs-oracle``): on by default against a user's target, off
against the reference or with ``none``, bad oracles and logs are usage errors, a correct
target matches, and a broken one fails with a shrunk sequence whose replay fails again."""

from __future__ import annotations

import errno
import os
import re
import shlex
from pathlib import Path

import pytest

from pytest_folio.fsx.differential import (
    CALLS,
    FAR,
    LOG_HEADER,
    Mismatch,
    Runner,
    common,
    compare,
    dump_ops,
    generate,
    load_ops,
    supported,
)
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.model.vfs import MAX_LFS_FILESIZE
from pytest_folio.targets.protocols import AnyFileSystem, protocol_members
from tests.helpers.fsx_broken import PassThrough, WithoutDirectories
from tests.helpers.fsx_cachedfs import CachedFS

MODULE = ("-p", "pytest_folio", "--pyargs", "pytest_folio.suites.test_fs_differential",
          "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
ALL = supported(Ramfs(features="full")) | {"drop_caches"}


def test_differential_mode_is_off_against_the_reference(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*MODULE, "--folio-block-sizes=4k", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["folio: fs oracle none *",
                                 "*differential mode is off (--folio-fs is the reference*"])


def test_differential_mode_is_on_by_default_against_a_users_target(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*MODULE, "--folio-fs=tests.helpers.fsx_cachedfs:CachedFS",
                                "--folio-block-sizes=16k", "--folio-fsx-ops=800")
    result.assert_outcomes(passed=2)    # [16K] and, CachedFS taking cache_bytes, [16K-cache256K]
    result.stdout.fnmatch_lines(["folio: fs oracle reference:features=full (the differential*"])


def test_none_turns_it_off(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*MODULE, "--folio-fs=tests.helpers.fsx_broken:OAppendIgnored",
                                "--folio-fs-oracle=none", "--folio-block-sizes=4k")
    result.assert_outcomes(skipped=2)    # [4K] and its bounded-cache run


@pytest.mark.parametrize(("args", "message"), [
    (("--folio-fs-oracle=os:getcwd",),
     "--folio-fs-oracle: 'os:getcwd': the oracle is reference, a directory or none"),
    (("--folio-fs-oracle=/no/such/dir",), "--folio-fs-oracle: /no/such/dir does not exist"),
    (("--folio-fs-oracle=reference:colour=red",),
     "--folio-fs-oracle: unknown knob 'colour' for the reference"),
    (("--folio-fs-oracle=reference:errors=some",),
     "--folio-fs-oracle: errors='some' is not one of exact|any"),
    (("--folio-fs-oracle-replay=/no/such.fsdiff",),
     "--folio-fs-oracle-replay: cannot read /no/such.fsdiff*"),
])
def test_a_bad_oracle_or_log_is_a_usage_error(pytester: pytest.Pytester,
                                              args: tuple[str, ...], message: str) -> None:
    result = pytester.runpytest(*MODULE, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}*"])


def test_a_log_that_is_not_one_is_a_usage_error(pytester: pytest.Pytester,
                                                tmp_path: Path) -> None:
    bad = tmp_path / "x.fsdiff"
    bad.write_text(f"{LOG_HEADER}\n[\"frobnicate\", 1]\n")
    result = pytester.runpytest(*MODULE, f"--folio-fs-oracle-replay={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --folio-fs-oracle-replay: {bad}:2: not an operation*"])


def test_a_correct_target_matches_a_directory_oracle(pytester: pytest.Pytester,
                                                     tmp_path: Path) -> None:
    result = pytester.runpytest(*MODULE, "--folio-fs=reference:features=full",
                                f"--folio-fs-oracle={tmp_path}", "--folio-block-sizes=4k",
                                "--folio-fsx-ops=1500", "--folio-fsx-seed=3")
    result.assert_outcomes(passed=1)
    assert list(tmp_path.iterdir()) == []           # the oracle's subdirectory is gone


def test_a_broken_target_fails_with_a_short_sequence_and_the_replay_agrees(
        pytester: pytest.Pytester) -> None:
    keep = pytester.path / "kept"
    result = pytester.runpytest(*MODULE, "--folio-fs=tests.helpers.fsx_broken:OAppendIgnored",
                                "--folio-block-sizes=16k", "--folio-fsx-seed=7",
                                f"--folio-fsx-dir={keep}")
    result.assert_outcomes(failed=2)    # [16K] and its bounded-cache run
    out = result.stdout.lines
    first = next(x for x in out if x.startswith("differential: op "))
    found = re.fullmatch(r"differential: (op \d+: .*): target (.*), oracle (.*)", first)
    assert found is not None, first
    assert found.group(2) != found.group(3)
    count = re.search(r"^(\d+) of (\d+) operations show it", result.stdout.str(), re.M)
    assert count is not None and int(count.group(1)) <= 8 < int(count.group(2))
    replay = next(x for x in out if x.startswith("replay: "))[len("replay: "):]
    words = shlex.split(replay)
    assert {"--folio-fs=tests.helpers.fsx_broken:OAppendIgnored", f"--folio-fsx-dir={keep}",
            "--folio-block-sizes=16K", "--folio-seed=7"} <= set(words)
    log = next(w for w in words if w.startswith("--folio-fs-oracle-replay="))
    kept_log = Path(log.split("=", 1)[1])
    assert kept_log.is_relative_to(pytester.path / ".folio" / "failures")   # outlives tmp
    assert len(load_ops(kept_log.read_text())) == int(count.group(1))
    again = pytester.runpytest(*words[3:], "-p", "no:cacheprovider")
    again.assert_outcomes(failed=1)
    assert first in again.stdout.lines


def test_compare_names_the_first_operation_that_differs() -> None:
    a, b = Ramfs(features="full"), Ramfs(blocksize=16384, features="full")
    ops = [("open", 0, "f", 0o102), ("pwrite", 0, 10, 0, 7), ("pread", 0, 20, 0)]
    compare(a, b, ops)                              # the block size never shows
    c, d = Ramfs(), Ramfs()
    d.open("a", 0o102)                              # the oracle has a file the target lacks
    with pytest.raises(Mismatch) as info:
        compare(c, d, [("stat", "a")])
    assert str(info.value) == "op 0: stat('a'): target err 'ENOENT', oracle ok 0"


class _LostWrite(PassThrough):
    """A write of 100 bytes at 4096 is lost (for the report's test)."""

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return len(data) if (offset, len(data)) == (4096, 100) else super().pwrite(
            fd, data, offset)


def test_a_data_difference_names_the_offset_both_sides_bytes_and_the_operations() -> None:
    ops = [("open", 0, "f", os.O_RDWR | os.O_CREAT), ("pwrite", 0, 8192, 0, 1),
           ("pwrite", 0, 100, 4096, 2), ("pwrite", 0, 10, 0, 3), ("pread", 0, 4096, 4000)]
    with pytest.raises(Mismatch) as info:
        compare(_LostWrite(Ramfs()), Ramfs(), ops)
    detail = info.value.detail
    assert info.value.index == 4
    assert detail.startswith("first difference at file offset 4096 (0x1000): target ")
    assert "(lengths 4096 and 4096)" in detail
    assert "* 1: pwrite(slot 0, 8192 bytes, at 0)" in detail
    assert "* 2: pwrite(slot 0, 100 bytes, at 4096)" in detail
    assert "* 3:" not in detail                     # it never touched offset 4096


def test_any_errno_matches_two_errors_whatever_their_errnos() -> None:
    class OtherErrno(PassThrough):
        def unlink(self, path: str) -> None:
            raise OSError(errno.EPERM, path)

    ops = [("unlink", "nothing")]
    with pytest.raises(Mismatch):
        compare(OtherErrno(Ramfs()), Ramfs(), ops)
    compare(OtherErrno(Ramfs()), Ramfs(), ops, any_errno=True)
    with pytest.raises(Mismatch):                   # ok against an error still differs
        compare(OtherErrno(Ramfs()), Ramfs(), [("open", 0, "x", os.O_CREAT | os.O_RDWR),
                                               ("unlink", "x")], any_errno=True)


class _AccessModeFirst(PassThrough):
    """Correct, but checks a mapping's access mode before its length: a zero-length
    mapped write on a read-only descriptor is EACCES (Linux makes no call at all)."""

    calls = 0

    def mmap_write(self, fd: int, offset: int, data: bytes) -> None:
        self.calls += 1
        if not data:
            raise OSError(errno.EACCES, "read-only")
        super().mmap_write(fd, offset, data)


def test_a_mapped_write_clipped_to_nothing_is_not_sent() -> None:
    target = _AccessModeFirst(Ramfs())
    ops = [("open", 0, "f", os.O_RDWR | os.O_CREAT), ("pwrite", 0, 100, 0, 1),
           ("mmap_write", 0, 100, 5000, 2), ("mmap_write", 0, 50, 5000, 3)]
    compare(target, Ramfs(), ops)
    assert target.calls == 1                        # the one at 50, clipped to 50 bytes
    runner = Runner(Ramfs())
    for op in ops[:2]:
        runner.apply(op)
    assert runner.resolve(ops[2])[3] == 0 and runner.resolve(ops[3])[3] == 50
    assert runner.resolve(("mmap_write", 0, 4096, 10, 4))[3] == 10  # past EOF's page: sent


def test_two_bad_arguments_may_fail_with_either_errno() -> None:
    class ArgumentsFirst(PassThrough):       # the reference checks the descriptor first
        def pread(self, fd: int, n: int, offset: int) -> bytes:
            if fd < 0 or offset < 0:
                raise OSError(errno.EINVAL, "fd")
            return super().pread(fd, n, offset)

    compare(ArgumentsFirst(Ramfs()), Ramfs(), [("pread", 0, 10, -1)])  # EINVAL or EBADF
    with pytest.raises(Mismatch):                   # one bad argument: its errno exactly
        compare(ArgumentsFirst(Ramfs()), Ramfs(), [("pread", 1, 10, 0)])


def test_the_generator_is_a_function_of_the_seed() -> None:
    assert generate(5, ALL, 200) == generate(5, ALL, 200) != generate(6, ALL, 200)


def test_the_generator_covers_every_call_of_the_protocol() -> None:
    calls = {m for m in protocol_members(AnyFileSystem)
             if callable(getattr(AnyFileSystem, m, None))}
    assert calls <= set(CALLS)
    ops = generate(1, ALL, 5000, unit=65536)
    assert {op[0] for op in ops} == set(CALLS)


def test_the_generator_reaches_every_flag_far_offsets_the_limit_and_trailing_slashes() -> None:
    ops = generate(1, ALL, 20000, unit=16384)
    flags = {op[3] for op in ops if op[0] == "open"}
    for bit in (os.O_APPEND, os.O_TRUNC, os.O_CREAT, os.O_EXCL, os.O_DIRECTORY):
        for mode in (os.O_RDONLY, os.O_WRONLY, os.O_RDWR):
            assert any(f & bit and f & os.O_ACCMODE == mode for f in flags), (bit, mode)
    offsets = [a for op in ops for a in op[2:] if isinstance(a, int)]
    assert any(abs(o - FAR[0]) <= 4096 for o in offsets)
    assert any(abs(o - FAR[1]) <= 4096 for o in offsets)
    assert any(o > MAX_LFS_FILESIZE - 8 * 4096 for o in offsets)
    assert any(isinstance(a, tuple) and a[0] == "eof" for op in ops for a in op)
    names = [a for op in ops for a in op[1:] if isinstance(a, str)]
    assert any(n.endswith("/") for n in names) and any("/" not in n for n in names)


@pytest.mark.parametrize(("fs", "never"), [
    (CachedFS(features=frozenset({"mmap"})), {"fallocate", "copy_file_range"}),
    (WithoutDirectories(CachedFS()), {"mkdir", "rmdir"}),
    (CachedFS(features=frozenset()), {"mmap_read", "mmap_write", "fallocate"}),
], ids=["no-fallocate-no-copy", "no-directories", "nothing-optional"])
def test_nothing_of_a_family_the_target_lacks_is_generated(fs: AnyFileSystem,
                                                           never: set[str]) -> None:
    kinds = {op[0] for op in generate(2, common(fs, Ramfs(features="full")), 3000)}
    assert kinds & never == set()
    assert {"open", "pwrite", "pread", "rename"} <= kinds


def test_the_log_round_trips() -> None:
    ops = generate(3, ALL, 300)
    assert load_ops(dump_ops(ops)) == ops


class CopiesABlockAtATime(PassThrough):
    """A correct copy_file_range that stops at the source's next block boundary and says
    so (as XFS does when it shares whole blocks): short, but true."""

    extra_features = frozenset({"copy_range"})

    def copy_file_range(self, src: int, dst: int, count: int, offset_src: int,
                        offset_dst: int) -> int:
        # one file on both sides: the whole range is checked first (overlap is EINVAL)
        if self.inner.fstat(src).st_ino == self.inner.fstat(dst).st_ino:
            return self.inner.copy_file_range(src, dst, count, offset_src, offset_dst)
        step = min(count, self.blocksize - offset_src % self.blocksize)
        return self.inner.copy_file_range(src, dst, step, offset_src, offset_dst)


def test_a_short_but_true_copy_file_range_matches_the_oracle() -> None:
    target = CopiesABlockAtATime(Ramfs(features="full"))
    ops = generate(1, common(target, Ramfs(features="full")), 3000)
    assert sum(op[0] == "copy_file_range" for op in ops) > 50
    compare(target, Ramfs(features="full"), ops)


def test_a_copy_that_claims_more_than_it_copied_still_differs() -> None:
    from tests.helpers.fsx_broken import CopyRangeShortCopy
    target = CopyRangeShortCopy(Ramfs(features="full"))
    with pytest.raises(Mismatch):
        compare(target, Ramfs(features="full"),
                generate(1, common(target, Ramfs(features="full")), 3000))


@pytest.mark.parametrize(("op", "either"), [
    (("rename", "d/e/", "d"), True),      # 7.2: ENOTEMPTY (ancestry); 6.1: ENOTDIR
    (("rename", "d/", "d/e"), True),
    (("rename", "d/e", "d"), False),      # no slash: one reason, one errno
    (("rename", "a/", "b"), False),       # not nested
])
def test_a_nested_rename_with_a_trailing_slash_may_fail_for_either_reason(
        op: tuple[str, str, str], either: bool) -> None:
    assert Runner(Ramfs()).two_bad_arguments(op) is either


def test_a_replayed_log_takes_every_data_form_the_generator_writes() -> None:
    """A write's data in a .fsdiff is a tag, one repeated byte or an earlier write's
    bytes; anything else is refused naming the line."""
    from pytest_folio.fsx.differential import LOG_HEADER, load_ops

    text = "\n".join([LOG_HEADER, '["pwrite", 0, 10, 0, 5]', '["pwrite", 0, 10, 0, "ff"]',
                      '["mmap_write", 0, 0, 10, "same 5"]'])
    assert [op[-1] for op in load_ops(text)] == [5, "ff", "same 5"]
    for bad in ('"zz"', '"same x"', '"fff"', "-1"):
        with pytest.raises(ValueError, match="log:2: pwrite argument 4 must be"):
            load_ops(f'{LOG_HEADER}\n["pwrite", 0, 10, 0, {bad}]')
