"""Every input is bounded before it is read or built, and a bad one is one short line:
the replayed logs' readers (``.fsdiff`` like ``.fsxops`` and ``.mtdops``), the lengths
inside every log format, the quoting of a bad word."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from pytest_folio.cli import main
from pytest_folio.errors import CommandError
from pytest_folio.fsx.differential import (
    LOG_HEADER,
    MAX_REPLAY_LENGTH,
    dump_ops,
    generate,
    load_ops,
    supported,
)
from pytest_folio.fsx.log import FsxopsError, parse_fsxops
from pytest_folio.inputs import MAX_LOG_BYTES, excerpt, printable
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.mtdtests.log import MTDOpsError, parse_mtdops
from pytest_folio.timing.storage import Record, TimingRun
from pytest_folio.vm.vmoptions import check_cache, check_patch, host_memory

pytest_plugins = ["pytester"]

FS_TEST = "def test_f(filesystem):\n    open('ran', 'a').close()\n"


def _usage_error(pytester: pytest.Pytester, *args: str) -> str:
    pytester.makepyfile(FS_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    errors = [line for line in result.errlines if line.strip()]
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert len(errors) == 1, errors
    assert not (pytester.path / "ran").exists()
    return errors[0]


@pytest.mark.parametrize("option", ["--folio-fsx-replay", "--folio-mtd-replay",
                                    "--folio-fs-oracle-replay"])
def test_a_log_larger_than_the_limit_is_refused_before_it_is_read(
        pytester: pytest.Pytester, option: str) -> None:
    big = pytester.path / "big.log"
    with big.open("wb") as f:       # sparse: the size is checked, not the bytes
        f.truncate(MAX_LOG_BYTES + 1)
    line = _usage_error(pytester, f"{option}={big}")
    assert line == (f"ERROR: {option}: {big}: 16777217B is more than the 16M a log may "
                    "have")


@pytest.mark.parametrize(("line", "message"), [
    ('["open"]', "open takes 3 arguments (slot, name, flags), not 0"),
    ('["pread", "x", 1, 2]', "pread argument 1 must be a slot from 0 to 3, not '\"x\"'"),
    (f'["pread", 0, {4 << 30}, 0]', "pread argument 2 must be a length from 0 to 64 MiB"),
    ('["pwrite", 0, 10, ["eof", 0, 0], 1]', "pwrite argument 3 must be an offset"),
    ('["pwrite", 0, 10, 0, 1, 2]', "pwrite takes 4 arguments"),
    ('["unlink", "/etc/passwd"]', "unlink argument 1 must be a relative name"),
    ('["rename", "a", "../b"]', "rename argument 2 must be a relative name"),
    ('["open", 0, "a\\u0000", 66]', "open argument 2 must be a relative name"),
    ('["open", 0, "a", true]', "open argument 3 must be flags: an integer of 32 bits"),
    ('[{"a": 1}]', "not an operation: '[{\"a\": 1}]'"),
    ("[" * 100_000, "not JSON"),
    ("1" * 5000, "not JSON"),
], ids=["arity", "type", "4G-length", "anchor", "too-many", "absolute", "dotdot", "nul",
        "bool", "dict", "deep", "long-int"])
def test_a_malformed_fsdiff_line_is_one_short_line(tmp_path: Path, line: str,
                                                   message: str) -> None:
    with pytest.raises(ValueError) as info:
        load_ops(f"{LOG_HEADER}\n{line}\n", "x.fsdiff")
    text = str(info.value)
    assert text.startswith("x.fsdiff:2: ") and message in text, text
    assert "\n" not in text and len(text) < 300, text


def test_a_malformed_fsdiff_replay_is_a_usage_error(pytester: pytest.Pytester) -> None:
    log = pytester.path / "x.fsdiff"
    log.write_text(f'{LOG_HEADER}\n["pread", "x", 1, 2]\n')
    line = _usage_error(pytester, f"--folio-fs-oracle-replay={log}")
    assert line.startswith(f"ERROR: --folio-fs-oracle-replay: {log}:2: pread argument 1 ")


def test_every_generated_operation_passes_the_check() -> None:
    """The check refuses nothing the generator makes (a false refusal would make a
    saved log impossible to replay)."""
    families = supported(Ramfs(features="full")) | {"drop_caches", "offsets_4g",
                                                    "offsets_16t", "offsets_max"}
    for seed in range(20):
        ops = generate(seed, frozenset(families), 400, unit=2 << 20, maxlen=6 << 20)
        assert load_ops(dump_ops(ops)) == ops
    assert MAX_REPLAY_LENGTH >= 3 * (2 << 20)


def test_an_excerpt_is_short_and_escaped() -> None:
    assert excerpt("\x00" * (1 << 20)).startswith("'" + "\\x00" * 40 + "'...")
    assert len(excerpt("\x00" * (1 << 20))) < 200
    assert excerpt("abc") == "'abc'"
    assert printable("a\x1b]0;owned\x07b\nc\x9b") == "a\\x1b]0;owned\\x07b\nc\\x9b"


HEADER = "# device: d size=0x1000000 erasesize=0x20000\n"


@pytest.mark.parametrize(("log", "message"), [
    (HEADER + "write 0 0x7fffffffffffffff ff", "line 2: write of 0x7fffffffffffffff bytes: "
     "longer than an eraseblock past the end of the header's device"),
    (HEADER + "write 0 0x200000000 ff", "line 2: write of 0x200000000 bytes"),
    (HEADER + "read 0 0x1020001", "line 2: read of 0x1020001 bytes"),
    ("write 0 0x40000000 rand 1", "line 1: write of 0x40000000 bytes: longer than 64 MiB in "
     "a log without a '# device: ... size=... erasesize=...' header"),
])
def test_a_huge_mtdops_length_is_refused_before_its_data_is_made(log: str,
                                                                 message: str) -> None:
    with pytest.raises(MTDOpsError) as info:
        parse_mtdops(log)
    assert str(info.value).startswith(message), info.value


def test_the_longest_mtdops_operations_the_generators_make_still_parse() -> None:
    """An eraseblock past the end: the past-the-end probes (erase size-esz 2*esz)."""
    log = parse_mtdops(HEADER + "erase 0xfe0000 0x40000\nwrite 0 0x1000000 ff\n"
                       "read 0xfff000 0x2000")
    assert [op.length for op in log.ops] == [0x40000, 0x1000000, 0x2000]


@pytest.mark.parametrize("parse", ["fsxops", "mtdops", "fsdiff"])
@pytest.mark.parametrize("junk", ["\x00" * (1 << 20), "9" * 100_000, "0x" + "f" * 100_000])
@pytest.mark.parametrize("where", ["name", "number"])
def test_a_megabyte_word_is_quoted_as_a_short_excerpt(parse: str, junk: str,
                                                      where: str) -> None:
    """Each parser's error is its own one-line error quoting at most a short, escaped
    excerpt of the bad word (not the word, nor int()'s digit-limit ValueError)."""
    op, number = (junk, "1") if where == "name" else ("write", junk)
    error: type[ValueError]
    with pytest.raises(ValueError) as info:
        if parse == "fsxops":
            error = FsxopsError
            parse_fsxops(f"{op} 0 {number} 0\n", "x.fsxops")
        elif parse == "mtdops":
            error = MTDOpsError
            parse_mtdops(f"{op} 0 {number} ff\n")
        else:
            error = ValueError
            load_ops(f'{LOG_HEADER}\n["{op}", 0, {number}, 0, 1]\n', "x.fsdiff")
    message = str(info.value)
    assert isinstance(info.value, error)
    assert "\n" not in message and len(message) < 600, message[:700]
    assert "\x00" not in message


EVIL = "\x1b]0;owned\x07\x1b[2J\x9b31m"


def test_show_list_and_compare_escape_a_saved_runs_control_characters(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A saved run is a file anyone may hand over: its names never reach the terminal
    as escape sequences (retitle, clear screen, colour), and the columns still line up
    in ``list``."""
    run = TimingRun(
        records=[Record(suite=f"s{EVIL}", name=f"n{EVIL}", unit="ms", samples=[1.0, 2.0],
                        params={"folio": "16K"}, target=f"t{EVIL}")],
        machine={"host": f"h{EVIL}"}, settings={},
        meta={"version": "1", "git": {"commit": f"c{EVIL}", "dirty": False}})
    path = tmp_path / f"r{EVIL[:3]}.json"
    path.write_text(json.dumps(run.to_dict()))
    for args in (["show", str(path)], ["compare", str(path), str(path)],
                 ["list", "--storage", str(tmp_path / "none"), str(path)],
                 ["show", str(path), "--format", "csv"]):
        assert main(args) == 0, args
        out, err = capsys.readouterr()
        assert not any(c in out + err for c in "\x1b\x07\x9b"), (args, out)
        assert "\\x1b" in out, (args, out)


def test_a_command_error_escapes_what_it_quotes(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(tmp_path / f"missing{EVIL}.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "missing\\x1b" in err


def _vm_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["vm", *args, "--", "-x"]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err.removeprefix("python -m pytest_folio vm: error: ").rstrip("\n")


@pytest.mark.parametrize("kind", ["directory", "zero", "text", "fifo"])
def test_a_patch_that_is_not_one_says_what_it_is(tmp_path: Path, kind: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path, why = tmp_path, "is a directory, not a patch file"
    if kind == "zero":
        path, why = Path("/dev/zero"), "is a character device, not a patch file"
    elif kind == "text":
        path = tmp_path / "notes.patch"
        path.write_text("--- just a heading\nsome notes\n")
        why = "not a unified diff (no '@@ -N,N +N,N @@' hunk, no 'diff --git' line)"
    elif kind == "fifo":
        path = tmp_path / "p.patch"
        os.mkfifo(path)
        why = "is a FIFO, not a patch file"
    assert _vm_error(["--cache-dir", str(tmp_path / "c"), "--patch", str(path)],
                     capsys) == f"--patch {path}: {why}"


def test_a_patch_in_any_encoding_or_git_form_passes_the_check(tmp_path: Path) -> None:
    latin1 = tmp_path / "a.patch"
    latin1.write_bytes(b"From: Ren\xe9\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n")
    rename = tmp_path / "b.patch"
    rename.write_text("diff --git a/x b/y\nsimilarity index 100%\nrename from x\n"
                      "rename to y\n")
    for patch in (latin1, rename):
        check_patch(patch)


def test_option_files_of_the_wrong_kind_are_one_line(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    cache = tmp_path / "file"
    cache.write_text("")
    assert _vm_error(["--cache-dir", str(cache)], capsys) == (
        f"cache {cache}: is a regular file, not a directory (--cache-dir or "
        "PYTEST_FOLIO_CACHE names a directory)")
    assert _vm_error(["--cache-dir", str(tmp_path / "c"), "--dmesg", str(tmp_path)],
                     capsys) == (f"--dmesg {tmp_path}: is a directory, not a file to "
                                 "write the log to")
    assert _vm_error(["--cache-dir", str(tmp_path / "c"), "--dmesg",
                      str(tmp_path / "no" / "dmesg.txt")], capsys) == (
        f"--dmesg {tmp_path / 'no' / 'dmesg.txt'}: {tmp_path / 'no'} is not a directory")
    host = host_memory()
    assert host is not None
    assert _vm_error(["--cache-dir", str(tmp_path / "c"), "--mem", "100000000"], capsys) == (
        f"--mem 100000000 MiB is more than this host's memory and swap ({host >> 20} MiB)")
    guests = host // (1024 << 20) + 1
    assert _vm_error(["--cache-dir", str(tmp_path / "c"), "--guests", str(guests)],
                     capsys) == (
        f"{guests} guests of --mem 1024 MiB need more than this host's memory and swap "
        f"({host >> 20} MiB): fewer guests, a smaller --mem, or some on other machines "
        "with --host")
    assert _vm_error(["--cache-dir", str(tmp_path / "c"), "--cpus", "999"], capsys) == (
        "--cpus 999: qemu's q35 machine takes at most 288")


@pytest.mark.parametrize("how", ["others-write", "other-owner", "symlink"])
def test_every_directory_of_the_vm_cache_is_checked(tmp_path: Path, how: str,
                                                    capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    """A cache kept 0755 but holding a kernels/ anyone may write (or another user's, or
    a symlink to such a place) is refused like a cache anyone may write."""
    cache = tmp_path / "cache"
    (cache / "kernels" / "linux-image-1").mkdir(parents=True)
    cache.chmod(0o755)
    bad = cache / "kernels"
    if how == "others-write":
        bad.chmod(0o777)
        why = f"{bad}: writable by other users (mode 777)"
    elif how == "other-owner":
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another user needs root")
        os.chown(bad, 4242, -1)
        why = f"{bad}: owned by uid 4242"
    else:
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o777)
        elsewhere.chmod(0o777)
        bad = cache / "kernels" / "linux-image-2"
        bad.symlink_to(elsewhere)
        why = f"{bad}: writable by other users (mode 777)"
    assert _vm_error(["--cache-dir", str(cache)], capsys).startswith(f"cache {cache}: {why}")


def test_apts_own_download_directories_in_the_vm_cache_are_trusted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """apt downloads as its system user _apt into partial/ (mode 0700) and auxfiles/: a
    cache apt has used is still this user's (a refusal here stopped every VM run after
    the first); the same owner outside apt's state is refused."""
    if os.geteuid() != 0:
        pytest.skip("giving a directory to _apt needs root")
    try:
        apt_uid = pwd.getpwnam("_apt").pw_uid
    except KeyError:
        pytest.skip("this machine has no _apt user")
    cache = tmp_path / "cache"
    partial = cache / "apt" / "trixie" / "state" / "lists" / "partial"
    partial.mkdir(parents=True)
    for directory in (cache, *partial.parents):
        if directory.is_relative_to(cache):
            directory.chmod(0o755)
    partial.chmod(0o700)
    os.chown(partial, apt_uid, -1)
    auxfiles = partial.parent / "auxfiles"
    auxfiles.mkdir(mode=0o755)
    auxfiles.chmod(0o755)
    os.chown(auxfiles, apt_uid, -1)
    check_cache(cache)                                  # accepted
    imposter = cache / "kernels" / "partial"            # outside apt's state
    imposter.mkdir(parents=True, mode=0o755)
    imposter.chmod(0o755)
    os.chown(imposter, apt_uid, -1)
    with pytest.raises(CommandError, match=f"owned by uid {apt_uid}"):
        check_cache(cache)
