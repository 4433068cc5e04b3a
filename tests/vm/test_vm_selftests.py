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
from pytest_folio.ktap.run import write_log
from pytest_folio.vm import run_tool
from pytest_folio.vm.selftests import MM, Selftest, build_selftests, guest_argv, parse_ktap_tests
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
    write_log(log, [("t: ok", ok), ("t: skip", skip), ("t: crash", crash),
                    ("t: hang", hang)], [("t: missing", "does not build: x.c:1: error")],
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
    source = fake_tree(tmp_path / "src", {"cow": TAP_PROGRAM,
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
    names = ("cow", "broken", "absent")
    got = build_selftests(source, names, tmp_path / "cache", messages.append, run)
    cow, broken, absent = got
    assert cow.path is not None and broken.path is None and absent.path is None
    out = subprocess.run([str(cow.path)], capture_output=True, text=True, check=True)
    assert [t.outcome for t in parse(out.stdout)] == ["passed", "skipped"]
    assert broken.reason.startswith("does not build:") and "nope" in broken.reason
    assert absent.reason == "6.12.0-test's selftests have no absent.c"
    assert sum(c[0] == "make" for c in calls) == 1
    calls.clear()
    assert build_selftests(source, names, tmp_path / "cache", messages.append, run) == got
    assert [c[0] for c in calls] == ["cc"]   # cow is cached; what failed is tried again
    assert build_selftests(source, ("cow",), tmp_path / "cache", messages.append,
                           run) == [cow]
    assert "(cached" in messages[-1]


def test_the_guest_command_runs_the_selftests_then_pytest() -> None:
    tests = [Selftest("cow", Path("/c/cow")), Selftest("x", None, "does not build: e")]
    argv = guest_argv("/py", tests, "/run/out/ktap.log",
                      ["/py", "-m", "pytest", "-p", "pytest_folio", "-q"])
    assert argv == ["/py", "-m", "pytest_folio.ktap.run", "--out", "/run/out/ktap.log",
                    "--program=selftests: mm: cow=/c/cow",
                    "--missing=selftests: mm: x=does not build: e",
                    "--", "-p", "pytest_folio", "-q"]


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
