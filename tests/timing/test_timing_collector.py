"""The collector in real pytest runs: serial, under xdist, with a dying worker, comparing."""

from __future__ import annotations

import socket

import pytest

from pytest_folio.timing.storage import load_run, save_run

pytest_plugins = ["pytester"]

TESTS = """
    import os
    import pytest
    from pytest_folio.measurement import Measurement

    FACTOR = float(os.environ.get("FOLIO_FACTOR", "1"))

    @pytest.mark.parametrize("i", range(6))
    def test_timer(folio_timer, folio_order, i):
        with folio_timer("block", params={"i": i}):
            sum(range(1000))
        folio_timer.record("fixed", [FACTOR * (10 + k / 10) for k in range(5)],
                           params={"i": i})

    def test_hook(request):
        m = Measurement(suite="mine", name="via hook", unit="GB/s", samples=[1.5, 1.6],
                        params={"bs": "4K"}, target="reference", counters={"x": 3})
        request.config.hook.pytest_folio_measurement(item=request.node, measurement=m)
"""


def expected_nodeids() -> list[str]:
    ids = [f"test_timing.py::test_timer[{o}-{i}]" for o in ("4K", "16K") for i in range(6)]
    return [*ids, "test_timing.py::test_hook"]


def saved_nodeids(path: pytest.Pytester | object) -> list[str]:
    seen: list[str] = []
    for r in load_run(str(path)).records:
        if r.nodeid not in seen:
            seen.append(r.nodeid)
    return seen


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_timing=TESTS)
    return pytester


def test_serial_run_saves_every_measurement(suite: pytest.Pytester) -> None:
    result = suite.runpytest("--folio-orders=0,2", "--folio-save=run.json")
    result.assert_outcomes(passed=13)
    result.stdout.fnmatch_lines(["folio: saved 25 measurements to run.json"])
    run = load_run(suite.path / "run.json")
    assert saved_nodeids(suite.path / "run.json") == expected_nodeids()
    # record() announces at once, a timed block when its test ends
    fixed, block = run.records[:2]
    assert (fixed.name, fixed.samples) == ("fixed", [10.0, 10.1, 10.2, 10.3, 10.4])
    assert (block.suite, block.name, block.unit, block.params) == (
        "test_timing", "block", "ms", {"folio": "4K", "i": 0})
    assert len(block.samples) == 1 and block.samples[0] > 0
    hook = run.records[-1]
    assert (hook.name, hook.unit, hook.samples, hook.counters, hook.target) == (
        "via hook", "GB/s", [1.5, 1.6], {"x": 3}, "reference")
    assert run.machine["xdist_workers"] == 0 and run.machine["memcpy_gbps"] > 0
    assert run.machine["python"] and run.machine["kernel"] and run.machine["cpus"] >= 1
    assert run.settings["orders"] == [0, 2]


@pytest.mark.parametrize("dist", [["-n", "2"], ["--tx", "2*popen", "--dist", "load"]],
                         ids=["n2", "tx-2popen"])
def test_xdist_workers_merge_into_one_file(suite: pytest.Pytester, dist: list[str]) -> None:
    remote = dist[0] == "--tx"
    if remote:
        # Pretend the controller is elsewhere, as under --tx ssh=...: each worker then
        # measures its own machine once and sends the facts with its first record.
        suite.makeconftest("""
            import pytest

            @pytest.hookimpl(trylast=True)
            def pytest_configure_node(node):
                node.workerinput["folio_controller_host"] = "controller.example"
        """)
    result = suite.runpytest_subprocess("--folio-orders=0,2", "--folio-save=run.json", *dist)
    result.assert_outcomes(passed=13)
    run = load_run(suite.path / "run.json")
    assert saved_nodeids(suite.path / "run.json") == expected_nodeids()
    assert len(run.records) == 25
    assert {r.worker for r in run.records} <= {"gw0", "gw1"}
    assert all(r.worker for r in run.records)
    assert run.machine["xdist_workers"] == 2
    assert not [p for p in suite.path.iterdir() if p.name.endswith(".tmp")]
    if not remote:
        assert run.hosts == {}                     # the workers run on this machine
        return
    (host, facts), = run.hosts.items()
    assert host == socket.gethostname() == run.records[0].host
    assert facts["memcpy_gbps"] > 0 and facts["xdist_workers"] == 2 and facts["cpu"]
    assert all("machine" not in r.extra for r in run.records)


def test_dead_worker_loses_only_its_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_die="""
        import os
        import pytest

        @pytest.mark.parametrize("i", range(8))
        def test_ok(folio_timer, i):
            folio_timer.record("ok", [1.0 + i])

        def test_die(folio_timer):
            folio_timer.record("lost", [2.0])
            os._exit(3)
    """)
    result = pytester.runpytest_subprocess("-n", "2", "--folio-save=run.json")
    result.stdout.fnmatch_lines(["*worker*crashed while running*test_die*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    run = load_run(pytester.path / "run.json")
    assert [r.name for r in run.records] == ["ok"] * 8
    assert [r.samples for r in run.records] == [[1.0 + i] for i in range(8)]


def test_compare_prints_grid_and_fails_only_on_significant_regression(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    suite.runpytest("--folio-orders=0", "--folio-save=base.json").assert_outcomes(passed=7)
    # the same figures: no change, not significant, so the guard stays quiet
    ok = suite.runpytest("--folio-orders=0", "--folio-compare=base.json",
                         "--folio-compare-fail=5")
    assert ok.ret == pytest.ExitCode.OK
    ok.stdout.fnmatch_lines(["folio timing: memcpy * GB/s",
                             "folio timing: comparing against base.json",
                             "    (13 measurements, 20*; host *"])
    ok.stdout.re_match_lines([
        r".*folio timings: base.json \(base\) against this run.*",
        # the Test column takes what the measured rows' Change cells leave of 80 columns
        r"\| Test +\| Params +\| +Base \| +Patched \| +Change \|",
        r"\| fixed \[ms\] +\| folio=4K,i=0  \| 10.20 ±0.20 \| 10.20 ±0.20 \| +\+0.0% ns \|",
        r"ns: not significant \(two-sided Mann-Whitney U, p >= 0.05\)",
    ])
    assert "folio: regression" not in ok.stdout.str()
    summary = ok.stdout.str()[ok.stdout.str().index("folio timings: base.json"):]
    assert max(map(len, summary.splitlines())) <= 80      # the grid was 87 wide
    monkeypatch.setenv("FOLIO_FACTOR", "1.5")
    bad = suite.runpytest("--folio-orders=0", "--folio-compare=base.json",
                          "--folio-compare-fail=20")
    assert bad.ret == pytest.ExitCode.TESTS_FAILED
    bad.stdout.re_match_lines([
        r"\| fixed \[ms\] +\| folio=4K,i=0  \| 10.20 ±0.20 \| 15.30 ±0.30 \| +\+50.0% \|",
        r"folio: regression: fixed 4K,i=0: \+50.0% worse \(limit 20%, p=0.00794\)"])
    assert bad.stdout.str().count("folio: regression:") == 6
    # above the limit nothing fails
    loose = suite.runpytest("--folio-orders=0", "--folio-compare=base.json",
                            "--folio-compare-fail=60")
    assert loose.ret == pytest.ExitCode.OK


@pytest.mark.parametrize(("args", "message"), [
    (["--folio-compare=missing.json"],
     "ERROR: --folio-compare: missing.json: no such timing file"),
    (["--folio-compare=trunc.json"],
     "ERROR: --folio-compare: trunc.json: truncated or corrupt timing file*"),
    (["--folio-compare=v2.json"],
     "ERROR: --folio-compare: v2.json: timing format version 2, this pytest-folio reads*"),
    (["--folio-compare-fail=5"], "ERROR: --folio-compare-fail needs --folio-compare BASE.json"),
    (["--folio-save=nodir/run.json"],
     "ERROR: --folio-save: nodir/run.json: directory nodir does not exist"),
])
def test_bad_timing_options_are_usage_errors(suite: pytest.Pytester, args: list[str],
                                             message: str) -> None:
    (suite.path / "trunc.json").write_text('{"format": "pytest-folio-timing", "vers')
    (suite.path / "v2.json").write_text(
        '{"format": "pytest-folio-timing", "version": 2, "measurements": []}')
    result = suite.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert len([line for line in result.stderr.lines if line.strip()]) == 1


def test_saving_over_an_existing_run_replaces_it_whole(suite: pytest.Pytester) -> None:
    from pytest_folio.timing.storage import Record, TimingRun
    save_run(TimingRun(records=[Record(suite="old", name="old", unit="ms", samples=[1.0])]),
             suite.path / "run.json")
    suite.runpytest("--folio-orders=0", "--folio-save=run.json").assert_outcomes(passed=7)
    assert {r.suite for r in load_run(suite.path / "run.json").records} == {"test_timing",
                                                                          "mine"}


def test_bad_samples_fail_the_test_that_made_them(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_nan(folio_timer):
            folio_timer.record("bad", [float("nan")])
    """)
    result = pytester.runpytest("--folio-save=run.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*measurement 'bad': sample nan is not a finite number*"])


def test_timer_repeat_and_counter_deltas(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        class Stats:
            def __init__(self):
                self.calls = 0
            def snapshot(self):
                return {"compound_head": self.calls * 4, "untouched": 9}

        def test_counted(folio_timer, block_size, filesystem):
            stats = Stats()
            samples = folio_timer.repeat("noop", lambda: None, passes=4)
            assert len(samples) == 4 and all(s >= 0 for s in samples)
            for _ in range(3):
                with folio_timer("work", stats=stats, bytes=4096):
                    stats.calls += 5
    """)
    result = pytester.runpytest("--folio-block-sizes=64k", "--folio-save=run.json")
    result.assert_outcomes(passed=1)
    noop, work = load_run(pytester.path / "run.json").records
    assert (noop.name, len(noop.samples), noop.params) == ("noop", 4, {"bs": "64K"})
    assert (work.name, len(work.samples), work.extra) == ("work", 3, {"bytes": 4096})
    assert work.counters == {"compound_head": 60, "untouched": 0}   # summed over samples
    assert noop.target == work.target == "reference"            # --folio-fs's default


def test_save_that_fails_at_the_end_is_one_line_and_fails_the_run(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import shutil

        def test_removes_the_directory(folio_timer):
            folio_timer.record("x", [1.0])
            shutil.rmtree("out")
    """)
    (pytester.path / "out").mkdir()
    result = pytester.runpytest("--folio-save=out/run.json")
    result.stdout.fnmatch_lines(["folio: could not save timings to out/run.json: *"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "Traceback" not in result.stdout.str()


def test_untestable_regression_warns_but_does_not_fail(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile("""
        import os

        def test_one(folio_timer):
            folio_timer.record("single", [10.0 * float(os.environ.get("FOLIO_FACTOR", "1"))])
    """)
    pytester.runpytest("--folio-save=base.json").assert_outcomes(passed=1)
    monkeypatch.setenv("FOLIO_FACTOR", "1.5")
    result = pytester.runpytest("--folio-compare=base.json", "--folio-compare-fail=10")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "| single                       |       |     10.00 |        15.00 |  +50.0% |",
        "folio: undecided: single: +50.0% worse (limit 10%), not failing: 1 against 1",
        "    samples; the gate needs 5 a side (time more passes)"])
