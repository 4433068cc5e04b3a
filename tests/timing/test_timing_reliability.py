"""Saved runs under faults and bad paths: an interrupted run never replaces a complete one,
only regular files are written or read, and files get the umask's mode."""

from __future__ import annotations

import json
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
                                 "run.interrupted.json,", "    not run.json"])
    assert load_run(pytester.path / "run.json") == old
    partial = load_run(pytester.path / "run.interrupted.json")
    assert not partial.complete and len(partial.records) == 4


def test_an_interrupted_run_is_not_autosaved(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_measure(folio_timer):\n"
                        "    folio_timer.record('x', [1.0])\n\n"
                        "def test_interrupt():\n    raise KeyboardInterrupt\n")
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
    assert line.startswith(f"ERROR: --folio-save: {target}: {expected}")
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


@pytest.mark.parametrize("args", [["--co"], ["-k", "nothing_matches"]], ids=["co", "exit5"])
def test_a_run_that_measured_nothing_saves_nothing(pytester: pytest.Pytester,
                                                   args: list[str]) -> None:
    pytester.makepyfile(SLOW.replace("COUNT", "2").replace("DELAY", "0"))
    old = _old_run(pytester.path / "run.json")
    result = pytester.runpytest("--folio-save=run.json", "--folio-autosave", *args)
    result.stdout.fnmatch_lines(["folio: nothing was measured: not saved*"])
    assert load_run(pytester.path / "run.json") == old
    assert not (pytester.path / ".folio").exists()


SECOND_INTERRUPT = """
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo):
    raise KeyboardInterrupt     # a second Ctrl-C while pytest handles the first
"""


def test_a_second_ctrl_c_is_still_an_interrupt(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(SECOND_INTERRUPT)
    pytester.makepyfile(SLOW.replace("COUNT", "3").replace("DELAY", "0") + """
def test_interrupt():
    raise KeyboardInterrupt
""")
    old = _old_run(pytester.path / "run.json")
    pytester.runpytest_subprocess("--folio-save=run.json")
    assert load_run(pytester.path / "run.json") == old
    partial = load_run(pytester.path / "run.interrupted.json")
    assert not partial.complete and len(partial.records) == 3


def test_autosave_into_an_unwritable_folio_directory_is_refused_before_the_tests(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    open('ran', 'w').close()\n")
    (pytester.path / ".folio").write_text("not a directory")
    line = _usage_error(pytester.runpytest("--folio-autosave"))
    assert line.startswith("ERROR: --folio-autosave: ")
    assert "is not a directory" in line
    assert not (pytester.path / "ran").exists()


def test_an_ini_save_error_names_the_ini_key(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    pytester.makeini("[pytest]\nfolio_save = missing/run.json\n")
    line = _usage_error(pytester.runpytest())
    assert line.startswith("ERROR: ini key folio_save: missing/run.json: directory")


def test_concurrent_autosaves_take_unique_numbers(tmp_path: Path) -> None:
    script = ("import sys, time\n"
              "from pathlib import Path\n"
              "from pytest_folio.timing.autosave import autosave\n"
              "from pytest_folio.timing.storage import Record, TimingRun\n"
              "run = TimingRun(records=[Record(suite='s', name='n', unit='ms', "
              "samples=[1.0])], meta={'git': {'commit': sys.argv[1] * 8}})\n"
              "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
              "print(autosave(run, Path(sys.argv[3])))\n")
    start = time.time() + 2
    procs = [subprocess.Popen([sys.executable, "-c", script, "abcdef"[i], str(start),
                               str(tmp_path / ".folio")], env=subprocess_env(),
                              stdout=subprocess.PIPE, text=True) for i in range(6)]
    names = [p.communicate()[0].strip() for p in procs]
    numbers = sorted(Path(n).name.split("_")[0] for n in names)
    assert numbers == [f"{i:04d}" for i in range(1, 7)], names


def _edited(tmp_path: Path, name: str, **changes: object) -> Path:
    """A saved run with top-level keys (or, as ``m_KEY``, its measurement's) replaced."""
    run = TimingRun(records=[Record(suite="s", name="n", unit="ms", samples=[1.0, 2.0],
                                    counters={"c": 3})], machine={"memcpy_gbps": 10.0})
    data = run.to_dict()
    for key, value in changes.items():
        if key.startswith("m_"):
            data["measurements"][0][key[2:]] = value
        elif key.startswith("machine_"):
            data["machine"][key[8:]] = value
        else:
            data[key] = value
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("change", "expected"), [
    ({"meta": {"git": "abc"}}, "'meta.git' is not an object"),
    ({"meta": {"git": {"commit": 7}}}, "'meta.git.commit' is not a string"),
    ({"m_counters": {"c": "many"}}, "counter 'c' is not a whole number"),
    ({"version": True}, "timing format version True"),
    ({"created": 5}, "'created' is not a string"),
    ({"complete": "no"}, "'complete' is not true or false"),
    ({"machine_memcpy_gbps": 0}, "'machine.memcpy_gbps' is not a positive number"),
    ({"machine_memcpy_gbps": -1}, "'machine.memcpy_gbps' is not a positive number"),
    ({"hosts": {"h": 1}}, "'hosts.h' is not an object"),
    ({"m_params": {"folio": [1]}}, "'params.folio' is not a string or number"),
], ids=["git", "commit", "counter", "version", "created", "complete", "bw0", "bw-1",
        "hosts", "param"])
@pytest.mark.parametrize("command", ["show", "compare", "compare-counter"])
def test_a_hand_edited_run_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       change: dict[str, object], expected: str,
                                       command: str) -> None:
    good = _edited(tmp_path, "good.json")
    bad = _edited(tmp_path, "bad.json", **change)
    args = {"show": ["show", str(bad)], "compare": ["compare", str(good), str(bad)],
            "compare-counter": ["compare", "--normalise", "--counter", "c", str(bad),
                                str(good)]}[command]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}: " in err and expected in err, err


def test_compare_fail_against_a_run_with_nothing_in_common_fails(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_m(folio_timer):\n    folio_timer.record('mine', [1.0, 1.0])\n")
    _old_run(pytester.path / "base.json")
    result = pytester.runpytest("--folio-compare=base.json", "--folio-compare-fail=5")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["folio: regression gate: nothing to compare*"])


def test_bandwidth_of_a_zero_time_is_one_line(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    save_run(TimingRun(records=[Record(suite="s", name="n", unit="ms", samples=[0.0],
                                       params={"bs": "4K"}, extra={"bytes": 4096})]),
             tmp_path / "z.json")
    assert main(["bandwidth", str(tmp_path / "z.json")]) == 2
    assert capsys.readouterr().err == ("python -m pytest_folio bandwidth: error: n at 4K: a "
                                       "time of 0 ms has no bandwidth\n")


def test_a_run_stopped_by_exitfirst_is_complete(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(folio_timer):\n    folio_timer.record('x', [1.0])\n\n"
                        "def test_b():\n    assert 0\n\ndef test_c():\n    pass\n")
    result = pytester.runpytest("-x", "--folio-save=run.json")
    result.stdout.fnmatch_lines(["folio: saved 1 measurements to run.json"])
    assert load_run(pytester.path / "run.json").complete
