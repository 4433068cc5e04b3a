"""Saved runs under faults and bad paths: an interrupted run never replaces a complete one,
only regular files are written or read, and files get the umask's mode."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_folio.cli import main
from pytest_folio.timing.storage import Record, TimingRun, load_run, save_run
from tests.helpers import subprocess_env

pytest_plugins = ["pytester"]

SLOW = """
import time
import pytest

@pytest.mark.parametrize("i", range(COUNT))
def test_slow(folio_timer, i):
    folio_timer.record("step", [1.0 + i])
    time.sleep(DELAY)
"""


def _old_run(path: Path) -> TimingRun:
    run = TimingRun(records=[Record(suite="old", name="old", unit="ms", samples=[1.0])])
    save_run(run, path)
    return run


def _usage_error(result: pytest.RunResult) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1, errors
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    return errors[0]


def test_ctrl_c_keeps_the_complete_run_and_writes_the_partial_one_beside_it(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(SLOW.replace("COUNT", "4").replace("DELAY", "0") + """
def test_interrupt():
    raise KeyboardInterrupt
""")
    old = _old_run(pytester.path / "run.json")
    result = pytester.runpytest_subprocess("--folio-save=run.json")   # own process: Ctrl-C
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["folio: the run was interrupted: its 4 measurements went to "
                                 "run.interrupted.json, not run.json"])
    assert load_run(pytester.path / "run.json") == old
    partial = load_run(pytester.path / "run.interrupted.json")
    assert not partial.complete and len(partial.records) == 4


def test_an_interrupted_run_is_not_autosaved(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_interrupt(folio_timer):\n"
                        "    folio_timer.record('x', [1.0])\n    raise KeyboardInterrupt\n")
    result = pytester.runpytest_subprocess("--folio-autosave")
    result.stdout.fnmatch_lines(["folio: the run was interrupted: not autosaved"])
    assert not (pytester.path / ".folio").exists()


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_a_run_stopped_at_random_points_leaves_a_complete_run_at_the_path(
        tmp_path: Path, how: signal.Signals) -> None:
    """Stop a saving run (xdist and serial) at seeded random moments, from start-up to
    the save itself: the file at the path is always a complete run, the old or the new."""
    count = 30
    (tmp_path / "test_slow.py").write_text(
        SLOW.replace("COUNT", str(count)).replace("DELAY", "0.02"))
    path = tmp_path / "run.json"
    old = _old_run(path)
    env = subprocess_env()
    rng = random.Random(20261201)              # pinned: the same moments every run
    for attempt in range(6):
        dist = ["-n", "2"] if attempt % 2 else []
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_slow.py",
             "--folio-save=run.json", *dist], cwd=tmp_path, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 4.0))
        proc.send_signal(how)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        saved = load_run(path)
        assert saved.complete
        assert saved == old or len(saved.records) == count
        partial = tmp_path / "run.interrupted.json"
        if partial.exists():
            assert not load_run(partial).complete
        if how == signal.SIGINT:        # a handled stop cleans up; SIGKILL may leave one
            assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("kind", ["device", "fifo", "symlink"])
def test_saving_onto_a_device_fifo_or_symlink_is_refused(pytester: pytest.Pytester,
                                                         kind: str) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    target = pytester.path / "t.json"
    if kind == "device":
        target = Path("/dev/null")
    elif kind == "fifo":
        os.mkfifo(target)
    else:
        (pytester.path / "real.json").write_text("keep")
        target.symlink_to(pytester.path / "real.json")
    line = _usage_error(pytester.runpytest(f"--folio-save={target}"))
    expected = {"device": "is not a regular file", "fifo": "is not a regular file",
                "symlink": "is a symlink; name the file itself"}[kind]
    assert line.startswith(f"ERROR: --folio-save {target}: {expected}")
    if kind == "device":
        assert Path("/dev/null").is_char_device()
    elif kind == "symlink":
        assert target.is_symlink() and (pytester.path / "real.json").read_text() == "keep"


@pytest.mark.parametrize("exists", [False, True], ids=["missing", "existing"])
def test_saving_to_a_directory_name_is_refused(pytester: pytest.Pytester,
                                               exists: bool) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    if exists:
        (pytester.path / "out").mkdir()
    line = _usage_error(pytester.runpytest("--folio-save=out/"))
    assert line == ("ERROR: --folio-save: out/: names a directory; give a file name "
                    "(out/run.json)")
    assert not (pytester.path / "out").is_file()


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_saved_files_follow_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        save_run(TimingRun(records=[]), tmp_path / "r.json")
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_compare_of_deeply_nested_json_is_one_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    _old_run(tmp_path / "ok.json")
    assert main(["compare", str(tmp_path / "deep.json"), str(tmp_path / "ok.json")]) == 2
    err = capsys.readouterr().err
    assert err == (f"python -m pytest_folio compare: error: {tmp_path / 'deep.json'}: not a "
                   "pytest-folio timing file (JSON nested too deeply)\n")


def test_compare_of_a_fifo_is_one_line_and_does_not_hang(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    os.mkfifo(pytester.path / "pipe.json")
    start = time.monotonic()
    line = _usage_error(pytester.runpytest("--folio-compare=pipe.json"))
    assert time.monotonic() - start < 30
    assert line == ("ERROR: --folio-compare: pipe.json: is not a regular file (a device, "
                    "FIFO or socket), not a timing file")
