"""--folio-hypothesis: one budget for every state machine, an example database that makes
the second run replay the known failure at once, shrinking at one geometry per folio
order, and failure logs kept under --folio-failures."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_folio.fixtures import failures
from pytest_folio.hypothesis_budget import BUDGETS, LEVELS, parse_level, profile_name
from tests.helpers import subprocess_env

QUICK = ("-p", "no:hypothesispytest", "-p", "no:benchmark")

# A device whose opens are counted in a file, with a bug the first read finds (its
# failures shrink at once: these tests are about where they go, not how they shrink).
COUNTING = """
from tests.helpers.mtd_devices import EraseFillsZero

def factory(**kwargs):
    with open("opens.txt", "a") as out:
        out.write("x")
    return EraseFillsZero(**kwargs)
"""


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # without CI: Hypothesis loads its own "ci" settings profile where CI is set, and
    # the inner runs' examples (which geometries fail first) must not depend on it
    env = {k: v for k, v in subprocess_env(COLUMNS="300", PYTHONPATH=f"{cwd}").items()
           if k != "CI"}
    return subprocess.run([sys.executable, "-m", "pytest", *QUICK, *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)


def _machine(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (cwd / "opens.txt").unlink(missing_ok=True)
    return _pytest(cwd, "-p", "pytest_folio", "--pyargs", "pytest_folio.suites.test_mtd_fsx",
                   "-q", "--folio-mtd=counting:factory", "--folio-mtd-size=2M",
                   "--folio-orders=2", *args)


def test_every_level_has_a_budget_for_each_machine_and_thorough_is_larger() -> None:
    for kind in ("fsx", "mtd"):
        quick, thorough = BUDGETS[kind, "quick"], BUDGETS[kind, "thorough"]
        assert quick.examples < thorough.examples and quick.steps < thorough.steps
        assert quick.shrink_seconds < thorough.shrink_seconds
        assert profile_name(kind, "quick") == f"{kind}-quick"
    assert parse_level(" Thorough ") == "thorough"
    with pytest.raises(ValueError, match=re.escape("'fast' is not one of off|quick|thorough")):
        parse_level("fast")
    assert LEVELS == ("off", "quick", "thorough")


def test_the_profiles_come_from_the_budget_and_have_no_deadline() -> None:
    from hypothesis import settings

    import pytest_folio.fsx.machine  # noqa: F401  (registers the profiles)

    for (kind, level), budget in BUDGETS.items():
        profile = settings.get_profile(profile_name(kind, level))
        assert (profile.max_examples, profile.stateful_step_count, profile.deadline) == (
            budget.examples, budget.steps, None)


def test_a_bad_level_is_a_usage_error_naming_the_option(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "-p", "pytest_folio", "--folio-hypothesis=fast")
    assert proc.returncode == 4
    assert proc.stderr.strip() == ("ERROR: --folio-hypothesis: 'fast' is not one of "
                                   "off|quick|thorough")


def test_off_skips_the_state_machines_with_the_reason(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, "-p", "pytest_folio", "--pyargs",
                   "pytest_folio.suites.test_fsx", "pytest_folio.suites.test_mtd_fsx", "-q",
                   "-rs", "-k", "hypothesis", "--folio-orders=2",
                   "-o", "folio_hypothesis=off")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert re.search(r"ini key folio_hypothesis=off: the Hypothesis state machines are "
                     r"not run", proc.stdout), proc.stdout[-3000:]
    assert " passed" not in proc.stdout


def _counting_machine(calls: list[int]) -> type:
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, rule

    class Machine(RuleBasedStateMachine):
        @rule(n=st.integers(0, 10_000))
        def step(self, n: int) -> None:
            calls.append(n)
            assert n < 5000

    return Machine


def test_the_second_run_replays_the_shrunk_failure_from_the_database(tmp_path: Path) -> None:
    import pytest_folio.fsx.machine  # noqa: F401  (registers the profiles)
    from pytest_folio.hypothesis_budget import run_machine

    first: list[int] = []
    with pytest.raises(AssertionError):
        run_machine(_counting_machine(first), "fsx-quick", seed=1, database=tmp_path,
                    key="test_a")
    assert first[-1] == 5000          # shrunk to the boundary
    second: list[int] = []
    with pytest.raises(AssertionError):
        run_machine(_counting_machine(second), "fsx-quick", seed=2, database=tmp_path,
                    key="test_a")
    # another seed, yet no search: the known failure is replayed (and reported) at once
    assert set(second) == {5000} and len(second) <= 2 < len(first)
    other: list[int] = []
    with pytest.raises(AssertionError):
        run_machine(_counting_machine(other), "fsx-quick", seed=2, database=tmp_path,
                    key="test_b")
    assert len(other) > 2             # another test's failures are not its own


def test_the_suites_keep_their_database_in_the_cache_dir_and_replay_it(
        tmp_path: Path) -> None:
    (tmp_path / "counting.py").write_text(COUNTING)
    select = ("-k", "hypothesis and eb16K")
    first = _machine(tmp_path, *select)
    assert first.returncode == 1, first.stdout[-3000:]
    log = re.search(r"operation log \((\d+) operations\): (\S+)", first.stdout)
    assert log, first.stdout[-3000:]
    assert any((tmp_path / ".pytest_cache" / "d" / "folio_hypothesis").iterdir())
    second = _machine(tmp_path, *select, "--folio-seed=99")
    assert second.returncode == 1, second.stdout[-3000:]
    assert f"operation log ({log.group(1)} operations)" in second.stdout, second.stdout


def test_one_geometry_per_folio_order_shrinks_the_others_say_where(tmp_path: Path) -> None:
    (tmp_path / "counting.py").write_text(COUNTING)
    proc = _machine(tmp_path, "-p", "no:cacheprovider", "-k", "hypothesis",
                    "--folio-erasesizes=16K,64K", "--folio-seed=3")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert proc.stdout.count("mtd fsx (Hypothesis, shrunk): operation log") == 1
    assert re.search(r"not shrunk: this folio order's failure is shrunk by "
                     r"\S+test_mtd_fsx_hypothesis\[16K-eb16K\]", proc.stdout), proc.stdout
    # without the cache plugin, the database is under the rootdir's .folio
    assert (tmp_path / ".folio" / "hypothesis").is_dir()


def test_a_failures_log_is_kept_and_the_replay_command_points_there(tmp_path: Path) -> None:
    (tmp_path / "counting.py").write_text(COUNTING)
    proc = _machine(tmp_path, "-p", "no:cacheprovider", "-k", "not hypothesis",
                    "--folio-erasesizes=16K", "--folio-seed=5")
    assert proc.returncode == 1, proc.stdout[-3000:]
    command = re.search(r"^mtd fsx: replay it: (.*)$", proc.stdout, re.M)
    assert command, proc.stdout[-3000:]
    replay = next(w for w in shlex.split(command.group(1))
                  if w.startswith("--folio-mtd-replay="))
    kept = Path(replay.partition("=")[2])
    assert kept.parent.parent == tmp_path / ".folio" / "failures"
    assert re.fullmatch(r"test_mtd_fsx\.py__TestMTDFsx__test_mtd_fsx_16K-eb16K-[0-9a-f]{12}",
                        kept.parent.name), kept
    assert kept.read_text().startswith("#")
    again = _pytest(tmp_path, *shlex.split(command.group(1))[3:], "-q", "-p",
                    "no:cacheprovider")
    # the shrunk log fails again: at an operation, or at the final compare
    assert again.returncode == 1 and "mtd fsx: " in again.stdout, again.stdout[-3000:]


def test_old_failures_are_pruned_by_count_and_only_the_plugins(tmp_path: Path) -> None:
    for age in range(5):
        for owner in ("test", "mine"):
            old = tmp_path / f"{owner}_{age}"
            old.mkdir()
            (old / "a.fsxops").write_text("x")
            if owner == "test":
                (old / failures.MARKER).write_text('{"test": "t", "files": ["a.fsxops"]}')
            os.utime(old, (1000 + age, 1000 + age))
    failures._prune(tmp_path, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        *(f"mine_{age}" for age in range(5)), "test_2", "test_3", "test_4"]
