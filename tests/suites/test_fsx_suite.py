"""The suite as users run it: the ready-to-run module, a subclass with its own fixture,
the failure message with its .fsxops file and replay command, and the replay itself."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from pytest_folio.files import name_for
from pytest_folio.fsx.log import FL_KEEP_SIZE, OP_NAMES, read_fsxops

# test_fsx alone, without its aligned, large-file and Hypothesis siblings
FSX_ONLY = ("test_fsx and not hypothesis and not aligned and not large_file "
            "and not long_transfers")

USER_MODULE = """
import pytest
from tests.helpers.fsx_broken import PunchHoleOffByOnePage
from tests.helpers.fsx_memfs import MemFS
from pytest_folio.suites.fsx import FsxSuite


class TestHealthy(FsxSuite):
    fsx_args = "-l 64k -o 16k"

    @pytest.fixture
    def filesystem(self):
        return MemFS()


class TestBroken(FsxSuite):
    @pytest.fixture
    def filesystem(self):
        return PunchHoleOffByOnePage(MemFS())
"""


def test_ready_to_run_module_at_each_block_size(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
import json

def pytest_folio_measurement(item, measurement):
    with open("measurements.jsonl", "a") as out:
        out.write(json.dumps(measurement.to_dict()) + "\\n")
""")
    result = pytester.runpytest(
        "-p", "pytest_folio", "--pyargs", "pytest_folio.suites.test_fsx", "-v",
        "--folio-fs=reference:features=full", "--folio-block-sizes=4k,2M",
        "--folio-fsx-ops=2000", "--folio-fsx-seed=5", "-k", FSX_ONLY)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*TestFsx::test_fsx?4K? PASSED*",
                                 "*TestFsx::test_fsx?2M? PASSED*"])
    # each run announces its rate to the timing collector
    measured = [json.loads(line) for line in
                (pytester.path / "measurements.jsonl").read_text().splitlines()]
    assert sorted(m["params"]["bs"] for m in measured) == ["2M", "4K"]
    for m in measured:
        assert (m["suite"], m["unit"], m["target"]) == ("fsx", "ops/s",
                                                        "reference:features=full")
        assert m["samples"][0] > 0 and m["extra"]["operations"] == 2000


def test_subclass_with_own_fixture_fails_with_replay_command(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_MODULE)
    fsx_dir = pytester.path / "fsxlogs"
    result = pytester.runpytest(
        "-p", "pytest_folio", "--folio-fsx-seed=3", "--folio-fsx-ops=3000",
        "--folio-block-sizes=4k", f"--folio-fsx-dir={fsx_dir}", "-rf", "-k", FSX_ONLY)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    # the fsx report section: fsx's own formats
    assert "READ BAD DATA: offset = 0x" in out
    assert "OFFSET      GOOD    BAD     RANGE" in out
    assert re.search(r"LOG DUMP \(\d+ total operations\):", out)
    assert "All 3000 operations completed A-OK!" not in out  # passing output stays quiet
    summary = re.search(r"fsx: READ BAD DATA: .*first bad offset (0x[0-9a-f]+)", out)
    assert summary is not None
    ops = fsx_dir / f"{name_for('test_user.py::TestBroken::test_fsx')}.fsxops"
    assert f"fsx: operation log: {ops}" in out
    replay = re.search(r"fsx: replay it: (python -m pytest .*)", out)
    assert replay is not None
    words = shlex.split(replay.group(1))
    assert words[:5] == ["python", "-m", "pytest", "-p", "pytest_folio"]
    assert words[5] == f"{pytester.path / 'test_user.py'}::TestBroken::test_fsx"
    assert f"--folio-fsx-replay={ops}" in words and "--folio-seed=3" in words
    assert re.search(r"fsx: rerun the random run: python -m pytest .*--folio-fsx-ops=3000",
                     out)
    # the passing classes kept their logs too (--folio-fsx-dir records them)
    assert (fsx_dir / f"{name_for('test_user.py::TestHealthy::test_fsx')}.fsxops").is_file()

    # run the printed command: the replay fails the same way, at the same offset
    again = pytester.runpytest(*words[3:], "-rf")
    again.assert_outcomes(failed=1)
    again_out = again.stdout.str()
    assert f"fsx: replaying {ops} (" in again_out
    assert f"first bad offset {summary.group(1)}" in again_out
    assert "rerun the random run" not in again_out


def test_replay_file_errors_are_usage_errors(pytester: pytest.Pytester) -> None:
    bad = pytester.path / "bad.fsxops"
    bad.write_text("write 0x0 0x10 0x0\nsplice 0x0 0x0 0x0\n")
    result = pytester.runpytest(
        "-p", "pytest_folio", f"--folio-fsx-replay={bad}", "--pyargs",
        "pytest_folio.suites.test_fsx")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: --folio-fsx-replay: {bad}:2: parse error: unknown operation 'splice'*"])
    missing = pytester.runpytest(
        "-p", "pytest_folio", "--folio-fsx-replay=nope.fsxops", "--pyargs",
        "pytest_folio.suites.test_fsx")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["ERROR: --folio-fsx-replay: cannot read nope.fsxops*"])
    not_dir = pytester.runpytest("-p", "pytest_folio", f"--folio-fsx-dir={bad}", "--pyargs",
                                 "pytest_folio.suites.test_fsx")
    assert not_dir.ret == pytest.ExitCode.USAGE_ERROR
    not_dir.stderr.fnmatch_lines([f"ERROR: --folio-fsx-dir: {bad} is not a directory"])


def test_bad_fsx_args_in_a_subclass_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_args="""
import pytest
from tests.helpers.fsx_memfs import MemFS
from pytest_folio.suites.fsx import FsxSuite

class TestArgs(FsxSuite):
    fsx_args = "-l zero"

    @pytest.fixture
    def filesystem(self):
        return MemFS()
""")
    result = pytester.runpytest("-p", "pytest_folio", "-k", FSX_ONLY,
                                           "--folio-block-sizes=4k")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TestArgs.fsx_args: fsx: not a number: 'zero'*"])
    assert "Traceback" not in result.stdout.str()
    assert "During handling" not in result.stdout.str()


def test_seed_chosen_once_gives_the_same_logs_serially_and_under_xdist(
        pytester: pytest.Pytester) -> None:
    common = ["-p", "pytest_folio", "--pyargs", "pytest_folio.suites.test_fsx", "-k",
              FSX_ONLY, "--folio-fsx-ops=400",
              "--folio-block-sizes=4k,16k"]
    xdist = pytester.runpytest(*common, "-n", "2",
                                          f"--folio-fsx-dir={pytester.path / 'xdist'}")
    xdist.assert_outcomes(passed=2)
    seed = re.search(r"seed (\d+)", xdist.stdout.str())
    assert seed is not None  # chosen on the controller, printed in the header
    serial = pytester.runpytest(*common, f"--folio-fsx-seed={seed.group(1)}",
                                           f"--folio-fsx-dir={pytester.path / 'serial'}")
    serial.assert_outcomes(passed=2)
    logs = sorted(p.name for p in (pytester.path / "xdist").glob("*.fsxops"))
    assert len(logs) == 2
    assert logs == sorted(p.name for p in (pytester.path / "serial").glob("*.fsxops"))
    for name in logs:
        assert (pytester.path / "xdist" / name).read_text() == (
            pytester.path / "serial" / name).read_text()


def test_hypothesis_failure_is_saved_as_fsxops_with_replay_command(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hyp="""
import pytest
from tests.helpers.fsx_broken import FallocKeepSizeExtends
from tests.helpers.fsx_memfs import MemFS
from pytest_folio.suites.fsx import FsxSuite

class TestKeepSize(FsxSuite):
    @pytest.fixture
    def filesystem(self):
        return FallocKeepSizeExtends(MemFS())
""")
    # the run's seed pins the sequences Hypothesis tries: no test may depend on luck
    # thorough: shrinking to the end however loaded the machine is
    result = pytester.runpytest("-p", "pytest_folio", "--folio-block-sizes=4k", "-k",
                                "hypothesis", "--folio-fsx-seed=1",
                                "--folio-hypothesis=thorough")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "fsx (Hypothesis, shrunk): Size error: expected 0x" in out
    saved = re.search(r"fsx: operation log: (\S+-hypothesis\.fsxops)", out)
    assert saved is not None
    entries = read_fsxops(saved.group(1))
    assert len(entries) <= 3 and OP_NAMES[entries[-1].op] == "fallocate"  # shrunk
    assert entries[-1].flags & FL_KEEP_SIZE
    replay = re.search(r"fsx: replay it: (python -m pytest .*)", out)
    assert replay is not None and "TestKeepSize::test_fsx " in replay.group(1) + " "


def test_a_recorded_log_replays_where_its_options_are_and_skips_elsewhere(
        pytester: pytest.Pytester) -> None:
    module = ("-p", "pytest_folio", "--pyargs", "pytest_folio.suites.test_fsx", "-rs",
              "--folio-block-sizes=4k", "-k", "test_fsx and not hypothesis")
    recorded = pytester.runpytest(*module, f"--folio-fsx-dir={pytester.path / 'logs'}",
                                  "--folio-fsx-ops=300")
    recorded.assert_outcomes(passed=5)
    logs = {re.sub(r"-[0-9a-f]{12}\.fsxops$", "", p.name): p
            for p in (pytester.path / "logs").glob("*.fsxops")}
    plain, aligned = logs["TestFsx_test_fsx_4K"], logs["TestFsx_test_fsx_page_aligned_4K"]
    # test_fsx's log: the large file's and long transfers' options replay it too; the
    # aligned ones skip
    replay = pytester.runpytest(*module, f"--folio-fsx-replay={plain}")
    replay.assert_outcomes(passed=3, skipped=2)
    replay.stdout.fnmatch_lines([f"SKIPPED [[]2] * --folio-fsx-replay {plain}: recorded by "
                                 "*TestFsx::test_fsx[[]4K] with fsx's default options, this "
                                 "test runs with fsx options '-r 4096 -t 4096 -w 4096'"])
    # the page-aligned log: block-aligned at 4K blocks has its options
    replay = pytester.runpytest(*module, f"--folio-fsx-replay={aligned}")
    replay.assert_outcomes(passed=2, skipped=3)
    replay.stdout.fnmatch_lines([f"SKIPPED [[]3] * --folio-fsx-replay {aligned}: recorded "
                                 "by *TestFsx::test_fsx_page_aligned[[]4K] with fsx options "
                                 "'-r 4096 -t 4096 -w 4096', this test runs with fsx's "
                                 "default options"])
