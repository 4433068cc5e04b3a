"""Option values that used to slip through to the tests: every one is a single usage
error (exit 4) before any test runs, naming the option or the ini key it came from."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pytest_folio.cli import main

pytest_plugins = ["pytester"]

MTD_TEST = "def test_m(mtd_device):\n    open('ran', 'a').close()\n"
FS_TEST = "def test_f(filesystem):\n    open('ran', 'a').close()\n"


def _usage_error(pytester: pytest.Pytester, *args: str, test: str = MTD_TEST) -> str:
    pytester.makepyfile(test)
    result = pytester.runpytest(*args)
    errors = [line for line in result.errlines if line.strip()]
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert len(errors) == 1, errors
    assert not (pytester.path / "ran").exists()
    return errors[0]


@pytest.mark.parametrize(("args", "expected"), [
    (["--folio-erasesizes=4K,4K"], "ERROR: --folio-erasesizes: erasesize 4K is given twice"),
    (["--folio-mtd=reference:api=page,api=folio"],
     "ERROR: --folio-mtd: knob api is given twice ('page' and 'folio')"),
    (["--folio-fs=reference:memory=1M,memory=2M"],
     "ERROR: --folio-fs: knob memory is given twice ('1M' and '2M')"),
], ids=["erasesizes", "mtd-knob", "fs-knob"])
def test_a_value_given_twice_is_one_line(pytester: pytest.Pytester, args: list[str],
                                         expected: str) -> None:
    assert _usage_error(pytester, *args).startswith(expected)


def test_a_reference_device_too_big_to_reserve_is_one_line(pytester: pytest.Pytester) -> None:
    line = _usage_error(pytester, "--folio-mtd-size=1T")
    assert line.startswith("ERROR: --folio-mtd-size: cannot reserve ")


def test_a_pseudo_file_system_as_folio_fs_is_one_line(pytester: pytest.Pytester) -> None:
    line = _usage_error(pytester, "--folio-fs=/proc", test=FS_TEST)
    assert line.startswith("ERROR: --folio-fs: /proc: cannot create a directory in it")


def test_a_size_map_without_a_block_size_is_one_line(pytester: pytest.Pytester) -> None:
    (pytester.path / "a").mkdir()
    line = _usage_error(pytester, f"--folio-fs=4K={pytester.path / 'a'}",
                        "--folio-block-sizes=4K,16K", test=FS_TEST)
    assert line == ("ERROR: --folio-fs: the size map has no directory for 16K blocks "
                    "(--folio-block-sizes: 4K,16K)")


@pytest.mark.parametrize("option", ["--folio-fsx-replay", "--folio-mtd-replay",
                                    "--folio-fs-oracle-replay"])
@pytest.mark.parametrize("kind", ["fifo", "zero", "directory"])
def test_replaying_a_fifo_device_or_directory_is_one_line(pytester: pytest.Pytester,
                                                          option: str, kind: str) -> None:
    """Named by what it is (a directory's path, not a descriptor number)."""
    path, what = Path("/dev/zero"), "a character device"
    if kind == "fifo":
        path, what = pytester.path / "log", "a FIFO"
        os.mkfifo(path)
    elif kind == "directory":
        path, what = pytester.path, "a directory"
    line = _usage_error(pytester, f"{option}={path}")
    assert line == f"ERROR: {option}: {path}: is {what}, not a log file"


def test_ini_lists_as_toml_arrays_are_accepted(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\nfolio_orders = [0, 2]\n"
                               "folio_block_sizes = ['4k', '16k']\n")
    pytester.makepyfile("def test_x(folio_order, block_size):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_a_toml_array_for_a_single_value_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\nfolio_mtd = ['reference']\n")
    line = _usage_error(pytester)
    assert line == ("ERROR: ini key folio_mtd: takes one value, not a list "
                    "(write it as a string)")


@pytest.mark.parametrize(("ini", "expected"), [
    ("folio_mtd = nosuch.module:factory", "ERROR: ini key folio_mtd: "),
    ("folio_fs = /no/such/dir", "ERROR: ini key folio_fs: "),
    ("folio_fsx_replay = missing.fsxops", "ERROR: ini key folio_fsx_replay: "),
    ("folio_mtd_replay = missing.mtdops", "ERROR: ini key folio_mtd_replay: "),
    ("folio_compare = missing.json", "ERROR: ini key folio_compare: "),
    ("folio_compare_fail = 5", "ERROR: ini key folio_compare_fail needs "),
    ("folio_erasesizes = 4K,4K", "ERROR: ini key folio_erasesizes: "),
], ids=lambda v: v.split()[0] if " = " in v else "")
def test_errors_from_an_ini_key_name_the_key(pytester: pytest.Pytester, ini: str,
                                             expected: str) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    assert _usage_error(pytester).startswith(expected)


def _bind_read_only(source: Path, target: Path) -> None:
    try:
        subprocess.run(["mount", "--bind", str(source), str(target)], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot bind-mount here (needs root and mount): {exc}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(target)], check=True,
                       capture_output=True)
    except subprocess.CalledProcessError as exc:
        subprocess.run(["umount", str(target)], check=False)
        pytest.skip(f"cannot remount read-only here: {exc.stderr!r}")


def test_a_read_only_mount_as_folio_fs_says_so(pytester: pytest.Pytester) -> None:
    source, mnt = pytester.path / "src", pytester.path / "mnt"
    source.mkdir()
    mnt.mkdir()
    _bind_read_only(source, mnt)
    try:
        line = _usage_error(pytester, f"--folio-fs={mnt}", test=FS_TEST)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
    assert line == f"ERROR: --folio-fs: {mnt}: is on a read-only file system"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_vm_timeout_must_be_finite(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["vm", "--timeout", value, "--", "-k", "x"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--timeout" in err, err
