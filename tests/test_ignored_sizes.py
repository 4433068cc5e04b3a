"""A factory that ignores the block size or folio order it is asked for is said once, in
the header, and its tests run at one size per size it really makes, instead of the same
run under three labels; the controller decides, so xdist workers collect alike."""

from __future__ import annotations

import re

import pytest

from pytest_folio.session import _fitting

QUICK = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
FACTORIES = ("--folio-fs=tests.helpers.ignoring_sizes:fs",
             "--folio-mtd=tests.helpers.ignoring_sizes:mtd")
SUITES = ("--pyargs", "pytest_folio.suites.test_fsx", "pytest_folio.suites.test_mtd_fsx")


def test_the_header_says_it_once_and_the_tests_run_at_one_size(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-p", "pytest_folio", *SUITES, *FACTORIES, *QUICK,
                                "--collect-only", "--folio-orders=0,2,4",
                                "--folio-block-sizes=4k,16k,64k")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    header = " ".join(out.split())          # the header wraps its lines at 80 columns
    assert header.count("ignores the block size") == 1
    assert ("folio: fs tests.helpers.ignoring_sizes:fs ignores the block size it is asked "
            "for (asked 16K, it has 4K; asked 64K, it has 4K): its tests run at 4K only"
            in header)
    assert ("folio: mtd tests.helpers.ignoring_sizes:mtd ignores the folio order it is "
            "asked for (asked 4K folios, it has 16K folios; asked 64K folios, it has 16K "
            "folios): its tests run at 16K folios only" in header)
    assert set(re.findall(r"<Function test_fsx\[(\w+)\]>", out)) == {"4K"}
    assert {i.split("-")[0] for i in re.findall(r"<Function test_mtd_fsx\[([\w-]+)\]>",
                                                 out)} == {"16K"}


def test_workers_run_what_the_controller_decided(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-p", "pytest_folio", *SUITES, *FACTORIES, *QUICK, "-n", "2",
                                "-k", "not hypothesis", "--folio-orders=0,2",
                                "--folio-block-sizes=4k,16k", "-rA")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out[-3000:]
    ran = re.findall(r"^PASSED \S+::(test_\w+)\[([\w-]+)\]", out, re.M)
    assert {test for test, _ in ran} >= {"test_fsx", "test_mtd_fsx"}
    assert {size.split("-")[0] for test, size in ran if "mtd" in test} == {"16K"}
    assert {size for test, size in ran if "mtd" not in test} == {"4K"}


def test_a_factory_that_honours_the_sizes_runs_at_all_of_them() -> None:
    assert _fitting((4096, 16384), {4096: 4096, 16384: 16384}) == (4096, 16384)
    # a factory that clamps: 64K makes 16K, which 16K itself already gives
    assert _fitting((4096, 16384, 65536), {4096: 4096, 16384: 16384, 65536: 16384}) == (
        4096, 16384)
    # none asked is what it has: the first that gave each
    assert _fitting((16384, 65536), {16384: 4096, 65536: 4096}) == (16384,)
