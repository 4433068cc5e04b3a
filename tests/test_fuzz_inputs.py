"""Random input to everything that reads a user's file or command line: saved runs
(``show``, ``compare``, ``list``), operation logs (.fsxops, .mtdops, .fsdiff) and the
command lines of ``check``, ``shrink`` and the ``vm`` option checks, each a valid input
edited a few times. A user's input is never a traceback: a result, or one line and an
exit code."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_folio.cli import main
from pytest_folio.fsx.differential import (
    LOG_HEADER,
    MAX_REPLAY_LENGTH,
    SLOTS,
    Runner,
    generate,
    load_ops,
    supported,
)
from pytest_folio.fsx.log import (
    FSYNC_NOTE,
    OP_NAMES,
    FsxopsError,
    LogEntry,
    fsxops_line,
    op_args_count,
    parse_fsxops,
)
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.mtdtests.log import FILLS, MTDLog, MTDOpsError, Op, parse_mtdops
from pytest_folio.mtdtests.log import KINDS as MTD_KINDS
from pytest_folio.timing.storage import Record, TimingRun
from pytest_folio.vm.vmoptions import VMOptions, check_options

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8)


def _valid() -> dict[str, Any]:
    run = TimingRun(
        records=[Record(suite="s", name="n", unit="ms", samples=[1.0, 2.0],
                        params={"folio": "16K"}, counters={"c": 3}, extra={"bytes": 4096},
                        target="reference")],
        machine={"memcpy_gbps": 10.0, "host": "h"}, settings={"mtd_size": 1 << 24},
        meta={"version": "1", "git": {"commit": "abc", "dirty": False}})
    return run.to_dict()


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into a JSON document, the document itself first."""
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += _paths(value, (*prefix, i))
    return found


def _replace(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    data[path[0]] = _replace(data[path[0]], path[1:], value)
    return data


def _run_cli(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, err.getvalue()


@FUZZ
@given(st.data())
def test_show_and_compare_of_an_edited_run_is_a_table_or_one_line(data: st.DataObject) -> None:
    edited = _valid()
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(edited)))
        edited = _replace(edited, path, data.draw(json_values))
    with tempfile.TemporaryDirectory() as tmp:
        good, bad = Path(tmp, "good.json"), Path(tmp, "bad.json")
        good.write_text(json.dumps(_valid()))
        bad.write_text(json.dumps(edited))
        for args in (["show", str(bad)], ["compare", str(good), str(bad)],
                     ["compare", "--normalise", "--counter", "c", str(bad), str(good)],
                     ["compare", str(bad), str(good), str(bad)], ["bandwidth", str(bad)]):
            code, err = _run_cli(args)
            assert code in (0, 2), (args, code)
            if code == 2:
                assert err.count("\n") == 1 and "Traceback" not in err, (args, err)


# Words an edit puts into a log: the parsers' own vocabulary, numbers in every form C's
# strtoul and Python's int(x, 0) read or almost read, and anything else.
_numbers = (st.integers(0, 1 << 20) | st.integers(-2**70, 2**70)
            | st.sampled_from([-1, 1 << 30, (1 << 64) - 1, 1 << 64])).flatmap(
    lambda n: st.sampled_from([str(n), hex(n), oct(n), f"0{abs(n):o}", f"{n}k", f"{n:#X}"]))
_log_words = _numbers | st.text(max_size=6) | st.sampled_from(
    [*OP_NAMES, "read_dontcache", "write_atomic", "skip", *MTD_KINDS, "cut", "*",
     "keep_size", "close_open", "unshare", *FILLS, "#", FSYNC_NOTE,
     "# device: d size=0x100000 erasesize=0x4000", "0x", "0b1", "1_000", "\x00", "\u00b2"])
_offsets = st.integers(0, 1 << 20) | st.sampled_from([1 << 30, (1 << 64) - 1, 1 << 64])
_fsx_lines = st.builds(
    lambda op, args, flags: fsxops_line(LogEntry(op, tuple(args[:op_args_count(op)]), flags)),
    st.integers(0, len(OP_NAMES) - 1), st.lists(_offsets, min_size=4, max_size=4),
    st.integers(0, 15))
_mtd_lines = st.builds(lambda kind, offset, length, fill, seed: str(
    Op(kind, offset, length, fill if kind == "write" else "", seed)),
    st.sampled_from(MTD_KINDS), _offsets, _offsets, st.sampled_from(FILLS), _offsets)


def _edit(data: st.DataObject, rows: list[list[Any]], new: st.SearchStrategy[Any],
          most: int) -> None:
    """Up to ``most`` edits of ``rows`` in place: an item of a row replaced by one drawn
    from ``new``, one inserted, or one removed."""
    for _ in range(data.draw(st.integers(0, most))):
        row = rows[data.draw(st.integers(0, len(rows) - 1))]
        at = data.draw(st.integers(0, len(row)))
        edit = data.draw(st.sampled_from(["replace", "insert", "remove"]))
        if edit != "insert" and at < len(row):
            del row[at]
        if edit != "remove":
            row.insert(at, data.draw(new))


def _edited_log(data: st.DataObject, head: str, lines: st.SearchStrategy[str]) -> str:
    """A valid log with up to four edits: a word replaced, inserted or removed."""
    log = [head.split(), *(line.split() for line in data.draw(st.lists(lines, max_size=5)))]
    _edit(data, log, _log_words, 4)
    return "\n".join(" ".join(words) for words in log)


@FUZZ
@given(st.data())
def test_an_edited_fsxops_log_parses_or_is_one_line(data: st.DataObject) -> None:
    text = _edited_log(data, FSYNC_NOTE, _fsx_lines)
    try:
        parse_fsxops(text, "x.fsxops")
    except FsxopsError as exc:
        assert str(exc).startswith("x.fsxops") and "\n" not in str(exc), (text, exc)


@FUZZ
@given(st.data())
def test_an_edited_mtdops_log_parses_or_is_one_line(data: st.DataObject) -> None:
    text = _edited_log(data, "# device: d size=0x100000 erasesize=0x4000", _mtd_lines)
    try:
        log = parse_mtdops(text)
    except MTDOpsError as exc:
        assert str(exc) and "\n" not in str(exc), (text, exc)
        return
    assert MTDLog.from_data(log.to_data()) == log     # what an xdist worker gets of it


# -- .fsdiff: the differential log ----------------------------------------------------------
_json_edits = json_values | st.sampled_from(
    [["eof", 0, 0], ["eof", 1, -(1 << 63)], ["eof", 4096, 1 << 64], "/etc", "../x", "a\x00",
     "", "d/", True, 1.5, -1, 1 << 63, MAX_REPLAY_LENGTH + 1, 4 << 30, SLOTS])


@FUZZ
@given(st.data())
def test_an_edited_fsdiff_log_loads_and_runs_or_is_one_line(data: st.DataObject) -> None:
    """An edited differential log is refused in one line, or every operation it holds
    runs on the reference without an exception other than an errno (the check before
    the replay is complete: nothing it lets through crashes the comparison)."""
    families = supported(Ramfs(features="full")) | {"drop_caches"}
    ops = [list(op) for op in generate(data.draw(st.integers(0, 1 << 16)),
                                       frozenset(families), 6)]
    _edit(data, ops, _json_edits, 3)
    lines = [json.dumps(op) for op in ops]
    if data.draw(st.booleans()):        # and now and then a word of the text itself
        line = data.draw(st.integers(0, len(lines) - 1))
        lines[line] = lines[line].replace(",", data.draw(_log_words), 1)
    try:
        loaded = load_ops("\n".join([LOG_HEADER, *lines]), "x.fsdiff")
    except ValueError as exc:
        assert str(exc).startswith("x.fsdiff") and "\n" not in str(exc), exc
        assert len(str(exc)) < 400, exc
        return
    runner = Runner(Ramfs(features="full"))
    for step in loaded:
        runner.apply(runner.resolve(step))
    runner.close_all()


# -- the command-line entry points: edited valid command lines -------------------------------
_ARG_WORDS = st.sampled_from([
    "reference", "reference:api=folio", "reference:colour=red", "reference:features=full",
    "os:getcwd", "/nonexistent", "--mtd", "--fs", "--size", "--erasesize", "--blocksize",
    "--folio-order", "1M", "64K", "4K", "0", "-1", "3", "lots", "--seconds", "0.2", "nan",
    "-o", "--in-place", "--folio-fs", "--folio-mtd", "--fsx-args", "-l 4096", "--storage",
    "--format", "csv", "--statistic", "min", "--", "--mem", "100000000", "--cpus",
    "--cache-dir", "--dmesg", "--patch", "--kernel", "debian:../x", "--modules",
    "--mtd-size", "--timeout", "--interleave", "--no-build", "--build-kernel",
    "--kernel-args", "a\nb", "\x1b[2J", "--power-cut"]) | st.text(max_size=6)


def _edited_argv(data: st.DataObject, valid: list[str]) -> list[str]:
    argv = list(valid)
    for _ in range(data.draw(st.integers(0, 3))):
        at = data.draw(st.integers(0, len(argv)))
        edit = data.draw(st.sampled_from(["replace", "insert", "remove"]))
        if edit != "insert" and at < len(argv):
            del argv[at]
        if edit != "remove":
            argv.insert(at, data.draw(_ARG_WORDS))
    return argv


def _one_line_or_success(argv: list[str], codes: tuple[int, ...] = (0, 2)) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:          # argparse: its one usage line, exit 2
            code = exc.code if isinstance(exc.code, int) else 2
    assert code in codes, (argv, code, err.getvalue())
    if code:
        assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue(), (
            argv, err.getvalue())
        assert "\x1b" not in err.getvalue()


@FUZZ
@given(st.data())
def test_an_edited_check_command_line_is_a_report_or_one_line(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["--mtd", "--fs"]))
    valid = ["check", "reference", kind, "--size", "1M", "--erasesize", "64K"] \
        if kind == "--mtd" else ["check", "reference", kind, "--blocksize", "4K"]
    _one_line_or_success(_edited_argv(data, valid))


@FUZZ
@given(st.data())
def test_an_edited_shrink_command_line_and_log_is_a_result_or_one_line(
        data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        mtd = data.draw(st.booleans())
        log = Path(tmp, "x.mtdops" if mtd else "x.fsxops")
        log.write_text(_edited_log(data, "# device: d size=0x100000 erasesize=0x4000", _mtd_lines)
                       if mtd else _edited_log(data, FSYNC_NOTE, _fsx_lines))
        valid = ["shrink", str(log), "--seconds", "0.5", "-o", str(Path(tmp, "out"))]
        _one_line_or_success(_edited_argv(data, valid))


@FUZZ
@given(st.data())
def test_an_edited_list_of_saved_runs_is_a_listing_or_one_line(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(data.draw(st.integers(0, 2))):
            edited = _valid()
            path = data.draw(st.sampled_from(_paths(edited)))
            edited = _replace(edited, path, data.draw(json_values))
            Path(tmp, f"{n + 1:04d}_run.json").write_text(json.dumps(edited))
        _one_line_or_success(_edited_argv(data, ["list", "--storage", tmp]))


@FUZZ
@given(st.data())
def test_edited_vm_options_are_checked_or_one_line(data: st.DataObject) -> None:
    """The ``vm`` option checks alone (a command line they pass would boot a guest)."""
    with tempfile.TemporaryDirectory() as tmp:
        patch = Path(tmp, "x.patch")
        patch.write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
        valid = ["vm", "--cache-dir", str(Path(tmp, "cache")), "--patch", str(patch),
                 "--mem", "1024", "--dmesg", str(Path(tmp, "dmesg.txt")), "--", "-x"]
        argv = _edited_argv(data, valid)

        def checked_only(args: argparse.Namespace) -> VMOptions:
            check_options(args)
            raise SystemExit(0)         # passed: no guest is booted

        with mock.patch("pytest_folio.vm.runner.check_options", checked_only):
            _one_line_or_success(argv)
