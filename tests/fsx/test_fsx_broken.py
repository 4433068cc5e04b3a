"""fsx finds bugs: every deliberately broken file system fails at the default settings,
and the report names the first bad offset, which really is bad."""

from __future__ import annotations

import pytest

from pytest_folio.fsx.config import FsxOptions
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from tests.helpers.fsx_broken import BUGS, PassThrough
from tests.helpers.fsx_memfs import MemFS

SEEDS = (1, 2, 3)
# bugs whose bad bytes live in a cache in front of the file, not in the stored file
CACHE_BUGS = ("MmapReadStaleAfterWrite", "FsyncDropsDirtyData")


@pytest.mark.parametrize("seed", SEEDS)
def test_the_healthy_base_passes_the_same_runs(seed: int) -> None:
    result = FsxEngine(PassThrough(MemFS()), FsxOptions(seed=seed)).run()
    assert result.testcalls == FsxOptions().numops


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("bug", BUGS, ids=[bug.__name__ for bug in BUGS])
def test_each_bug_is_caught_at_the_default_settings(bug: type[PassThrough],
                                                    seed: int) -> None:
    inner = MemFS()
    engine = FsxEngine(bug(inner), FsxOptions(seed=seed))
    with pytest.raises(FsxFailure) as info:
        engine.run()
    failure = info.value
    assert len(engine.log) <= FsxOptions().numops
    assert failure.badoff >= 0, failure.report
    assert str(failure).endswith(f"first bad offset {failure.badoff:#x}")
    lines = failure.report.splitlines()
    if lines[0].startswith("READ BAD DATA"):
        # the table's first row is the first bad offset, and the file really differs there
        assert lines[1] == "OFFSET      GOOD    BAD     RANGE"
        assert int(lines[2].split()[0], 16) == failure.badoff
        stored = inner.files["fsx.dat"][failure.badoff:failure.badoff + 1]
        good = engine.model.buf[failure.badoff:failure.badoff + 1]
        if bug.__name__ not in CACHE_BUGS:
            assert stored != good
    else:
        assert lines[0].startswith("Size error: expected 0x"), lines[0]
        stat = int(lines[0].split()[5], 16)
        assert failure.badoff == min(stat, engine.model.size)
    assert f"LOG DUMP ({len(engine.log)} total operations):" in lines
