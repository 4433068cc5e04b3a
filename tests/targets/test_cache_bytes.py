"""The factory keyword ``cache_bytes``: a factory that takes it gets a run of every
file-system test at the first block size with its cache bounded (decided once, on the
controller, so every xdist worker collects the same items); one that offers neither
``cache_bytes`` nor ``drop_caches`` is told so in its own line at the end of the run."""

from __future__ import annotations

import re

import pytest

from pytest_folio.params import FsParam, cache_bound, decode_params
from pytest_folio.targets.fs import resolve_fs_target, takes_cache_bytes
from tests.helpers import runpytest_own_process
from tests.helpers.fsx_broken import BigCacheReclaimLosesTheDirtyBit, PassThrough
from tests.helpers.fsx_cachedfs import CachedFS
from tests.helpers.fsx_memfs import MemFS

# searched in the output with its lines joined: the summary line wraps at 80 columns
UNREACHED = re.compile(r"folio: fs \S+: writeback not reached: its factory takes no "
                       r"cache_bytes= and it has no drop_caches\(path\).*accept "
                       r"cache_bytes=N in the factory or add drop_caches\(path\)")


def joined(out: str) -> str:
    return " ".join(out.split())


def run(pytester: pytest.Pytester, spec: str, *extra: str) -> pytest.RunResult:
    return runpytest_own_process(pytester, "-p", "pytest_folio", "--pyargs",
                                 "pytest_folio.suites", "-k", "not mtd", f"--folio-fs={spec}",
                                 "--folio-seed=1", "-p", "no:cacheprovider",
                                 "-p", "no:hypothesispytest", *extra)


def test_which_factories_take_it() -> None:
    assert takes_cache_bytes(CachedFS)
    assert takes_cache_bytes(lambda blocksize, *, cache_bytes=None: None)
    assert not takes_cache_bytes(lambda blocksize, **kwargs: None)   # may ignore it
    assert not takes_cache_bytes(PassThrough.factory)
    assert not takes_cache_bytes(MemFS)
    assert not takes_cache_bytes(None)
    assert not resolve_fs_target("reference").takes_cache_bytes


def test_the_bounded_parameter_names_its_block_size_and_cache() -> None:
    param = FsParam(4096, cache_bound(4096))
    assert param.id == "4K-cache64K"
    decoded = decode_params({"filesystem": param})
    assert (decoded.block_size, decoded.cache_bytes) == (4096, 64 << 10)
    assert decoded.labels() == {"bs": "4K", "cache": "64K"}


def test_a_factory_taking_it_gets_a_bounded_run_of_each_test_with_the_bound(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(probe="""
        from tests.helpers.fsx_cachedfs import CachedFS

        def factory(blocksize, root=None, cache_bytes=None):
            fs = CachedFS(blocksize, root, **({} if cache_bytes is None else
                                              {"cache_bytes": cache_bytes}))
            fs.given = cache_bytes
            return fs
    """, test_probe="""
        def test_probe(filesystem):
            print("GIVEN", filesystem.blocksize, filesystem.given)
    """)
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "pytest_folio", "test_probe.py", "-s",
                                "--folio-fs=probe:factory", "--folio-block-sizes=4K,16K",
                                "-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=3)
    given = sorted(re.findall(r"test_probe\[(\S+)\] GIVEN (\d+) (\w+)",
                              result.stdout.str()))
    assert given == [("16K", "16384", "None"), ("4K", "4096", "None"),
                     ("4K-cache64K", "4096", "65536")]


def test_the_collection_is_the_same_on_every_xdist_worker(pytester: pytest.Pytester) -> None:
    result = run(pytester, "tests.helpers.fsx_cachedfs:CachedFS", "-n", "2",
                 "-k", "test_fs_powercut", "-q")
    result.assert_outcomes(skipped=4 * 3)     # four block-size runs of three tests


def test_a_bug_behind_a_big_cache_is_caught_by_the_bounded_runs_alone(
        pytester: pytest.Pytester) -> None:
    spec = "tests.helpers.fsx_broken:BigCacheReclaimLosesTheDirtyBit"
    unbounded = run(pytester, f"{spec}.without_the_bound", "-k", "test_fsx and not hypo")
    assert unbounded.ret == pytest.ExitCode.OK, unbounded.stdout.str()[-3000:]
    assert unbounded.parseoutcomes()["passed"] >= 4 * 3      # every fsx run, every size
    bounded = run(pytester, spec, "-k", "test_fsx and not hypo")
    failed = re.findall(r"^FAILED \S+\[(\S+)\]", bounded.stdout.str(), re.M)
    assert failed and set(failed) == {"4K-cache64K"}, bounded.stdout.str()[-3000:]
    assert BigCacheReclaimLosesTheDirtyBit().cache_folios == (64 << 20) // 4096


def test_a_target_without_cache_bytes_or_drop_caches_is_told_in_its_own_line(
        pytester: pytest.Pytester) -> None:
    result = run(pytester, "tests.helpers.fsx_broken:PassThrough.factory",
                 "-k", "test_fs_powercut", "-q")
    out = result.stdout.str()
    assert UNREACHED.search(joined(out)), out[-3000:]
    told = out[out.index("folio: fs "):].splitlines()
    assert max(len(line) for line in told[:4]) <= 80, told
    result.assert_outcomes(skipped=3 * 3)       # no bounded runs
    # one that takes cache_bytes, or offers drop_caches, is not
    for spec in ("tests.helpers.fsx_cachedfs:CachedFS",
                 "tests.helpers.fsx_broken:BigCacheReclaimLosesTheDirtyBit.without_the_bound"):
        assert not UNREACHED.search(joined(run(pytester, spec, "-k", "test_fs_powercut",
                                               "-q").stdout.str()))
