"""The catalogue of broken file systems against the default suites, run as a user runs
them: ``pytest -p pytest_folio --pyargs pytest_folio.suites --folio-fs=pkg.mod:factory``
(the MTD suites deselected: they never touch the file-system target). Every bug fails the
run and the failure ends in a reproduction; the correct implementations pass it all.
"""

from __future__ import annotations

import re
import shlex

import pytest

from pytest_folio.suites.fs import FsNamespace, FsPowerCut
from tests.helpers import runpytest_own_process
from tests.helpers.fsx_broken import BUGS, CACHED_BUGS, DIFFERENTIAL_BUGS
from tests.helpers.fsx_powercut import DURABILITY_BUGS, ORDERED_BUGS, POWER_CUT_BUGS

DURABILITY = [f"tests.helpers.fsx_powercut:{bug.__name__}" for bug in DURABILITY_BUGS]
CATALOGUE = ([f"tests.helpers.fsx_broken:{bug.__name__}.factory" for bug in BUGS]
             + [f"tests.helpers.fsx_broken:{bug.__name__}" for bug in CACHED_BUGS]
             + DURABILITY)
# the wrappers' healthy base at one block size: CachedFS itself runs at all of them
CORRECT = [("tests.helpers.fsx_cachedfs:CachedFS",),
           ("tests.helpers.fsx_broken:PassThrough.factory", "--folio-block-sizes=4k"),
           ("tests.helpers.fsx_broken:WithoutDirectories.factory", "--folio-block-sizes=4k"),
           ("tests.helpers.fsx_powercut:PowerCutFS",)]
# bugs that only a power cut shows: every power-cut test catches them, no other test does
# (the ordered-mode ones under --folio-power-cut-rules=ordered)
CRASH_ONLY = ([(f"tests.helpers.fsx_powercut:{bug.__name__}", "fsync")
               for bug in POWER_CUT_BUGS]
              + [(f"tests.helpers.fsx_powercut:{bug.__name__}", "ordered")
                 for bug in ORDERED_BUGS])
POWER_CUT_TESTS = {name for name in dir(FsPowerCut) if name.startswith("test_")}
# the namespace bugs escape every other test: each names the FsNamespace test that must
# catch it (the first to fail, under -x)
CAUGHT_BY = {
    "RenameUnlinksTheTargetFirst": "test_rename_of_a_file_onto_itself_changes_nothing",
    "RenameLeavesTheChildrenBehind": "test_a_renamed_directorys_files_open_under_the_new_name",
    "DcacheKeepsTheMovedChildren": "test_a_new_directory_under_a_renamed_ones_old_name_is_empty",
    "RenameLeavesTheChildrenLinked": "test_a_new_directory_under_a_renamed_ones_old_name_is_empty",
    "RenameMovesNamesSharingThePrefix":
        "test_renaming_a_directory_leaves_names_that_only_share_its_prefix",
    "IntoItselfCheckedOneLevelDeep": "test_a_directory_cannot_move_into_its_own_subdirectory",
    "IntoItselfCheckWithoutTheSeparator":
        "test_a_directory_can_take_a_name_that_starts_with_its_own",
    "RenameIgnoresTheTargetsType": "test_rename_of_a_file_over_a_directory_is_eisdir",
    "RenameOverANonEmptyDirectory":
        "test_rename_of_a_directory_over_a_non_empty_directory_is_enotempty",
    "RenameRefusesAnEmptyDirectory":
        "test_rename_of_a_directory_over_an_empty_directory_replaces_it",
    "DirectoryRenameCopiesItsFiles":
        "test_a_descriptor_opened_before_its_directory_moved_keeps_working",
    "MkdirOverAFile": "test_mkdir_over_a_file_is_eexist",
    "NoPathWalk": "test_rename_into_a_missing_directory_is_enoent_and_keeps_the_source",
    "FileTakenForADirectory": "test_mkdir_under_a_file_is_enotdir",
    "RmdirRemovesAFile": "test_rmdir_of_a_file_is_enotdir",
    "RmdirKeepsTheNameCached": "test_a_removed_directory_is_gone_from_its_parent",
    "RmdirOfAMissingNameSucceeds": "test_rmdir_of_a_missing_name_is_enoent",
    "UnlinkRemovesADirectory": "test_unlink_of_a_directory_fails_and_keeps_it",
    "DirectoryOpensForWriting": "test_opening_a_directory_for_writing_is_eisdir",
    "ListdirOfAFileIsEmpty": "test_listdir_of_a_file_is_enotdir",
    "StModeWithoutTheFileType": "test_stat_of_a_directory_is_s_isdir",
    "DcacheKeyedByTheLastName": "test_the_same_name_in_two_directories_names_two_files",
}
# the semantics tests' reproduce section, fsx's replay line, the differential test's
REPRODUCTION = re.compile(r"^(?:reproduce|fsx: replay it|replay): (python -m pytest .*)", re.M)


def default_suites(pytester: pytest.Pytester, spec: str, *extra: str,
                   shrink: bool = False) -> pytest.RunResult:
    """The default run against ``spec``; unshrunk unless ``shrink`` (most tests here check
    only which tests fail and that a reproduction is printed: shrinking is checked once)."""
    return runpytest_own_process(
        pytester, "-p", "pytest_folio", "--pyargs", "pytest_folio.suites", "-k", "not mtd",
        f"--folio-fs={spec}", "--folio-seed=1", "-p", "no:cacheprovider",
        "-p", "no:hypothesispytest", "-q", *([] if shrink else ["--folio-shrink-seconds=0"]),
        *extra)


def test_the_catalogue_holds_at_least_thirty_distinct_bugs() -> None:
    assert len(CATALOGUE) == len(set(CATALOGUE)) >= 30


def test_every_named_catcher_is_a_bug_of_the_catalogue_and_a_test_of_the_suite() -> None:
    names = {s.split(":")[1].removesuffix(".factory") for s in CATALOGUE}
    assert set(CAUGHT_BY) <= names
    assert all(hasattr(FsNamespace, test) for test in CAUGHT_BY.values())


@pytest.mark.parametrize("args", CORRECT, ids=[a[0].split(":")[1] for a in CORRECT])
def test_a_correct_file_system_passes_the_default_suites(pytester: pytest.Pytester,
                                                          args: tuple[str, ...]) -> None:
    result = default_suites(pytester, *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    assert result.parseoutcomes()["passed"] > 80


def test_a_file_system_without_directories_skips_the_directory_tests(
        pytester: pytest.Pytester) -> None:
    result = default_suites(pytester, "tests.helpers.fsx_broken:WithoutDirectories.factory",
                            "--folio-block-sizes=4k", "-k", "test_fs_semantics", "-rs")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()[-3000:]
    skipped = re.search(r"SKIPPED \[(\d+)\] .*WithoutDirectories\.mkdir raises EOPNOTSUPP: "
                        r"it has no directories", result.stdout.str())
    assert skipped is not None, result.stdout.str()[-3000:]
    assert int(skipped.group(1)) >= 25


@pytest.mark.parametrize("spec", CATALOGUE, ids=[s.split(":")[1] for s in CATALOGUE])
def test_each_bug_is_caught_by_the_default_suites_with_a_reproduction(
        pytester: pytest.Pytester, spec: str) -> None:
    catcher = CAUGHT_BY.get(spec.split(":")[1].removesuffix(".factory"))
    # a named catcher must catch its bug without the differential test (which runs first)
    result = default_suites(pytester, spec, "-x",
                            *(["--folio-fs-oracle=none"] if catcher else []))
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert result.parseoutcomes()["failed"] == 1
    assert REPRODUCTION.search(out), out[-3000:]
    if catcher is not None:
        assert re.search(rf"FAILED \S*::{catcher}\[", out), out[-3000:]


@pytest.mark.parametrize(("spec", "rules"), CRASH_ONLY,
                         ids=[s.split(":")[1] for s, _ in CRASH_ONLY])
def test_each_crash_only_bug_is_caught_by_the_power_cut_suites_alone(
        pytester: pytest.Pytester, spec: str, rules: str) -> None:
    # The Hypothesis form of fsx draws from the generator the three random fsx tests
    # run (and shrinks what they find): off, it cost 40% of each run; the correct
    # file systems' runs above keep it.
    extra = [] if rules == "fsync" else [f"--folio-power-cut-rules={rules}"]
    result = default_suites(pytester, spec, "--folio-hypothesis=off", *extra)
    out = result.stdout.str()
    failed = set(re.findall(r"FAILED \S*::(test_\w+)\[", out))
    assert failed == POWER_CUT_TESTS, out[-3000:]
    assert REPRODUCTION.search(out), out[-3000:]
    assert "shrunk to" not in out, out[-3000:]     # --folio-shrink-seconds=0
    rule = "ordered mode's 'size never before data'" if rules == "ordered" else "fsync's promise"
    assert f"broke {rule}: " in out, out[-3000:]
    found = REPRODUCTION.search(out)
    assert found is not None and all(word in found.group(1) for word in extra)


def test_a_power_cut_failure_is_shrunk_within_the_default_budget(
        pytester: pytest.Pytester) -> None:
    result = default_suites(pytester, CRASH_ONLY[0][0], "--folio-hypothesis=off", "-x",
                            "-k", "power", shrink=True)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert "shrunk to" in out, out[-3000:]


@pytest.mark.parametrize("spec", DURABILITY, ids=[s.split(":")[1] for s in DURABILITY])
def test_each_durability_bug_is_caught_by_the_power_cut_suites(pytester: pytest.Pytester,
                                                               spec: str) -> None:
    result = default_suites(pytester, spec, "-k", "test_fs_powercut")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out[-3000:]
    assert "broke fsync's promise: " in out, out[-3000:]
    assert REPRODUCTION.search(out), out[-3000:]


def test_a_writeback_mode_file_system_passes_under_fsync_rules_not_ordered_ones(
        pytester: pytest.Pytester) -> None:
    spec = "tests.helpers.fsx_powercut:WritebackModeFS"
    passed = default_suites(pytester, spec, "-k", "test_fs_powercut")
    passed.assert_outcomes(passed=3 * 4)       # three block sizes and the bounded cache
    failed = default_suites(pytester, spec, "-k", "test_fs_powercut",
                            "--folio-power-cut-rules=ordered")
    failed.assert_outcomes(failed=3 * 4)
    assert failed.stdout.str().count("broke ordered mode's 'size never before data': ") >= 12


def test_a_file_system_without_power_cut_skips_the_power_cut_tests(
        pytester: pytest.Pytester) -> None:
    result = default_suites(pytester, "reference", "-k", "test_fs_powercut", "-rs")
    result.assert_outcomes(skipped=3 * 3)      # three tests at three block sizes
    result.stdout.fnmatch_lines(["*Ramfs cannot lose power here: it has no power_cut()*"])


@pytest.mark.parametrize(("spec", "select"), [
    ("tests.helpers.fsx_broken:OExclIgnored", "not mtd"),              # the differential
    ("tests.helpers.fsx_broken:OExclIgnored", "semantics"),            # a semantics test
    ("tests.helpers.fsx_broken:CollapseRangeWrongShift.factory", "test_fsx"),  # fsx, its log
])
def test_the_printed_reproduction_fails_again(pytester: pytest.Pytester, spec: str,
                                              select: str) -> None:
    # the logs kept where the rerun finds them (each run empties pytester's basetemp)
    first = default_suites(pytester, spec, "-x", "-k", select,
                           f"--folio-fsx-dir={pytester.path / 'logs'}")
    found = REPRODUCTION.search(first.stdout.str())
    assert found is not None, first.stdout.str()[-3000:]
    words = shlex.split(found.group(1))
    assert f"--folio-fs={spec}" in words
    again = pytester.runpytest(*words[3:], "-p", "no:cacheprovider")
    again.assert_outcomes(failed=1)


@pytest.mark.parametrize("bug", DIFFERENTIAL_BUGS, ids=[b.__name__ for b in DIFFERENTIAL_BUGS])
def test_each_differential_class_is_caught_by_the_differential_test_alone(
        pytester: pytest.Pytester, bug: type) -> None:
    result = runpytest_own_process(pytester, "-p", "pytest_folio", "--pyargs",
                                   "pytest_folio.suites.test_fs_differential",
                                   f"--folio-fs=tests.helpers.fsx_broken:{bug.__name__}",
                                   "--folio-seed=1", "-p", "no:cacheprovider", "-q")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    assert "differential: op " in result.stdout.str()
