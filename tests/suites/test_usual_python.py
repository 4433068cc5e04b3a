"""The default run passes on correct targets written the way Python code usually is
(tests/helpers/usual_python.py: counts and 0 returned, reopen returning the device,
bytearray and memoryview reads), over several seeds, for both protocols: the suites
compare what storage promises, not the shapes of the answers."""

from __future__ import annotations

import re

import pytest

from tests.helpers import runpytest_own_process

QUICK = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q")
# Each protocol's suites only (the other protocol's run against the reference, which
# the main job covers); left out for time: the MTD timing suites (speed, stress,
# torture), which compare no answer fsx for flash does not, and its Hypothesis form,
# which replays what the random run draws.
RUNS = {
    "fs": ("--folio-fs=tests.helpers.usual_python:UsualFS", "-k", "not mtd"),
    "mtd": ("--folio-mtd=tests.helpers.usual_python:UsualMTD", "-k",
            "mtd and not speed and not stress and not torture and not hypothesis"),
    "mtd-memoryview": ("--folio-mtd=tests.helpers.usual_python:MemoryviewMTD",
                       "--folio-orders=2", "-k",
                       "(mtd_fsx or mtd_read) and not hypothesis"),
    # the choices POSIX leaves (EEXIST, EBADF, fallocate modes answered EOPNOTSUPP
    # without a `features` list): where they are compared, at one block size (the full
    # default run at every size passes too; its CPU is not needed to show them)
    "fs-posix": ("--folio-fs=tests.helpers.usual_python:PosixChoicesFS",
                 "--folio-block-sizes=64K", "-k",
                 "not mtd and not cache and (differential or range or non_empty "
                 "or read_only_descriptor)"),
    # errors without an errno (a class, or OSError(errno.X)), POSIX's EPERM for unlink
    # of a directory: where errnos are compared
    "fs-errors": ("--folio-fs=tests.helpers.usual_python:UsualErrorsFS",
                  "--folio-block-sizes=4K", "-k",
                  "not mtd and not cache and (differential or semantics)"),
    # fallocate KEEP_SIZE that allocates nothing (OpenZFS): st_blocks stays
    "fs-no-prealloc": ("--folio-fs=tests.helpers.usual_python:NoPreallocationFS",
                       "--folio-block-sizes=4K", "-k",
                       "not mtd and not cache and (st_blocks or differential)"),
    # stat answers of ten fields: no st_blocks or st_blksize to check
    "fs-short-stat": ("--folio-fs=tests.helpers.usual_python:ShortStatFS",
                      "--folio-block-sizes=4K", "-k",
                      "not mtd and not cache and (st_blocks or st_blksize or fstat_agree)"),
    # fsync commits data and size, an fsync of the directory the names (fsync(2), ext2)
    "fs-directory-fsync": ("--folio-fs=tests.helpers.usual_python:DirectoryFsyncFS",
                           "--folio-block-sizes=4K", "-k", "fs_powercut"),
    # fallocate of mode 0 only, EOPNOTSUPP for KEEP_SIZE (libfuse's passthrough)
    "fs-passthrough-fallocate": (
        "--folio-fs=tests.helpers.usual_python:PassthroughFallocateFS",
        "--folio-block-sizes=4K", "-k",
        "not mtd and not cache and (differential or test_fsx or fallocate)"),
    # no fsync of a directory (EINVAL), names committed by the file's fsync
    "fs-no-directory-fsync": ("--folio-fs=tests.helpers.usual_python:NoDirectoryFsyncFS",
                              "--folio-block-sizes=4K", "-k", "fs_powercut"),
}
# which suites each run must have passed (not skipped): fsx, the differential, the
# semantics suites, the power cuts; fsx for flash
MUST_PASS = {
    "fs": ("test_fsx.py", "test_fs_differential.py", "test_fs_semantics.py",
           "test_fs_powercut.py"),
    "mtd": ("test_mtd_fsx.py", "test_mtd_read.py", "test_mtd_powercut.py"),
    "mtd-memoryview": ("test_mtd_fsx.py",),
    "fs-posix": ("test_fs_differential.py", "test_fs_semantics.py"),
    "fs-errors": ("test_fs_differential.py", "test_fs_semantics.py"),
    "fs-no-prealloc": ("test_fs_differential.py", "test_fs_semantics.py"),
    "fs-short-stat": ("test_fs_semantics.py",),
    "fs-directory-fsync": ("test_fs_powercut.py",),
    "fs-passthrough-fallocate": ("test_fs_differential.py", "test_fsx.py"),
    "fs-no-directory-fsync": ("test_fs_powercut.py",),
}


# two seeds each; the memoryview device is the mtd one with other reads: one seed
CASES = [("fs", 1), ("fs", 2), ("mtd", 1), ("mtd", 2), ("mtd-memoryview", 3), ("fs-posix", 1),
         ("fs-errors", 2), ("fs-no-prealloc", 1),
         ("fs-short-stat", 1), ("fs-directory-fsync", 1),
         ("fs-passthrough-fallocate", 1), ("fs-no-directory-fsync", 1)]


@pytest.mark.parametrize(("run", "seed"), CASES, ids=[f"{r}-{s}" for r, s in CASES])
def test_the_default_run_passes_on_usual_python_answers(pytester: pytest.Pytester,
                                                        run: str, seed: int) -> None:
    result = runpytest_own_process(pytester, "-p", "pytest_folio", "--pyargs",
                                   "pytest_folio.suites", *RUNS[run], f"--folio-seed={seed}",
                                   *QUICK, "-rA")
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, output[-3000:]
    passed = set(re.findall(r"^PASSED \S*?(test_\w+\.py)::", output, re.M))
    assert set(MUST_PASS[run]) <= passed, output[-3000:]
