"""A patch to built-in code on a packaged kernel (``--kernel debian:SUITE --patch``):
ramfs, built into every kernel, is built patched as module ramfs_patched, registering
file system ramfs_patched beside the stock one; other built-in code is refused with the
way out (--build-kernel). Also the seed's two forms, 7.2 and 6.12."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from pytest_folio.cli import main
from pytest_folio.vm import apt, initramfs, runner
from pytest_folio.vm.apt import Archive, SuiteApt
from pytest_folio.vm.build import (
    FORM_WRAPPER,
    NO_BTF,
    RAMFS_MODULE,
    BuildError,
    Built,
    ModuleBuilder,
    built_in,
    module_forms,
    series_form,
    touched_files,
)
from pytest_folio.vm.qemu import BASE_CMDLINE
from pytest_folio.vm.source import KernelSource
from pytest_folio.vmabi import MARK
from tests.helpers.vm import bzimage, kernel_source, kernel_tree, module, needs_xz

SEEDS = Path(__file__).parents[2] / "examples/seeds"
needs_patch = pytest.mark.skipif(shutil.which("patch") is None, reason="needs patch(1)")

# fs/ramfs as Linux 6.12 has it: built in (obj-y), a composite of inode.o and the
# MMU-dependent file-*.o named through a variable of the Makefile's own.
RAMFS_MAKEFILE = """\
obj-y += ramfs.o

file-mmu-y := file-nommu.o
file-mmu-$(CONFIG_MMU) := file-mmu.o
ramfs-objs += inode.o $(file-mmu-y)
"""

RAMFS_PATCH = """\
--- a/fs/ramfs/inode.c
+++ b/fs/ramfs/inode.c
@@ -1,3 +1,3 @@
 static int blocksize;
-static int old;
+static int new;
 fs_initcall(init_ramfs_fs);
"""

# make(1) for the tests: the .ko of each module the directory's Kbuild names
FAKE_MAKE = """\
#!/bin/sh
for a; do case $a in M=*) dir=${a#M=};; esac; done
echo "make $*"
for m in $(sed -n 's/^obj-m += \\(.*\\)\\.o$/\\1/p' "$dir/Kbuild"); do touch "$dir/$m.ko"; done
"""


@pytest.fixture
def fake_make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make = tmp_path / "bin" / "make"
    make.parent.mkdir()
    make.write_text(FAKE_MAKE)
    make.chmod(0o755)
    monkeypatch.setenv("PATH", f"{make.parent}:{os.environ['PATH']}")


def test_built_in_is_obj_y_or_an_option_set_to_y(tmp_path: Path) -> None:
    makefile = tmp_path / "Makefile"
    makefile.write_text(RAMFS_MAKEFILE + "obj-$(CONFIG_XFS_FS) += xfs.o\nobj-m += brd.o\n")
    assert built_in(makefile, "ramfs", "") == "obj-y"
    assert built_in(makefile, "xfs", "CONFIG_XFS_FS=y\n") == "CONFIG_XFS_FS=y"
    assert built_in(makefile, "xfs", "CONFIG_XFS_FS=m\n") is None
    assert built_in(makefile, "brd", "") is None


@needs_patch
def test_a_patch_to_built_in_ramfs_builds_module_ramfs_patched(
        tmp_path: Path, fake_make: None) -> None:
    src = kernel_source(tmp_path, {"fs/ramfs/Makefile": RAMFS_MAKEFILE,
                             "fs/ramfs/inode.c": "static int blocksize;\nstatic int old;\n"
                                                 "fs_initcall(init_ramfs_fs);\n",
                             "fs/ramfs/file-mmu.c": ""})
    patch = tmp_path / "ramfs.patch"
    patch.write_text(RAMFS_PATCH)
    built = ModuleBuilder(src, tmp_path / "cache", lambda m: None).build([patch])
    assert list(built.modules) == [RAMFS_MODULE]
    assert list(module_forms(built)) == ["fs/ramfs"]
    ramfs = built.log.parent / "src/fs/ramfs"
    kbuild = (ramfs / "Kbuild").read_text().splitlines()
    # the Makefile's variables stay, its obj-y line goes: nothing is built in here
    assert "file-mmu-$(CONFIG_MMU) := file-mmu.o" in kbuild
    assert not any(line.startswith("obj-y") for line in kbuild)
    assert kbuild[-2:] == [f"obj-m += {RAMFS_MODULE}.o",
                           f"{RAMFS_MODULE}-objs := {RAMFS_MODULE}_main.o $(file-mmu-y)"]
    wrapper = (ramfs / f"{RAMFS_MODULE}_main.c").read_text()
    assert '#include "inode.c"' in wrapper
    assert f'ramfs_fs_type.name = "{RAMFS_MODULE}";' in wrapper
    assert 'MODULE_LICENSE("GPL");' in wrapper
    assert "static int new;" in (ramfs / "inode.c").read_text()  # the patched file
    assert NO_BTF in built.log.read_text()  # no pahole needed for 6.12's headers


def test_the_wrapper_renames_before_the_files_own_initcall_registers() -> None:
    """The wrapper's macro, run through the C preprocessor around a file shaped like
    fs/ramfs/inode.c: one module_init that sets the name and calls the file's init."""
    cpp = shutil.which("cpp")
    if cpp is None:
        pytest.skip("needs cpp (apt-get install cpp)")
    text = FORM_WRAPPER.format(directory="fs/ramfs", main="inode.c", name=RAMFS_MODULE,
                               fs_type="ramfs_fs_type")
    body = text.replace("#include <linux/module.h>\n", "").replace(
        '#include "inode.c"', "fs_initcall(init_ramfs_fs);")
    out = subprocess.run([cpp, "-P"], input=body, capture_output=True, text=True,
                         check=True).stdout
    flat = " ".join(out.split())
    assert re.search(r"static int __init folio_module_init\(void\) \{ ramfs_fs_type\.name = "
                     rf'"{RAMFS_MODULE}"; return init_ramfs_fs\(\); \}}', flat)
    assert "unregister_filesystem(&ramfs_fs_type)" in flat
    assert "module_init(folio_module_init); module_exit(folio_module_exit)" in flat


@needs_patch
def test_other_built_in_code_is_refused_with_the_way_out(tmp_path: Path,
                                                         fake_make: None) -> None:
    src = kernel_source(tmp_path, {"fs/proc/Makefile": "obj-y += proc.o\nproc-y := inode.o\n",
                             "fs/proc/inode.c": "static int blocksize;\nstatic int old;\n"
                                                "fs_initcall(init_ramfs_fs);\n"})
    patch = tmp_path / "proc.patch"
    patch.write_text(RAMFS_PATCH.replace("fs/ramfs", "fs/proc"))
    with pytest.raises(BuildError, match=r"fs/proc/inode\.c \(obj-y in fs/proc/Makefile\): "
                                         r"built into kernel 6\.1\.0-test, so no module can "
                                         r"replace it: .*--build-kernel"):
        ModuleBuilder(src, tmp_path / "cache", lambda m: None).build([patch])


LIBFS = """\
obj-y :=\topen.o read_write.o \\
\t\tlibfs.o fs_parser.o
"""


@needs_patch
def test_beside_the_module_form_other_built_in_changes_are_named_as_left_out(
        tmp_path: Path, fake_make: None) -> None:
    """The seed's simple_write_begin() fix in fs/libfs.c is in vmlinux: the ramfs module
    is built, and the build says which change the booted kernel will not carry (cached
    builds too)."""
    body = "static int blocksize;\nstatic int old;\nfs_initcall(init_ramfs_fs);\n"
    src = kernel_source(tmp_path, {"fs/ramfs/Makefile": RAMFS_MAKEFILE,
                                   "fs/ramfs/inode.c": body, "fs/ramfs/file-mmu.c": "",
                                   "fs/Makefile": LIBFS, "fs/libfs.c": body})
    patch = tmp_path / "ramfs.patch"
    patch.write_text(RAMFS_PATCH + RAMFS_PATCH.replace("fs/ramfs/inode.c", "fs/libfs.c"))
    builder = ModuleBuilder(src, tmp_path / "cache", lambda m: None)
    built = builder.build([patch])
    assert list(built.modules) == [RAMFS_MODULE]
    assert built.left_out == ("fs/libfs.c (obj-y in fs/Makefile)",)
    assert not (built.log.parent / "src/fs/Kbuild").exists()  # nothing built from fs/
    again = builder.build([patch])
    assert again.cached and again.left_out == built.left_out


@needs_patch
def test_a_module_option_set_to_y_in_the_kernel_is_built_in_too(tmp_path: Path,
                                                                fake_make: None) -> None:
    files = {"drivers/mtd/devices/Makefile": "obj-$(CONFIG_MTD_BLOCK2MTD) += block2mtd.o\n",
             "drivers/mtd/devices/block2mtd.c": "static int blocksize;\nstatic int old;\n"
                                                "fs_initcall(init_ramfs_fs);\n"}
    patch = tmp_path / "b.patch"
    patch.write_text(RAMFS_PATCH.replace("fs/ramfs/inode.c",
                                         "drivers/mtd/devices/block2mtd.c"))
    src = kernel_source(tmp_path / "y", files, config="CONFIG_MTD_BLOCK2MTD=y\n")
    with pytest.raises(BuildError, match=r"\(CONFIG_MTD_BLOCK2MTD=y in "):
        ModuleBuilder(src, tmp_path / "cache", lambda m: None).build([patch])
    src = kernel_source(tmp_path / "m", files, config="CONFIG_MTD_BLOCK2MTD=m\n")
    built = ModuleBuilder(src, tmp_path / "cache", lambda m: None).build([patch])
    assert list(built.modules) == ["block2mtd"] and not module_forms(built)


def _changes(patch: Path) -> list[str]:
    """A patch's changed lines, in order: what it does, whatever its context."""
    body = patch.read_text().split("\n---\n", 1)[1]
    return [ln for ln in body.splitlines()
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def test_the_6_12_seed_is_the_7_2_seed_change_for_change() -> None:
    """ramfs-blocksize-6.12.patch exists because its context differs (6.12's
    generic_delete_inode next to the .statfs line it changes); what it changes does not."""
    new, old = SEEDS / "ramfs-blocksize.patch", SEEDS / "ramfs-blocksize-6.12.patch"
    assert touched_files(old.read_text()) == touched_files(new.read_text()) == [
        "fs/ramfs/inode.c", "fs/libfs.c"]
    assert _changes(old) == _changes(new)
    assert "generic_delete_inode" in old.read_text().split("\n---\n", 1)[1]
    assert "inode_just_drop" in new.read_text().split("\n---\n", 1)[1]


def test_the_guest_mounts_the_module_form_by_its_name(tmp_path: Path) -> None:
    lines = initramfs.ramfs_lines((4096, 16384), RAMFS_MODULE)
    script = "\n".join(lines)
    assert (f"mount -t {RAMFS_MODULE} -o blocksize=16k {RAMFS_MODULE} "
            "/newroot/run/folio/ramfs-16K") in script
    assert f'" /newroot/run/folio/ramfs-16K {RAMFS_MODULE} .*blocksize="' in script
    assert f"no {RAMFS_MODULE} blocksize mount option" in script
    subprocess.run(["sh", "-n"], input=script, text=True, check=True)


GUEST = (f"say('{MARK} init'); "
         f"say('{MARK} ramfs /run/folio/ramfs-16K 16384 16x2 '); "
         f"say('{MARK} start'); say('APPEND ' + sys.argv[sys.argv.index('-append') + 1]); "
         f"say('{MARK} exit 0')")


def _boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str
          ) -> list[initramfs.GuestJob]:
    """``vm --patch`` (touching ramfs) against a stand-in qemu, with the module form's
    build stood in: the guest jobs the run made."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    qemu = bin_dir / "qemu-system-x86_64"
    qemu.write_text(f"#!{sys.executable}\nimport sys\n"
                    "def say(line):\n    sys.stdout.write(line + '\\r\\n'); sys.stdout.flush()\n"
                    f"{GUEST}\n")
    qemu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    (tmp_path / "bzImage").write_bytes(bzimage(b"", "6.1.0-test"))
    names = ("virtio_pci", "9pnet_virtio", "9p", "virtio_blk", "block2mtd")
    kernel_tree(tmp_path / "k", "6.1.0-test", {f"kernel/{n}.ko": module() for n in names})
    ko = tmp_path / f"{RAMFS_MODULE}.ko"
    ko.write_bytes(module())
    patch = tmp_path / "ramfs-blocksize.patch"
    patch.write_text(RAMFS_PATCH)
    jobs: list[initramfs.GuestJob] = []

    def keep(busybox: Path, modules: list[tuple[str, bytes]], job: initramfs.GuestJob
             ) -> bytes:
        jobs.append(job)
        return b""
    monkeypatch.setattr(runner, "build_for_kernel", lambda *a, **k: Built(
        {RAMFS_MODULE: ko}, None, tmp_path / "log", patch.name,
        left_out=("fs/libfs.c (obj-y in fs/Makefile)",)))
    monkeypatch.setattr(runner, "build_initramfs", keep)
    monkeypatch.setattr(runner, "find_busybox", lambda: tmp_path / "bzImage")
    monkeypatch.setattr(runner, "kvm_usable", lambda: False)
    monkeypatch.setattr(runner, "warm_bytecode", lambda argv, prefix, environ: 0.0)
    monkeypatch.chdir(tmp_path)
    assert main(["vm", "--kernel", str(tmp_path / "bzImage"), "--modules",
                 str(tmp_path / "k"), "--cache-dir", str(tmp_path / "cache"), "--timeout",
                 "20", "--patch", str(patch), *args, "--", "--folio-block-sizes=16k"]) == 0
    return jobs


def test_the_runner_says_the_kernel_carries_the_patch_in_module_form(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """With the module form built, the guest mounts ramfs_patched, and the run says
    which kernel carries the patch and how before the tests start."""
    jobs = _boot(tmp_path, monkeypatch)
    err = capsys.readouterr().err
    assert jobs[0].ramfs_type == RAMFS_MODULE and jobs[0].modules[-1] == RAMFS_MODULE
    assert jobs[0].ramfs_sizes == (16384,)
    assert ("folio-vm: kernel 6.1.0-test carries ramfs-blocksize.patch in part (module "
            f"form: the patched fs/ramfs is module {RAMFS_MODULE}, mounted as -t "
            f"{RAMFS_MODULE}; its built-in one is stock; fs/libfs.c is built in and runs "
            "unpatched)") in err
    assert "folio-vm: ramfs blocksize=16k at /run/folio/ramfs-16K" in err


def test_kernel_args_go_on_the_guest_kernels_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """init_on_alloc=0: a Debian kernel then leaves a page cache's stale bytes to see."""
    _boot(tmp_path, monkeypatch, "--kernel-args", " init_on_alloc=0 ")
    line = next(ln for ln in capsys.readouterr().out.splitlines()
                if ln.startswith("APPEND "))
    assert line == f"APPEND {BASE_CMDLINE} init_on_alloc=0"


def test_kernel_args_of_more_than_one_line_are_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vm", "--kernel-args", "a\nb", "--"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--kernel-args: one line of kernel parameters, e.g. "
                            "init_on_alloc=0") and len(err) == 1


@needs_xz
def test_a_directory_is_taken_out_whole_after_a_directory_inside_it(tmp_path: Path) -> None:
    """fs/ramfs taken out first, then fs (for fs/libfs.c): fs is taken out too, merged
    in; a path inside one taken out whole is not taken out again."""
    tree = tmp_path / "linux-source-6.12"
    for rel in ("fs/ramfs/inode.c", "fs/libfs.c", "mm/filemap.c"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(rel)
    tarball = tmp_path / "src" / "pkg" / "linux-source-6.12.tar.xz"
    tarball.parent.mkdir(parents=True)
    with tarfile.open(tarball, "w:xz") as tar:
        tar.add(tree, arcname="linux-source-6.12")
    calls: list[list[str]] = []

    def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.run(cmd, capture_output=True, text=True, check=False)
    src = KernelSource("6.12.0-test", "6.12.1-1", tmp_path / "src", tmp_path, tarball, "sh")
    src.extract(["fs/ramfs"], run)
    assert not (src.tree / "fs/libfs.c").exists()
    src.extract(["fs"], run)
    assert (src.tree / "fs/libfs.c").read_text() == "fs/libfs.c"
    assert (src.tree / "fs/ramfs/inode.c").read_text() == "fs/ramfs/inode.c"
    src.extract(["fs/ramfs", "fs"], run)
    assert len(calls) == 2 and not (src.tree / "mm").exists()


def test_bookworm_backports_comes_from_the_hosts_archive_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """debian:bookworm-backports on a Debian 12 host that lists bookworm and its updates
    only: its private apt names the host's archive with that one suite (the 6.12 kernel
    and its source come from there, nothing of bookworm's own lists)."""
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /k/debian.gpg\n")
    archive = Archive("http://mirror.example/debian", "/k/debian.gpg")
    monkeypatch.setattr(apt, "host_archive", lambda: archive)
    assert SuiteApt(tmp_path, "bookworm-backports").sources(tmp_path) == [
        (archive, "bookworm-backports")]


@needs_patch
def test_a_patch_that_does_not_apply_names_its_form_for_the_kernels_series(
        tmp_path: Path) -> None:
    """ramfs-blocksize.patch (7.2) on 6.12's source: the refusal names
    ramfs-blocksize-6.12.patch when it lies beside it."""
    src = kernel_source(tmp_path, {"fs/ramfs/Makefile": RAMFS_MAKEFILE,
                                   "fs/ramfs/inode.c": "other\n"})
    patch = tmp_path / "ramfs-blocksize.patch"
    patch.write_text(RAMFS_PATCH)
    builder = ModuleBuilder(src, tmp_path / "cache", lambda m: None)
    with pytest.raises(BuildError, match=r"does not apply .*\.log\)$"):
        builder.build([patch])
    (tmp_path / "ramfs-blocksize-6.1.patch").write_text(RAMFS_PATCH)
    with pytest.raises(BuildError, match=r"\.log\); ramfs-blocksize-6\.1\.patch beside it is "
                                         r"its form for 6\.1$"):
        builder.build([patch])
    assert series_form(patch, "tree 53e640f26c408ab3d3f8") is None
