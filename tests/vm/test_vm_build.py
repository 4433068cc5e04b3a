"""Out-of-tree builds (--patch, --driver, --mtd-tests): what a patch touches, which
module a file belongs to, the cache key, the failures that mean exit 125."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pytest_folio.vm import VMError
from pytest_folio.vm.build import (
    BuildError,
    Built,
    ModuleBuilder,
    build_key,
    loaded_lines,
    module_of,
    origin_text,
    stage_interleave,
    substitute,
    touched_files,
)
from pytest_folio.vm.modules import ModuleTree
from tests.helpers.vm import kernel_source, kernel_tree, module

SEED_PATCH = Path(__file__).parents[2] / "examples/seeds/block2mtd-folio.patch"

PATCH = """\
From: someone
Subject: [PATCH] fix

--- a/drivers/mtd/devices/block2mtd.c\t2026-01-01
+++ b/drivers/mtd/devices/block2mtd.c\t2026-01-02
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
"""


def test_a_patch_touches_the_files_of_its_plus_lines() -> None:
    two = PATCH + PATCH.replace("devices/block2mtd.c", "tests/speedtest.c")
    assert touched_files(two) == ["drivers/mtd/devices/block2mtd.c",
                                  "drivers/mtd/tests/speedtest.c"]


def test_a_new_file_counts_and_a_deleted_one_by_its_old_name() -> None:
    text = ("--- /dev/null\n+++ b/drivers/x/new.c\n@@ -0,0 +1 @@\n+a\n"
            "--- a/drivers/x/old.c\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n")
    assert touched_files(text) == ["drivers/x/new.c", "drivers/x/old.c"]


def test_the_seed_patch_touches_block2mtd_only() -> None:
    assert touched_files(SEED_PATCH.read_text()) == ["drivers/mtd/devices/block2mtd.c"]


def test_a_file_named_in_obj_is_its_own_module(tmp_path: Path) -> None:
    makefile = tmp_path / "Makefile"
    makefile.write_text("obj-$(CONFIG_MTD_BLOCK2MTD)\t+= block2mtd.o\n"
                        "obj-$(CONFIG_MTD_PHRAM) += phram.o\n")
    assert module_of(makefile, "block2mtd.c") == ("block2mtd", ["block2mtd.o"])


def test_a_file_of_a_composite_module_names_the_composite(tmp_path: Path) -> None:
    makefile = tmp_path / "Makefile"
    makefile.write_text("obj-$(CONFIG_MTD_TESTS) += mtd_speedtest.o mtd_test.o\n"
                        "mtd_speedtest-objs := speedtest.o \\\n\thelper.o\n")
    assert module_of(makefile, "speedtest.c") == ("mtd_speedtest",
                                                  ["speedtest.o", "helper.o"])
    assert module_of(makefile, "other.c") is None


def test_the_key_changes_with_the_patch_and_the_kernel(tmp_path: Path) -> None:
    src = kernel_source(tmp_path, {})
    one, two = tmp_path / "one.patch", tmp_path / "two.patch"
    one.write_text(PATCH)
    two.write_text(PATCH.replace("TWO", "2"))
    key = build_key(src, "gcc 12", [one], None, False)
    assert key == build_key(src, "gcc 12", [one], None, False)
    assert key != build_key(src, "gcc 12", [two], None, False)
    assert key != build_key(src, "gcc 13", [one], None, False)
    assert key != build_key(src, "gcc 12", [one], None, True)


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs patch(1)")
def test_a_patch_that_does_not_apply_names_the_log(tmp_path: Path) -> None:
    src = kernel_source(tmp_path, {"drivers/mtd/devices/block2mtd.c": "other\ntext\nhere\n",
                             "drivers/mtd/devices/Makefile": "obj-m += block2mtd.o\n"})
    patch = tmp_path / "fix.patch"
    patch.write_text(PATCH)
    with pytest.raises(BuildError, match=r"fix.patch does not apply to the source of "
                                         r"kernel 6.1.0-test 6.1.1-1 \(log: .*\.log\)"):
        ModuleBuilder(src, tmp_path / "cache", lambda m: None).build([patch])
    logs = list((tmp_path / "cache/builds").glob("*.log"))
    assert len(logs) == 1 and "patch -p1" in logs[0].read_text()


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs patch(1)")
def test_a_file_no_module_is_built_from_is_refused(tmp_path: Path) -> None:
    src = kernel_source(tmp_path, {"drivers/mtd/devices/block2mtd.c": "one\ntwo\nthree\n",
                             "drivers/mtd/devices/Makefile": "obj-m += phram.o\n"})
    patch = tmp_path / "fix.patch"
    patch.write_text(PATCH)
    with pytest.raises(BuildError, match=r"block2mtd\.c is built into no module"):
        ModuleBuilder(src, tmp_path / "cache", lambda m: None).build([patch])


FAKE_MAKE = """\
#!/bin/sh
for a; do case $a in M=*) dir=${a#M=};; esac; done
echo "make in $dir"
[ -e "$dir/fail" ] && { echo "$dir/block2mtd.c:1: error: it broke"; exit 2; }
touch "$dir/block2mtd.ko"
"""


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs patch(1)")
@pytest.mark.parametrize("fails", [False, True])
def test_a_patched_module_is_made_and_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                fails: bool) -> None:
    """The steps in order, with a make(1) that makes a .ko or fails: the Kbuild names the
    module, make runs in M=DIR, its .ko is installed; a failure names the error line."""
    files = {"drivers/mtd/devices/block2mtd.c": "one\ntwo\nthree\n",
             "drivers/mtd/devices/Makefile": "obj-$(CONFIG_MTD_BLOCK2MTD) += block2mtd.o\n"}
    if fails:
        files["drivers/mtd/devices/fail"] = ""
    src = kernel_source(tmp_path, files)
    make = tmp_path / "bin" / "make"
    make.parent.mkdir()
    make.write_text(FAKE_MAKE)
    make.chmod(0o755)
    monkeypatch.setenv("PATH", f"{make.parent}:{os.environ['PATH']}")
    patch = tmp_path / "fix.patch"
    patch.write_text(PATCH)
    builder = ModuleBuilder(src, tmp_path / "cache", lambda m: None)
    if fails:
        with pytest.raises(BuildError, match=r"building drivers/mtd/devices for kernel "
                                             r"6.1.0-test failed: .*error: it broke \(log: "):
            builder.build([patch])
        return
    built = builder.build([patch])
    assert list(built.modules) == ["block2mtd"] and not built.cached
    assert built.mtd_tests is None and built.origin == "fix.patch"
    log = built.log.read_text()
    assert "patch -p1" in log and "M=" in log and "-j2 modules" in log
    kbuild = built.log.parent / "src/drivers/mtd/devices/Kbuild"
    assert kbuild.read_text() == "obj-m += block2mtd.o\n"
    assert builder.build([patch]).cached


def test_a_kernel_without_its_compiler_here_cannot_be_tested(tmp_path: Path) -> None:
    src = kernel_source(tmp_path, {}, compiler="gcc-999")
    with pytest.raises(VMError, match=r"built with gcc-999, which this host does not have"
                                      r".*--build-kernel"):
        ModuleBuilder(src, tmp_path / "cache", lambda m: None).build([])


def test_built_modules_replace_the_stock_ones_in_place(tmp_path: Path) -> None:
    tree = kernel_tree(tmp_path / "k", modules={"kernel/mtd.ko": module()})
    built = tmp_path / "block2mtd.ko"
    built.write_bytes(module("mtd") + b"built")
    order = [("mtd", b"stock-mtd"), ("block2mtd", b"stock"), ("brd", b"brd")]
    mods = ModuleTree(tree / "lib/modules/6.1.0-test", "6.1.0-test")
    out = substitute(order, {"block2mtd": built}, mods, "6.1.0-test")
    assert [n for n, _ in out] == ["mtd", "block2mtd", "brd"]
    assert out[1][1].endswith(b"built") and out[0][1] == b"stock-mtd"


def test_a_new_module_comes_last_after_its_dependencies(tmp_path: Path) -> None:
    tree = kernel_tree(tmp_path / "k", modules={"kernel/mtd.ko": module()})
    built = tmp_path / "mydrv.ko"
    built.write_bytes(module("mtd"))
    mods = ModuleTree(tree / "lib/modules/6.1.0-test", "6.1.0-test")
    out = substitute([("brd", b"brd")], {"mydrv": built}, mods, "6.1.0-test")
    assert [n for n, _ in out] == ["brd", "mtd", "mydrv"]


def test_a_module_built_for_another_kernel_is_refused(tmp_path: Path) -> None:
    tree = kernel_tree(tmp_path / "k")
    built = tmp_path / "block2mtd.ko"
    built.write_bytes(module(vermagic="7.2.0 SMP "))
    mods = ModuleTree(tree / "lib/modules/6.1.0-test", "6.1.0-test")
    with pytest.raises(BuildError, match=r"is for kernel 7\.2\.0, not 6\.1\.0-test"):
        substitute([("block2mtd", b"x")], {"block2mtd": built}, mods, "6.1.0-test")


def test_the_loaded_line_names_the_module_and_the_patch(tmp_path: Path) -> None:
    built = Built({"block2mtd": tmp_path / "block2mtd.ko"}, None, tmp_path / "log",
                  origin_text([SEED_PATCH], None))
    assert loaded_lines(built, ["mtd", "block2mtd"]) == [
        "loaded block2mtd built with block2mtd-folio.patch"]
    assert origin_text([Path("a.patch"), Path("b.patch")], Path("x/my.c")) == \
        "a.patch + b.patch + driver my.c"


def test_interleave_stages_the_stock_and_the_built_module_side_by_side(tmp_path: Path) -> None:
    built_ko = tmp_path / "block2mtd.ko"
    built_ko.write_bytes(b"built")
    built = Built({"block2mtd": built_ko}, None, tmp_path / "log", "x.patch")
    staged = stage_interleave(tmp_path / "ab", [("mtd", b"mtd"), ("block2mtd", b"stock")],
                              built)
    assert (staged / "base/block2mtd.ko").read_bytes() == b"stock"
    assert (staged / "patched/block2mtd.ko").read_bytes() == b"built"
    assert (staged / "origin").read_text() == "x.patch"


@pytest.mark.parametrize(("modules", "stock", "message"), [
    ({"mtd": "mtd.ko", "block2mtd": "b.ko"}, ["mtd", "block2mtd"], "swaps block2mtd alone"),
    ({"block2mtd": "b.ko"}, ["mtd"], "no stock block2mtd to compare"),
])
def test_interleave_refuses_what_it_cannot_swap(tmp_path: Path, modules: dict[str, str],
                                                stock: list[str], message: str) -> None:
    built = Built({n: tmp_path / f for n, f in modules.items()}, None, tmp_path / "log", "p")
    with pytest.raises(BuildError, match=message):
        stage_interleave(tmp_path / "ab", [(n, b"") for n in stock], built)
