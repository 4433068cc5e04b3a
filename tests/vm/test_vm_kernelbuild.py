"""--build-kernel: the configuration, the cache key, the refusals."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_folio.cli import main
from pytest_folio.errors import CommandError
from pytest_folio.vm import VMError, kernelbuild
from pytest_folio.vm.disks import MAX_BDEV_ORDER
from pytest_folio.vm.kernel import REQUIRED_MODULES
from pytest_folio.vm.kernelbuild import (
    BUILD_TOOLS,
    VM_CONFIG,
    build_kernel,
    build_key,
    changes_built_in_code,
    debian_source_tree,
    tree_hash,
)
from tests.helpers.vm import needs_xz

_ABSENT = [tool for tool in BUILD_TOOLS if shutil.which(tool) is None]
# the README's commands install no build tools; CI installs them (.ci/run)
needs_build_tools = pytest.mark.skipif(
    bool(_ABSENT), reason=f"building a kernel needs {', '.join(_ABSENT)} (Debian: apt-get "
    "install build-essential flex bison bc)")


def test_the_configuration_has_every_option_the_guest_needs() -> None:
    options = dict(line.split("=", 1) for line in VM_CONFIG.splitlines())
    for option in REQUIRED_MODULES.values():
        assert options.get(option) in ("y", "m"), option
    # what --patch replaces, and the kernel's own tests, must be modules
    for option in ("CONFIG_MTD_BLOCK2MTD", "CONFIG_MTD_TESTS", "CONFIG_BLK_DEV_RAM"):
        assert options[option] == "m", option
    assert options["CONFIG_XFS_FS"] == "m" and options["CONFIG_PVH"] == "y"


def test_the_configuration_gives_block_devices_large_folios() -> None:
    """Without THP, BLK_MAX_BLOCK_SIZE is PAGE_SIZE: virtio_blk refuses a 16K disk."""
    options = dict(line.split("=", 1) for line in VM_CONFIG.splitlines())
    assert MAX_BDEV_ORDER > 0 and options["CONFIG_TRANSPARENT_HUGEPAGE"] == "y"
    assert options["CONFIG_FTRACE"] == "y" and options["CONFIG_ENABLE_DEFAULT_TRACERS"] == "y"


def test_a_plain_trees_hash_follows_its_files(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text("all:\n")
    before = tree_hash(tmp_path)
    assert tree_hash(tmp_path) == before
    (tmp_path / "new.c").write_text("int x;\n")
    assert tree_hash(tmp_path) != before


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_git_trees_hash_follows_head_and_its_diff(tmp_path: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c",
                        "user.email=t@t", *args], check=True, capture_output=True)
    git("init", "-q")
    (tmp_path / "Makefile").write_text("all:\n")
    git("add", "Makefile")
    git("commit", "-qm", "one")
    clean = tree_hash(tmp_path)
    (tmp_path / "Makefile").write_text("all: x\n")
    assert tree_hash(tmp_path) != clean
    assert build_key(tmp_path) != build_key(tmp_path, VM_CONFIG + "CONFIG_EXT4_FS=y\n")


def test_a_directory_that_is_no_kernel_tree_is_refused(tmp_path: Path) -> None:
    with pytest.raises(VMError, match="not a kernel source tree"):
        build_kernel(tmp_path, tmp_path / "cache", lambda m: None)


@pytest.mark.parametrize(("args", "message"), [
    (["--patch", "/nonexistent.patch"], "--patch /nonexistent.patch: no such file"),
    (["--driver", "/nonexistent.c"], "--driver /nonexistent.c: no such file or directory"),
    (["--build-kernel", "/", "--kernel", "/bzImage"], "--build-kernel boots the kernel it "
                                                      "builds: leave out --kernel"),
    (["--build-kernel", "/nonexistent"], "--build-kernel /nonexistent: no such directory"),
    (["--interleave", "--mtd-tests"], "--interleave swaps the stock and the built modules"),
    (["--no-build"], "--no-build goes with --build-kernel"),
])
def test_build_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                         message: str) -> None:
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["vm", *args, "--", "-x"]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err


FAKE_KBUILD = """\
allnoconfig:
\tmkdir -p $(O) && cp $(KCONFIG_ALLCONFIG) $(O)/.config && echo configured >> $(O)/../runs
\techo "KBUILD_OUTPUT = $(O)" > $(O)/Makefile
bzImage:
\tmkdir -p $(O)/arch/x86/boot
\ttest -f $(O)/object.o && echo resumed >> $(O)/../runs || echo fresh >> $(O)/../runs
\ttouch $(O)/object.o
\ttest ! -f $(O)/../../../../stop
\tprintf '\\177ELF' > $(O)/arch/x86/boot/bzImage
modules:
modules_install:
\tmkdir -p $(INSTALL_MOD_PATH)/lib/modules/9.9.9/kernel
"""


@needs_build_tools
def test_a_stopped_build_resumes_where_it_stopped(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "Makefile").write_text(FAKE_KBUILD)
    (src / "Kconfig").write_text("")
    cache = tmp_path / "cache"
    (tmp_path / "stop").write_text("")  # the first build fails after its first object
    with pytest.raises(VMError, match="building the kernel failed"):
        build_kernel(src, cache, lambda m: None)
    entry = cache / "built-kernels" / build_key(src)
    assert (entry / "build" / "object.o").is_file()  # kept, not thrown away
    assert not (entry / "done").exists()
    (tmp_path / "stop").unlink()
    said: list[str] = []
    kernel = build_kernel(src, cache, said.append).kernel
    assert (entry / "runs").read_text().split() == ["configured", "fresh", "resumed"]
    assert kernel.release == "9.9.9" and (entry / "done").is_file()
    assert any(line.startswith("resuming the stopped build") for line in said)


@needs_build_tools
def test_a_failed_build_names_the_compilers_error_not_makes_last_line(tmp_path: Path
                                                                      ) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "Makefile").write_text(FAKE_KBUILD.replace(
        "\ttouch $(O)/object.o\n",
        "\t@echo 'fs/ramfs/inode.c:227:12: error: invalid use of undefined type'\n"
        "\t@echo 'make[1]: Leaving directory'; false\n"))
    (src / "Kconfig").write_text("")
    with pytest.raises(VMError, match=r"building the kernel failed: fs/ramfs/inode.c:227:12: "
                                      r"error: invalid use of undefined type \(log: "):
        build_kernel(src, tmp_path / "cache", lambda m: None)


@needs_build_tools
def test_the_build_directory_stays_where_it_was_configured(tmp_path: Path) -> None:
    """Its Makefile names its own path (KBUILD_OUTPUT): modules built later against it
    follow that path, so the directory must not be moved once configured."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "Makefile").write_text(FAKE_KBUILD)
    (src / "Kconfig").write_text("")
    source = build_kernel(src, tmp_path / "cache", lambda m: None).source
    named = (source.headers / "Makefile").read_text().split("= ", 1)[1].strip()
    assert Path(named) == source.headers and source.headers.is_dir()


def _tree(root: Path) -> Path:
    """A fake kernel tree: ramfs built in (obj-y), block2mtd a module of its option."""
    for path, text in {"Makefile": FAKE_KBUILD, "Kconfig": "",
                       "fs/ramfs/Makefile": "obj-y += ramfs.o\nramfs-objs += inode.o\n",
                       "fs/ramfs/inode.c": "int blocksize;\n",
                       "drivers/mtd/devices/Makefile":
                           "obj-$(CONFIG_MTD_BLOCK2MTD) += block2mtd.o\n",
                       "drivers/mtd/devices/block2mtd.c": "int x;\n",
                       "include/linux/pagemap.h": "#define A 1\n"}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def _patch(tmp_path: Path, file: str, old: str, new: str) -> Path:
    patch = tmp_path / f"{Path(file).stem}.patch"
    patch.write_text(f"description\n---\n--- a/{file}\n+++ b/{file}\n@@ -1 +1 @@\n"
                     f"-{old}\n+{new}\n")
    return patch


def test_a_patch_to_built_in_code_goes_into_the_kernel_and_a_modules_to_the_module(
        tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    ramfs = _patch(tmp_path, "fs/ramfs/inode.c", "int blocksize;", "int blocksize = 1;")
    header = _patch(tmp_path, "include/linux/pagemap.h", "#define A 1", "#define A 2")
    block2mtd = _patch(tmp_path, "drivers/mtd/devices/block2mtd.c", "int x;", "int y;")
    assert changes_built_in_code(ramfs, src) and changes_built_in_code(header, src)
    assert not changes_built_in_code(block2mtd, src)
    # a module the configuration builds into the kernel is built-in code too
    assert changes_built_in_code(block2mtd, src,
                                 VM_CONFIG.replace("CONFIG_MTD_BLOCK2MTD=m",
                                                   "CONFIG_MTD_BLOCK2MTD=y"))


@needs_build_tools
def test_the_kernel_is_built_from_a_patched_copy_and_says_what_it_carries(
        tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    ramfs = _patch(tmp_path, "fs/ramfs/inode.c", "int blocksize;", "int blocksize = 1;")
    block2mtd = _patch(tmp_path, "drivers/mtd/devices/block2mtd.c", "int x;", "int y;")
    said: list[str] = []
    built = build_kernel(src, tmp_path / "cache", said.append,
                         patches=(ramfs, block2mtd))
    assert built.in_kernel == (ramfs,) and built.for_modules == (block2mtd,)
    entry = tmp_path / "cache" / "built-kernels" / build_key(src, VM_CONFIG, (ramfs,))
    assert (entry / "done").is_file() and built.source.tree == entry / "src"
    assert (entry / "src/fs/ramfs/inode.c").read_text() == "int blocksize = 1;\n"
    assert (src / "fs/ramfs/inode.c").read_text() == "int blocksize;\n"  # never changed
    assert build_key(src) != build_key(src, VM_CONFIG, (ramfs,))
    assert any("with inode.patch in" in line for line in said)
    again: list[str] = []
    build_kernel(src, tmp_path / "cache", again.append, patches=(ramfs,))
    assert any("with inode.patch built before" in line for line in again)


@needs_build_tools
def test_a_patch_that_does_not_apply_to_the_tree_is_one_line(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    bad = _patch(tmp_path, "fs/ramfs/inode.c", "int nothing;", "int blocksize = 1;")
    with pytest.raises(VMError, match=r"inode.patch does not apply to .*src \(log: "):
        build_kernel(src, tmp_path / "cache", lambda m: None, patches=(bad,))


class FakeSuiteApt:
    """What debian_source_tree asks of a suite's apt, over one built .deb."""

    def __init__(self, deb: Path, version: str) -> None:
        self.deb, self.ver, self.fetched = deb, version, 0

    def depends(self, package: str) -> list[str]:
        return ["linux-source-9.9"] if package == "linux-source" else []

    def version(self, package: str) -> str:
        return self.ver

    def fetch(self, name: str, version: str) -> Path:
        self.fetched += 1
        return self.deb


def _source_deb(tmp_path: Path, text: str) -> Path:
    top = tmp_path / "src-pkg"
    (top / "linux-source-9.9").mkdir(parents=True, exist_ok=True)
    (top / "linux-source-9.9/Makefile").write_text(text)
    (top / "pkg/usr/src").mkdir(parents=True, exist_ok=True)
    (top / "pkg/DEBIAN").mkdir(exist_ok=True)
    (top / "pkg/DEBIAN/control").write_text(
        "Package: linux-source-9.9\nVersion: 9.9.1-1\nArchitecture: all\n"
        "Maintainer: t <t@t>\nDescription: t\n")
    subprocess.run(["tar", "-cJf", str(top / "pkg/usr/src/linux-source-9.9.tar.xz"), "-C",
                    str(top), "linux-source-9.9"], check=True)
    deb = tmp_path / "linux-source-9.9.deb"
    subprocess.run(["dpkg-deb", "-b", str(top / "pkg"), str(deb)], check=True,
                   capture_output=True)
    return deb


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")
@needs_xz
def test_a_debian_suites_newest_source_is_fetched_once_per_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    apt = FakeSuiteApt(_source_deb(tmp_path, "VERSION = 9\n"), "9.9.1-1")
    monkeypatch.setattr(kernelbuild, "suite_apt", lambda root, suite: apt)
    said: list[str] = []
    tree = debian_source_tree("sid", tmp_path / "cache", said.append)
    assert tree == tmp_path / "cache/trees/linux-source-9.9"
    assert (tree / "Makefile").read_text() == "VERSION = 9\n" and apt.fetched == 1
    assert debian_source_tree("sid", tmp_path / "cache", said.append) == tree
    assert apt.fetched == 1 and "(cached" in said[-1]
    apt.deb, apt.ver = _source_deb(tmp_path, "VERSION = 10\n"), "9.9.2-1"
    debian_source_tree("sid", tmp_path / "cache", said.append)
    assert (tree / "Makefile").read_text() == "VERSION = 10\n" and apt.fetched == 2


def test_build_kernel_takes_a_debian_suite() -> None:
    from pytest_folio.cli import build_parser
    from pytest_folio.vm.vmoptions import check_options
    opts = check_options(build_parser().parse_args(["vm", "--build-kernel", "debian:sid"]))
    assert opts.build_kernel is None and opts.build_suite == "sid"
    opts = check_options(build_parser().parse_args(["vm", "--build-kernel", "debian:sid",
                                                    "--no-build"]))
    assert opts.build_suite == "sid" and opts.no_build
    with pytest.raises(CommandError, match="--build-kernel debian:a/b: not a Debian suite"):
        check_options(build_parser().parse_args(["vm", "--build-kernel", "debian:a/b"]))


@needs_build_tools
def test_no_build_boots_a_cached_build_only(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    ramfs = _patch(tmp_path, "fs/ramfs/inode.c", "int blocksize;", "int blocksize = 1;")
    with pytest.raises(VMError, match=r"no cached build of kernel .*src with inode.patch in "
                                      r".*\(--no-build builds nothing\)"):
        build_kernel(src, tmp_path / "cache", lambda m: None, patches=(ramfs,), build=False)
    assert not (tmp_path / "cache/built-kernels").exists() or not any(
        (tmp_path / "cache/built-kernels").glob("*/done"))
    build_kernel(src, tmp_path / "cache", lambda m: None, patches=(ramfs,))
    built = build_kernel(src, tmp_path / "cache", lambda m: None, patches=(ramfs,),
                         build=False)
    assert built.in_kernel == (ramfs,)
