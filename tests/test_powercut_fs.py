"""The file-system power-cut rules (pytest_folio.fsx.powercut), on the correct PowerCutFS
and on hand-made states: fsync'd sizes, data and names survive; the rest is old or new;
an extension's size never lands before its data; nothing is invented."""

from __future__ import annotations

import pytest

from pytest_folio.fsx.powercut import (
    CUT,
    FALLOCATE_MODES,
    RULES,
    SCHEDULES,
    FileStates,
    FsOp,
    FsPowerCutFailure,
    FsPowerCutRun,
    data_of,
    fs_powercut_ops,
    powercut_features,
)
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.powercut import cut_report
from tests.helpers.fsx_powercut import (
    ORDERED_BUGS,
    POWER_CUT_BUGS,
    PowerCutFS,
    WritebackModeFS,
)


def states(*datas: bytes) -> FileStates:
    f = FileStates("a", datas[0], "fsync", durable=True)
    for i, data in enumerate(datas[1:]):
        f.now[:] = data
        f.changed(f"op {i}")
    return f


def test_an_fsynced_file_reads_back_exactly() -> None:
    f = states(b"x" * 10)
    assert f.check(b"x" * 10, PAGE_SIZE) is None
    assert f.check(b"x" * 9, PAGE_SIZE) == "broke fsync's promise: size 9, allowed 10 (fsync)"
    assert f.check(b"x" * 9 + b"y", PAGE_SIZE) == (
        "broke fsync's promise: byte 0x9 (of 10) read 0x79, allowed 0x78 (fsync)")


def test_an_unsynced_change_reads_old_or_new_per_unit() -> None:
    old, new = b"o" * 2 * PAGE_SIZE, b"n" * 2 * PAGE_SIZE
    f = states(old, new)
    assert f.check(old[:PAGE_SIZE] + new[PAGE_SIZE:], PAGE_SIZE) is None
    problem = f.check(old[:PAGE_SIZE] + new[PAGE_SIZE:], 2 * PAGE_SIZE)
    assert problem is not None and problem.startswith("broke its power_cut_unit: ")
    assert "mixes two of its states" in problem


def test_under_ordered_rules_an_extension_may_not_land_its_size_before_its_data() -> None:
    f = states(b"", b"d" * 100)
    assert f.check(b"", PAGE_SIZE, "ordered") is None
    assert f.check(b"d" * 100, PAGE_SIZE, "ordered") is None
    assert f.check(bytes(100), PAGE_SIZE, "ordered") == (
        "broke ordered mode's 'size never before data': byte 0x0 (of 100) read 0x00, "
        "allowed 0x64 (op 0) (the extension's size landed before its data)")


def test_under_fsync_rules_an_extension_may_read_zeros_never_garbage() -> None:
    f = states(b"s" * 10, b"s" * 10 + b"d" * 90)
    assert f.check(b"s" * 10 + bytes(90), PAGE_SIZE, "fsync") is None
    assert f.check(b"s" * 10 + b"d" * 90, PAGE_SIZE, "fsync") is None
    assert f.check(b"s" * 10 + b"g" + bytes(89), PAGE_SIZE, "fsync") == (
        "broke fsync's promise: byte 0xa (of 100) read 0x67, allowed 0x00 (fsync) or "
        "0x64 (op 0)")
    # what was fsync'd is never zeroed by an unsynced extension
    assert f.check(bytes(100), PAGE_SIZE, "fsync") == (
        "broke fsync's promise: byte 0x0 (of 100) read 0x00, allowed 0x73 (fsync)")


def test_a_name_nobody_had_is_invented() -> None:
    fs = PowerCutFS()
    run = FsPowerCutRun(fs)
    run.run([FsOp("write", "a", 0, 5, 1), FsOp("fsync", "a")])
    assert run.match({"a": bytes(run.files[0].now), "z": b""}) == (
        "broke fsync's promise: the directory holds a, z: no file was named 'z' since its "
        "last fsync (a name invented)")


def test_a_renamed_fsynced_file_is_found_under_either_name() -> None:
    run = FsPowerCutRun(PowerCutFS())
    run.run([FsOp("write", "a", 0, 5, 1), FsOp("fsync", "a"), FsOp("rename", "a", to="b")])
    data = bytes(run.files[0].now)
    assert run.match({"a": data}) is None
    assert run.match({"b": data}) is None
    assert run.match({}) == ("broke fsync's promise: the directory holds nothing: the "
                             "file fsync'd as 'a' (op 1: fsync a) is missing")
    assert run.match({"a": data, "b": data}) is not None      # one file, two names


def ops_for(fs: PowerCutFS, seed: int, schedule: str = "fsync") -> list[FsOp]:
    return fs_powercut_ops(seed, 10, schedule, powercut_features(fs))


@pytest.mark.parametrize("rules", RULES)
@pytest.mark.parametrize("blocksize", [PAGE_SIZE, 16 * PAGE_SIZE])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_the_correct_file_system_passes_every_schedule(blocksize: int, schedule: str,
                                                        rules: str) -> None:
    for seed in range(3):
        fs = PowerCutFS(blocksize)
        assert FsPowerCutRun(fs, rules=rules).run(ops_for(fs, seed, schedule)) == 10


def test_a_run_dirties_data_every_way_through_two_descriptors_past_1_mib() -> None:
    ops = [op for seed in range(8) for op in ops_for(PowerCutFS(), seed)]
    assert {op.kind for op in ops} == {"write", "mmap_write", "copy", "fallocate",
                                       "truncate", "fsync", "rename", "cut"}
    assert {op.fd for op in ops if op.kind in ("write", "fsync")} == {0, 1}
    assert {op.tag for op in ops if op.kind == "fallocate"} == {m for m, _ in FALLOCATE_MODES}
    assert max(op.offset + op.length for op in ops) > 1 << 20
    # a file system without the optional calls gets pwrite alone
    assert {op.kind for op in fs_powercut_ops(1, 10, "fsync")} <= {
        "write", "truncate", "fsync", "rename", "cut"}


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_writeback_mode_file_system_passes_fsync_rules_and_breaks_ordered_ones(
        schedule: str) -> None:
    failures = []
    for seed in range(3):
        fs = WritebackModeFS()
        assert FsPowerCutRun(fs, rules="fsync").run(ops_for(fs, seed, schedule)) == 10
        fs = WritebackModeFS()
        with pytest.raises(FsPowerCutFailure) as caught:
            FsPowerCutRun(fs, rules="ordered").run(ops_for(fs, seed, schedule))
        failures.append(caught.value.summary)
    assert all("broke ordered mode's 'size never before data': " in f for f in failures), \
        failures


def test_an_unknown_set_of_rules_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'posix' is not one of fsync\|ordered"):
        FsPowerCutRun(None, PAGE_SIZE, "posix")


@pytest.mark.parametrize(("bug", "rules"), [(bug, "fsync") for bug in POWER_CUT_BUGS]
                         + [(bug, "ordered") for bug in ORDERED_BUGS],
                         ids=lambda b: getattr(b, "__name__", b))
def test_each_crash_only_bug_fails_and_shrinks(bug: type[PowerCutFS], rules: str) -> None:
    with pytest.raises(FsPowerCutFailure) as caught:
        FsPowerCutRun(bug(), rules=rules).run(ops_for(bug(), 1))
    failure = caught.value
    assert failure.ops[-1] == CUT

    def fails_with(ops: list[FsOp]) -> str | None:
        try:
            FsPowerCutRun(bug(), rules=rules).run(ops)
        except FsPowerCutFailure as again:
            return again.summary
        return None

    report = cut_report("fs power cut", failure.summary, failure.ops, fails_with)
    assert "shrunk to" in report and report.splitlines()[-1] == "  power cut"


def test_a_name_two_files_had_reports_what_each_would_allow() -> None:
    run = FsPowerCutRun(None)
    run.run([FsOp("write", "a", 0, 10, 1), FsOp("fsync", "a"), FsOp("rename", "a", to="b"),
             FsOp("write", "a", 0, 5, 2)])
    problem = run.match({"a": b"z" * 5})
    assert problem is not None
    first, other = problem.split("; or, ")
    assert first == ("file 'a' broke fsync's promise: byte 0x0 (of 5) read 0x7a, allowed "
                     "0x00 (op 3: write a 0x0 0x5 (data 2)) or "     # as created, empty
                     f"{data_of(FsOp('write', 'a', 0, 5, 2))[0]:#04x} (op 3: write a 0x0 0x5 "
                     "(data 2))")
    assert other == ("as the file named 'a' then 'b' since op 1: fsync a: broke fsync's "
                     "promise: size 5, allowed 10 (op 1: fsync a)")


@pytest.mark.parametrize(("words", "source"), [
    (["--folio-power-cut-rules=posix"], "--folio-power-cut-rules"),
    (["-o", "folio_power_cut_rules=posix"], "ini key folio_power_cut_rules"),
])
def test_unknown_rules_given_to_the_plugin_are_a_usage_error(
        pytester: pytest.Pytester, words: list[str], source: str) -> None:
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider", *words)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{source}: 'posix' is not one of fsync|ordered"])
