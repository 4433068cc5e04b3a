"""The Hypothesis form: passes a healthy file system, shrinks a failure to a short log
that replays as .fsxops."""

from __future__ import annotations

import pytest
from hypothesis import settings

from pytest_folio.fsx.config import FsxOptions
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from pytest_folio.fsx.log import parse_fsxops
from pytest_folio.fsx.machine import QUICK, THOROUGH, FsxStateFailure, run_fsx_machine
from tests.helpers.fsx_broken import FallocKeepSizeExtends
from tests.helpers.fsx_memfs import MemFS

# short examples keep shrinking fast in the project's own tests
settings.register_profile("fsx-unit-test", parent=settings.get_profile(QUICK),
                          max_examples=100, stateful_step_count=12, database=None,
                          derandomize=True)


def test_profiles_have_no_deadline() -> None:
    for name in (QUICK, THOROUGH):
        assert settings.get_profile(name).deadline is None
    assert settings.get_profile(THOROUGH).max_examples > settings.get_profile(QUICK).max_examples


def test_healthy_file_system_passes() -> None:
    run_fsx_machine(MemFS, profile="fsx-unit-test")


@pytest.mark.parametrize("bug", [FallocKeepSizeExtends])
def test_failure_is_shrunk_and_printed_as_fsxops(bug: type) -> None:
    with pytest.raises(FsxStateFailure) as info:
        run_fsx_machine(lambda: bug(MemFS()), profile="fsx-unit-test", seed=1)
    failure = info.value
    entries = parse_fsxops(failure.fsxops_text)
    assert 1 <= len(entries) <= 4, failure.fsxops_text
    assert "shrunk operation log (.fsxops):\n" + failure.fsxops_text in str(failure)
    # the printed log replays the failure through the plain engine
    with pytest.raises(FsxFailure):
        FsxEngine(bug(MemFS()), FsxOptions(closeprob=0)).run(replay=entries)
    FsxEngine(MemFS(), FsxOptions(closeprob=0)).run(replay=entries)


def test_a_seed_tries_the_same_sequences_again() -> None:
    """The suite passes the run's seed: a failure it found comes back with --folio-seed."""
    found = []
    for _ in range(2):
        with pytest.raises(FsxStateFailure) as info:
            run_fsx_machine(lambda: FallocKeepSizeExtends(MemFS()), profile="fsx-unit-test",
                            seed=4)
        found.append(info.value.fsxops_text)
    assert found[0] == found[1]
