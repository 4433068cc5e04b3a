"""Differential mode (``--folio-fs-oracle``): off by default, bad oracles are usage
errors, a correct target matches, and a broken one fails at its first difference with one
line whose replay command fails the same way."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pytest_folio.fsx.oracle import Mismatch, compare, fallocate_modes, generate
from pytest_folio.model.ramfs import Ramfs

MODULE = ("-p", "pytest_folio", "--pyargs", "pytest_folio.suites.test_fs_differential",
          "-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def test_differential_mode_is_off_without_an_oracle(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*MODULE, "--folio-block-sizes=4k", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*differential mode is off: pass --folio-fs-oracle*"])


@pytest.mark.parametrize(("oracle", "message"), [
    ("os:getcwd", "--folio-fs-oracle: 'os:getcwd': the oracle is reference or a directory"),
    ("/no/such/dir", "--folio-fs-oracle: /no/such/dir does not exist"),
    ("reference:colour=red", "--folio-fs-oracle: unknown knob 'colour' for the reference"),
])
def test_a_bad_oracle_is_a_usage_error(pytester: pytest.Pytester, oracle: str,
                                       message: str) -> None:
    result = pytester.runpytest(*MODULE, f"--folio-fs-oracle={oracle}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}*"])


def test_a_correct_target_matches_a_directory_oracle(pytester: pytest.Pytester,
                                                     tmp_path: Path) -> None:
    result = pytester.runpytest(*MODULE, "--folio-fs=reference:features=full",
                                f"--folio-fs-oracle={tmp_path}", "--folio-block-sizes=4k",
                                "--folio-fsx-ops=1500", "--folio-fsx-seed=3")
    result.assert_outcomes(passed=1)
    assert list(tmp_path.iterdir()) == []           # the oracle's subdirectory is gone


def test_a_broken_target_fails_at_its_first_difference_and_the_replay_agrees(
        pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*MODULE, "--folio-fs=tests.helpers.fsx_broken:OAppendIgnored",
                                "--folio-fs-oracle=reference", "--folio-block-sizes=16k",
                                "--folio-fsx-seed=7")
    result.assert_outcomes(failed=1)
    line = next(x for x in result.stdout.lines if x.startswith("differential: op "))
    found = re.fullmatch(r"differential: (op \d+: .*): target (.*), oracle (.*); "
                         r"replay: (python -m pytest .*)", line)
    assert found is not None, line
    assert found.group(2) != found.group(3)
    words = shlex.split(found.group(4))
    assert {"--folio-fs=tests.helpers.fsx_broken:OAppendIgnored", "--folio-fs-oracle=reference",
            "--folio-block-sizes=16K", "--folio-seed=7"} <= set(words)
    again = pytester.runpytest(*words[3:], "-p", "no:cacheprovider")
    again.assert_outcomes(failed=1)
    assert f"differential: {found.group(1)}: " in again.stdout.str()


def test_compare_names_the_first_operation_that_differs() -> None:
    a, b = Ramfs(features="full"), Ramfs(blocksize=16384, features="full")
    ops = [("open", 0, "f", 0o102), ("pwrite", 0, 10, 0, 7), ("pread", 0, 20, 0)]
    compare(a, b, ops)                              # the block size never shows
    c, d = Ramfs(), Ramfs()
    d.open("a", 0o102)                              # the oracle has a file the target lacks
    with pytest.raises(Mismatch) as info:
        compare(c, d, [("stat", "a")])
    assert str(info.value) == "op 0: stat('a'): target err 'ENOENT', oracle ok 0"


def test_the_generator_is_a_function_of_the_seed() -> None:
    modes = fallocate_modes(Ramfs(), Ramfs())
    assert generate(5, modes, 200) == generate(5, modes, 200) != generate(6, modes, 200)
