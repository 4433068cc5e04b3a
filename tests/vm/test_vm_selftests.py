"""vm --ktap: the kernel's selftests built on the host, run in the guest into one KTAP
log, and read by the guest's pytest as items. Here without qemu: the builder against a
small tree of our own with the host's compiler, the guest's runner on this machine."""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_folio.errors import CommandError
from pytest_folio.ktap.log import parse
from pytest_folio.ktap.run import Entry, unusable, write_log
from pytest_folio.vm import run_tool
from pytest_folio.vm.selftests import (
    MM,
    Place,
    Selftest,
    build_selftests,
    guest_argv,
    pagecache_places,
    parse_ktap_tests,
)
from pytest_folio.vm.source import KernelSource
from pytest_folio.vm.vmoptions import add_arguments, check_options

needs_cc = pytest.mark.skipif(shutil.which("cc") is None,
                              reason="needs a C compiler (cc): CI installs gcc")

TAP_PROGRAM = r"""
#include <stdio.h>
int main(void) {
    printf("TAP version 13\n1..2\n# [RUN] first case\nok 1 works\n");
    printf("ok 2 # SKIP not here\n");
    return 0;
}
"""


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_guest_runner_nests_each_program_and_reads_its_exit_status(
        tmp_path: Path) -> None:
    ok = script(tmp_path / "ok", "echo 'TAP version 13'; echo 1..2; echo 'ok 1 a'; "
                "sleep 0.2; echo 'not ok 2 b'; exit 0\n")
    skip = script(tmp_path / "skip", "echo 'TAP version 13'; echo '1..0 # SKIP no THP'; "
                  "exit 4\n")
    crash = script(tmp_path / "crash", "echo 'TAP version 13'; echo 1..3; echo 'ok 1 a';"
                   " kill -SEGV $$\n")
    hang = script(tmp_path / "hang", "echo 'TAP version 13'; echo 1..1; exec sleep 30\n")
    log = tmp_path / "ktap.log"
    write_log(log, [Entry("t: ok", ok), Entry("t: skip", skip), Entry("t: crash", crash),
                    Entry("t: hang", hang),
                    Entry("t: missing", reason="does not build: x.c:1: error")],
              timeout=2.0)
    tests = parse(log.read_text())
    assert [(t.name, t.outcome) for t in tests] == [
        ("t: ok", "passed"), ("t: skip", "skipped"), ("t: crash", "failed"),
        ("t: hang", "failed"), ("t: missing", "skipped")]
    first, _, crashed, hung, missing = tests
    assert [(s.name, s.outcome) for s in first.subtests] == [("a", "passed"),
                                                             ("b", "failed")]
    assert first.subtests[1].duration is not None and first.subtests[1].duration >= 0.15
    assert crashed.reason == "killed by SIGSEGV"
    assert "planned 3 subtests, 1 ran" in crashed.problems
    assert (hung.directive, hung.reason) == ("TIMEOUT", "2 seconds")
    assert missing.reason == "does not build: x.c:1: error"


def test_the_guest_runner_hands_the_log_to_pytest(tmp_path: Path) -> None:
    program = script(tmp_path / "prog", "echo 'TAP version 13'; echo 1..2; "
                     "echo 'ok 1 folio_split'; echo 'not ok 2 folio_merge'\n")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTEST_ADDOPTS": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_folio.ktap.run", "--out", str(tmp_path / "k.log"),
         f"--program=selftests: mm: prog={program}", "--", "-p", "pytest_folio",
         "-p", "no:cacheprovider", "-q"],
        cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1 failed, 1 passed" in proc.stdout
    assert "k.log::selftests: mm: prog::folio_merge" in proc.stdout


def fake_tree(root: Path, sources: dict[str, str]) -> KernelSource:
    tree = root / "tree"
    tests = tree / "tools/testing/selftests/mm"
    tests.mkdir(parents=True)
    for directory in ("scripts", "include", "arch/x86", "usr", "tools/include", "mm",
                      "tools/arch/x86/include"):
        (tree / directory).mkdir(parents=True, exist_ok=True)
    (tree / "Makefile").write_text("# the kernel's top Makefile\n")
    (tree / "mm/gup_test.h").write_text("/* gup_test's ioctls */\n")
    (tests / "Makefile").write_text("# the selftests' Makefile\n")
    (tests / "vm_util.c").write_text("int vm_util;\n")
    for name, text in sources.items():
        (tests / f"{name}.c").write_text(text)
    return KernelSource("6.12.0-test", "6.12.1-1", root, root, None, "cc",
                        local_tree=root / "tree")


@needs_cc
def test_selftests_build_against_the_trees_headers_and_are_cached(tmp_path: Path) -> None:
    split = TAP_PROGRAM + "static void split_thp_in_pagecache_to_order(void) {}\n"
    source = fake_tree(tmp_path / "src", {"cow": TAP_PROGRAM, "split_huge_page_test": split,
                                          "broken": "int main(void) { return nope; }\n"})
    calls: list[list[str]] = []

    def run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        if cmd[0] == "make":        # make headers: the user-space headers, here a stand-in
            out = Path(next(a for a in cmd if a.startswith("O="))[2:])
            (out / "usr/include/linux").mkdir(parents=True)
            return subprocess.CompletedProcess(cmd, 0, "", "")
        return run_tool(cmd, cwd)

    messages: list[str] = []
    names = ("cow", "broken", "absent", "split_huge_page_test")
    got = build_selftests(source, names, tmp_path / "cache", messages.append, run)
    cow, broken, absent, pagecache = got
    assert cow.path is not None and broken.path is None and absent.path is None
    # the page-cache cases, read from the source: they get a directory per place
    assert pagecache.pagecache and not cow.pagecache
    out = subprocess.run([str(cow.path)], capture_output=True, text=True, check=True)
    assert [t.outcome for t in parse(out.stdout)] == ["passed", "skipped"]
    assert broken.reason.startswith("does not build:") and "nope" in broken.reason
    assert absent.reason == "6.12.0-test's selftests have no absent.c"
    assert sum(c[0] == "make" for c in calls) == 1
    calls.clear()
    assert build_selftests(source, names, tmp_path / "cache", messages.append, run) == got
    assert [c[0] for c in calls] == ["cc"]   # cow is cached; what failed is tried again
    assert build_selftests(source, ("cow", "split_huge_page_test"), tmp_path / "cache",
                           messages.append, run) == [cow, pagecache]
    assert "(cached" in messages[-1]


def test_the_guest_command_runs_the_selftests_then_pytest() -> None:
    tests = [Selftest("cow", Path("/c/cow")), Selftest("x", None, "does not build: e")]
    argv = guest_argv("/py", tests, "/run/out/ktap.log",
                      ["/py", "-m", "pytest", "-p", "pytest_folio", "-q"],
                      [Place("4K-xfs", "/run/folio/xfs-4K")], "6.12.0-test")
    assert argv == ["/py", "-m", "pytest_folio.ktap.run", "--out", "/run/out/ktap.log",
                    "--program=selftests: mm: cow=/c/cow",
                    "--missing=selftests: mm: x=does not build: e",
                    "--", "-p", "pytest_folio", "-q"]


SPLIT = "selftests: mm: split_huge_page_test"


def test_the_page_cache_test_runs_once_per_place_or_skips_saying_why() -> None:
    places = [Place("4K-xfs", "/run/folio/xfs-4K"), Place("2M-xfs", reason="too big"),
              Place("huge-tmpfs", "tmpfs:huge=always")]
    head = ["/py", "-m", "pytest", "-q"]
    split = Selftest("split_huge_page_test", Path("/c/s"), pagecache=True)
    argv = guest_argv("/py", [split], "/l", head, places, "6.12.0-test")
    assert argv[5:-2] == [
        f"--program={SPLIT} [4K-xfs]=/c/s", f"--directory={SPLIT} [4K-xfs]=/run/folio/xfs-4K",
        f"--missing={SPLIT} [2M-xfs]=too big",
        f"--program={SPLIT} [huge-tmpfs]=/c/s",
        f"--directory={SPLIT} [huge-tmpfs]=tmpfs:huge=always"]
    # a source without the page-cache cases (Linux 6.1), or a test that did not build:
    # each place is a skipped test saying so
    old = Selftest("split_huge_page_test", Path("/c/s"))
    assert guest_argv("/py", [old], "/l", head, places[:1], "6.1.0-test")[5:-2] == [
        f"--program={SPLIT}=/c/s",
        f"--missing={SPLIT} [4K-xfs]=6.1.0-test's split_huge_page_test has no page-cache "
        "cases (no split_thp_in_pagecache in its source)"]
    broken = Selftest("split_huge_page_test", None, "does not build: e")
    assert guest_argv("/py", [broken], "/l", head, places[:1], "6.12.0-test")[5:-2] == [
        f"--missing={SPLIT}=does not build: e", f"--missing={SPLIT} [4K-xfs]=does not build: e"]


def test_page_cache_places_are_the_runs_block_sizes_and_a_huge_tmpfs() -> None:
    k, m = 1024, 1024 * 1024
    places = pagecache_places("xfs", [4 * k, 16 * k, 2 * m],
                              {4 * k: "/run/folio/xfs-4K", 16 * k: "/run/folio/xfs-16K"},
                              "6.12.95+deb12-amd64")
    assert places == [Place("4K-xfs", "/run/folio/xfs-4K"),
                      Place("16K-xfs", "/run/folio/xfs-16K"),
                      Place("2M-xfs", reason="xfs blocks are at most 64K"),
                      Place("huge-tmpfs", "tmpfs:huge=always")]
    ramfs = pagecache_places("ramfs", [4 * k, 64 * k], {}, "6.1.0-57-amd64")
    assert [(p.label, p.where) for p in ramfs] == [
        ("4K-xfs", ""), ("64K-xfs", ""), ("huge-tmpfs", "tmpfs:huge=always")]
    assert ramfs[0].reason == ("the run has no xfs (--fs ramfs; vm --fs xfs makes one per "
                               "--folio-block-sizes size)")
    assert ramfs[1].reason == "xfs blocks above PAGE_SIZE need Linux 6.12 or later, not " \
        "6.1.0-57-amd64"
    assert pagecache_places("ext4", [4 * k], {}, "6.12.1")[0] == Place(
        "4K-ext4", reason="the run has no ext4 at 4K blocks")


ARGV_PROGRAM = """echo 'TAP version 13'; echo 1..1
if [ -n "$1" ] && [ -d "$1" ] && touch "$1/test"; then
  echo "# in $1 on $(stat -f -c %T "$1")"; echo 'ok 1 page cache'
else echo "not ok 1 page cache # no directory: '$1'"; fi
"""


def test_the_guest_runner_gives_a_fresh_directory_on_the_place_and_removes_it(
        tmp_path: Path) -> None:
    program = script(tmp_path / "prog", ARGV_PROGRAM)
    place = tmp_path / "scratch"
    place.mkdir()
    (place / "kept").write_text("not ours")
    log = tmp_path / "ktap.log"
    write_log(log, [Entry("p", program), Entry("p [4K-xfs]", program, where=str(place)),
                    Entry("p [8K-xfs]", program, where=str(tmp_path / "absent"))],
              timeout=30.0)
    bare, placed, absent = parse(log.read_text())
    assert [t.subtests[0].outcome for t in (bare, placed)] == ["failed", "passed"]
    assert any(d.startswith(f"in {place}/ktap-") for d in placed.subtests[0].diagnostics)
    assert sorted(p.name for p in place.iterdir()) == ["kept"]   # its own dir removed
    assert (absent.outcome, absent.reason) == ("skipped",
                                              f"{tmp_path / 'absent'} is not a directory")


def _private_mounts() -> bool:
    if unusable("tmpfs:size=1m") is not None or shutil.which("grep") is None:
        return False
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                          capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not _private_mounts(),
                    reason="needs root, unshare(1) with mount namespaces, mount(8), grep")
def test_a_tmpfs_place_is_mounted_with_its_options_for_the_program_alone(
        tmp_path: Path) -> None:
    program = script(tmp_path / "prog", ARGV_PROGRAM + 'grep " $1 " /proc/mounts\n')
    log = tmp_path / "ktap.log"
    write_log(log, [Entry("p [tmpfs]", program, where="tmpfs:size=1m,mode=0700")],
              timeout=30.0)
    [run] = parse(log.read_text())
    assert run.outcome == "passed", log.read_text()
    lines = run.subtests[0].diagnostics + run.diagnostics
    assert any(d.startswith("in /tmp/folio-pagecache on tmpfs") for d in lines)
    assert any("size=1024k" in d and "mode=700" in d for d in lines), lines
    with open("/proc/mounts", encoding="ascii", errors="replace") as mounts:
        assert "folio-pagecache" not in mounts.read()     # in its namespace only


def test_a_directory_for_no_program_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_folio.ktap.run", "--out", str(tmp_path / "k.log"),
         "--program=p=/bin/true", "--directory=q=/tmp"],
        capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].endswith(
        "--directory q=/tmp: no one --program named 'q'")
    assert not (tmp_path / "k.log").exists()


def vm_options(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args([*argv, "--cache-dir", "/nonexistent-cache"])


def test_ktap_names_a_set_or_selftests() -> None:
    assert check_options(vm_options("--ktap", "mm")).ktap == MM
    assert check_options(vm_options("--ktap", "cow,mkdirty,cow")).ktap == ("cow", "mkdirty")
    assert parse_ktap_tests("mm,cow") == MM
    with pytest.raises(CommandError, match=r"--ktap cow;rm: 'cow;rm' is neither a set"):
        check_options(vm_options("--ktap", "cow;rm"))
    with pytest.raises(CommandError, match="--guests and --ktap do not go together"):
        check_options(vm_options("--ktap", "mm", "--guests", "2"))


def test_kunit_and_a_built_kernel_are_refused_in_one_line() -> None:
    with pytest.raises(CommandError, match=r"^--ktap kunit:mm: 'kunit:mm': no Debian kernel "
                       r"has KUnit \(CONFIG_KUNIT is off in bookworm, .*--folio-ktap"):
        check_options(vm_options("--ktap", "kunit:mm"))
    with pytest.raises(CommandError, match=r"^--build-kernel and --ktap do not go together: "
                       r"the VM's minimal kernel configuration has no CONFIG_DEBUG_FS"):
        check_options(vm_options("--ktap", "mm", "--build-kernel", "debian:sid"))
