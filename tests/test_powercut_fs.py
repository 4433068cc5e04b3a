"""The file-system power-cut rules (pytest_folio.fsx.powercut), on the correct PowerCutFS
and on hand-made states: fsync'd sizes, data and names survive; the rest is old or new;
an extension's size never lands before its data; nothing is invented."""

from __future__ import annotations

import pytest

from pytest_folio.constants import PAGE_SIZE
from pytest_folio.fsx.powercut import (
    CUT,
    SCHEDULES,
    FileStates,
    FsOp,
    FsPowerCutFailure,
    FsPowerCutRun,
    data_of,
    fs_powercut_ops,
)
from pytest_folio.powercut import cut_report
from tests.helpers.fsx_powercut import POWER_CUT_BUGS, PowerCutFS


def states(*datas: bytes) -> FileStates:
    f = FileStates("a", datas[0], "fsync", durable=True)
    for i, data in enumerate(datas[1:]):
        f.now[:] = data
        f.changed(f"op {i}")
    return f


def test_an_fsynced_file_reads_back_exactly() -> None:
    f = states(b"x" * 10)
    assert f.check(b"x" * 10, PAGE_SIZE) is None
    assert f.check(b"x" * 9, PAGE_SIZE) == "size 9, allowed 10 (fsync)"
    assert f.check(b"x" * 9 + b"y", PAGE_SIZE) == (
        "byte 0x9 (of 10) read 0x79, allowed 0x78 (fsync)")


def test_an_unsynced_change_reads_old_or_new_per_unit() -> None:
    old, new = b"o" * 2 * PAGE_SIZE, b"n" * 2 * PAGE_SIZE
    f = states(old, new)
    assert f.check(old[:PAGE_SIZE] + new[PAGE_SIZE:], PAGE_SIZE) is None
    problem = f.check(old[:PAGE_SIZE] + new[PAGE_SIZE:], 2 * PAGE_SIZE)
    assert problem is not None and "mixes two of its states" in problem


def test_an_extension_may_not_land_its_size_before_its_data() -> None:
    f = states(b"", b"d" * 100)
    assert f.check(b"", PAGE_SIZE) is None
    assert f.check(b"d" * 100, PAGE_SIZE) is None
    assert f.check(bytes(100), PAGE_SIZE) == (
        "byte 0x0 (of 100) read 0x00, allowed 0x64 (op 0)")


def test_a_name_nobody_had_is_invented() -> None:
    fs = PowerCutFS()
    run = FsPowerCutRun(fs)
    run.run([FsOp("write", "a", 0, 5, 1), FsOp("fsync", "a")])
    assert run.match({"a": bytes(run.files[0].now), "z": b""}) == (
        "the directory holds a, z: no file was named 'z' since its last fsync "
        "(a name invented)")


def test_a_renamed_fsynced_file_is_found_under_either_name() -> None:
    run = FsPowerCutRun(PowerCutFS())
    run.run([FsOp("write", "a", 0, 5, 1), FsOp("fsync", "a"), FsOp("rename", "a", to="b")])
    data = bytes(run.files[0].now)
    assert run.match({"a": data}) is None
    assert run.match({"b": data}) is None
    assert run.match({}) == ("the directory holds nothing: the file fsync'd as 'a' "
                             "(op 1: fsync a) is missing")
    assert run.match({"a": data, "b": data}) is not None      # one file, two names


@pytest.mark.parametrize("blocksize", [PAGE_SIZE, 16 * PAGE_SIZE])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_the_correct_file_system_passes_every_schedule(blocksize: int, schedule: str) -> None:
    for seed in range(3):
        assert FsPowerCutRun(PowerCutFS(blocksize)).run(
            fs_powercut_ops(seed, 10, schedule)) == 10


@pytest.mark.parametrize("bug", POWER_CUT_BUGS, ids=lambda b: b.__name__)
def test_each_crash_only_bug_fails_and_shrinks(bug: type[PowerCutFS]) -> None:
    with pytest.raises(FsPowerCutFailure) as caught:
        FsPowerCutRun(bug()).run(fs_powercut_ops(1, 10, "fsync"))
    failure = caught.value
    assert failure.ops[-1] == CUT

    def fails_with(ops: list[FsOp]) -> str | None:
        try:
            FsPowerCutRun(bug()).run(ops)
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
    assert first == "file 'a': byte 0x0 (of 5) read 0x7a, allowed " + (
        f"{data_of(FsOp('write', 'a', 0, 5, 2))[0]:#04x} (op 3: write a 0x0 0x5 (data 2))")
    assert other == "as the file named 'a' then 'b' since op 1: fsync a: size 5, allowed 10 " \
        "(op 1: fsync a)"
