"""Kernel fetching and caching, vmlinux extraction, module dependency order."""

from __future__ import annotations

import gzip
import lzma
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_folio.vm import VMError, cache_root
from pytest_folio.vm.apt import Archive, check_suite, fetch_package, host_archive
from pytest_folio.vm.bootimage import bootable_image, bzimage_release, extract_vmlinux, has_pvh_note
from pytest_folio.vm.kernel import (
    REQUIRED_MODULES,
    KernelCache,
    fetch_distro_kernel,
    fetch_suite_kernel,
    kernel_from_tree,
    user_kernel,
)
from pytest_folio.vm.modules import ModuleTree, modinfo, module_name
from tests.helpers.vm import bzimage, elf64, kernel_tree, module, pvh_vmlinux


class FakeApt:
    """Answers apt-cache/apt-get/dpkg-deb like Debian would, counting downloads."""

    def __init__(self, version: str = "6.1.192-3", reachable: bool = True) -> None:
        self.version = version
        self.reachable = reachable
        self.downloads: list[str] = []
        self.has_vmlinuz = True

    def __call__(self, cmd: list[str], cwd: Path | None = None
                 ) -> subprocess.CompletedProcess[str]:
        def done(rc: int, out: str = "", err: str = "") -> subprocess.CompletedProcess[str]:
            return subprocess.CompletedProcess(cmd, rc, out, err)

        if cmd[:2] == ["apt-cache", "depends"]:
            if not self.reachable:
                return done(100, err="E: No packages found\n")
            return done(0, f"{cmd[2]}\n  Depends: linux-image-6.1.0-57-amd64\n")
        if cmd[:2] == ["apt-cache", "show"]:
            return done(0, f"Package: {cmd[-1]}\nVersion: {self.version}\n")
        if cmd[:2] == ["apt-get", "download"]:
            if not self.reachable:
                return done(100, err="E: Failed to fetch linux-image: 503\n")
            self.downloads.append(cmd[2])
            assert cwd is not None
            (cwd / "linux-image.deb").write_bytes(b"deb")
            return done(0)
        if cmd[:2] == ["dpkg-deb", "-x"]:
            release = "6.1.0-57-amd64"
            kernel_tree(Path(cmd[3]) / "pkg", release)
            for item in (Path(cmd[3]) / "pkg").iterdir():
                item.rename(Path(cmd[3]) / item.name)
            if not self.has_vmlinuz:
                shutil.rmtree(Path(cmd[3]) / "boot")
            return done(0)
        if Path(cmd[0]).name == "depmod":
            (Path(cmd[2]) / "lib/modules" / cmd[3] / "modules.dep").write_text("")
            return done(0)
        raise AssertionError(f"unexpected command {cmd}")


def quiet(message: str) -> None:
    pass


def test_cache_root_honours_environment() -> None:
    assert cache_root({"PYTEST_FOLIO_CACHE": "/x"}) == Path("/x")
    assert cache_root({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/pytest-folio")
    assert cache_root({"HOME": "/h"}) == Path("/h/.cache/pytest-folio")


def test_fetch_unpacks_once_and_reuses(tmp_path: Path) -> None:
    apt, cache = FakeApt(), KernelCache(tmp_path)
    first = fetch_distro_kernel(cache, quiet, run=apt)
    assert first.release == "6.1.0-57-amd64"
    assert first.image.name == "vmlinuz-6.1.0-57-amd64"
    assert first.modules == cache.entry("linux-image-6.1.0-57-amd64", "6.1.192-3") / \
        "lib/modules/6.1.0-57-amd64"
    messages: list[str] = []
    second = fetch_distro_kernel(cache, messages.append, run=apt)
    assert second == first
    assert apt.downloads == ["linux-image-6.1.0-57-amd64=6.1.192-3"]
    assert "cached" in messages[0]
    # no download or staging leftovers next to the entry
    assert [p.name for p in (tmp_path / "kernels").iterdir()] == [
        "linux-image-6.1.0-57-amd64_6.1.192-3"]


def test_new_package_version_is_fetched(tmp_path: Path) -> None:
    apt, cache = FakeApt(), KernelCache(tmp_path)
    fetch_distro_kernel(cache, quiet, run=apt)
    apt.version = "6.1.200-1"
    fetch_distro_kernel(cache, quiet, run=apt)
    assert len(apt.downloads) == 2
    assert cache.lookup("linux-image-6.1.0-57-amd64", "6.1.200-1") is not None


def test_unreachable_apt_falls_back_to_the_cache(tmp_path: Path) -> None:
    apt, cache = FakeApt(), KernelCache(tmp_path)
    cached = fetch_distro_kernel(cache, quiet, run=apt)
    apt.reachable = False
    messages: list[str] = []
    assert fetch_distro_kernel(cache, messages.append, run=apt) == cached
    assert "using the cached kernel 6.1.0-57-amd64" in messages[0]


def test_unreachable_apt_without_cache_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(VMError, match=r"^no kernel package reachable: apt knows no "
                                      r"linux-image-amd64 \(E: No packages found; run "
                                      r"apt-get update\?\)$"):
        fetch_distro_kernel(KernelCache(tmp_path), quiet, run=FakeApt(reachable=False))


def test_failed_download_is_one_line(tmp_path: Path) -> None:
    apt = FakeApt()

    def run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        if cmd[:2] == ["apt-get", "download"]:
            return subprocess.CompletedProcess(cmd, 100, "", "E: Failed to fetch x 404\n")
        return apt(cmd, cwd)

    with pytest.raises(VMError, match=r"apt-get download .* failed \(E: Failed to fetch"):
        fetch_distro_kernel(KernelCache(tmp_path), quiet, run=run)


def test_package_without_kernel_is_not_published(tmp_path: Path) -> None:
    apt, cache = FakeApt(), KernelCache(tmp_path)
    apt.has_vmlinuz = False
    with pytest.raises(VMError, match="no boot/vmlinuz"):
        fetch_distro_kernel(cache, quiet, run=apt)
    assert cache.lookup("linux-image-6.1.0-57-amd64", "6.1.192-3") is None
    assert cache.newest() is None


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")
def test_real_dpkg_deb_unpacks_a_package(tmp_path: Path) -> None:
    pkg = kernel_tree(tmp_path / "pkg", "6.1.0-real", {"kernel/drivers/brd.ko": module()})
    (pkg / "DEBIAN").mkdir()
    (pkg / "DEBIAN" / "control").write_text(
        "Package: linux-image-test\nVersion: 1.0\nArchitecture: all\n"
        "Maintainer: t <t@example.org>\nDescription: test kernel\n")
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(pkg),
                    str(tmp_path / "k.deb")], check=True, capture_output=True)
    kernel = KernelCache(tmp_path / "cache").add("linux-image-test", "1:1.0",
                                                 tmp_path / "k.deb")
    assert kernel.release == "6.1.0-real"
    assert kernel.modules is not None and (kernel.modules / "kernel/drivers/brd.ko").is_file()
    assert "%3a" in str(kernel.image)  # an epoch's colon never reaches a path


def test_bzimage_release_and_user_kernel(tmp_path: Path) -> None:
    image = tmp_path / "bzImage"
    image.write_bytes(bzimage(b"", "6.13.0-rc1-folio+"))
    assert bzimage_release(image.read_bytes()) == "6.13.0-rc1-folio+"
    assert user_kernel(image, None).release == "6.13.0-rc1-folio+"
    assert bzimage_release(b"\0" * 0x1000) is None


def test_user_kernel_bad_input(tmp_path: Path) -> None:
    with pytest.raises(VMError, match=r"^--kernel .*nope: no such file$"):
        user_kernel(tmp_path / "nope", None)
    with pytest.raises(VMError, match=r"^--kernel /dev/zero: is a character device, not a "
                                      r"kernel image$"):
        user_kernel(Path("/dev/zero"), None)
    with pytest.raises(VMError, match=r"^--kernel .*: is a directory, not a kernel image$"):
        user_kernel(tmp_path, None)
    junk = tmp_path / "junk"
    junk.write_bytes(b"hello" * 100)
    with pytest.raises(VMError, match="neither a bzImage nor an ELF vmlinux"):
        user_kernel(junk, None)
    image = tmp_path / "bzImage"
    image.write_bytes(bzimage(b""))
    with pytest.raises(VMError, match="not a module tree"):
        user_kernel(image, tmp_path)


def test_user_modules_from_install_mod_path(tmp_path: Path) -> None:
    kernel_tree(tmp_path / "staging", "6.1.0-test", {"kernel/brd.ko": module()})
    image = tmp_path / "bzImage"
    image.write_bytes(bzimage(b""))
    kernel = user_kernel(image, tmp_path / "staging")
    assert kernel.modules == tmp_path / "staging/lib/modules/6.1.0-test"


@pytest.mark.parametrize("compress", [gzip.compress, lzma.compress], ids=["gzip", "xz"])
def test_extract_vmlinux_finds_the_elf(compress: object) -> None:
    elf = pvh_vmlinux()
    image = bzimage(b"\x1f\x8b\x08 decoy" + compress(elf))  # type: ignore[operator]
    assert extract_vmlinux(image) == elf
    assert has_pvh_note(elf)
    assert extract_vmlinux(bzimage(gzip.compress(b"not an elf"))) is None


def test_pvh_note_is_required() -> None:
    assert not has_pvh_note(elf64({".text": b"\x90"}))
    assert not has_pvh_note(elf64({".text": b"\x90"}, notes=[(b"GNU", 3, b"1234")]))
    assert not has_pvh_note(b"MZ not elf")


def test_bootable_image_caches_the_vmlinux(tmp_path: Path) -> None:
    store = tmp_path / "cache" / "vmlinux"
    image = tmp_path / "bzImage"
    image.write_bytes(bzimage(gzip.compress(pvh_vmlinux())))
    messages: list[str] = []
    booted = bootable_image(image, store, messages.append)
    assert booted.read_bytes() == pvh_vmlinux()
    assert bootable_image(image, store, messages.append) == booted
    assert len(messages) == 1  # unpacked once


def test_bootable_image_without_pvh_boots_the_bzimage(tmp_path: Path) -> None:
    store = tmp_path / "cache" / "vmlinux"
    image = tmp_path / "bzImage"
    image.write_bytes(bzimage(gzip.compress(elf64({".text": b"\x90"}))))
    messages: list[str] = []
    assert bootable_image(image, store, messages.append) == image
    assert bootable_image(image, store, messages.append) == image
    assert len(messages) == 1  # the "no usable vmlinux" answer is remembered


def test_elf_without_pvh_is_refused(tmp_path: Path) -> None:
    image = tmp_path / "vmlinux"
    image.write_bytes(elf64({".text": b"\x90"}))
    with pytest.raises(VMError, match=r"without a PVH entry note \(CONFIG_PVH\)"):
        bootable_image(image, tmp_path / "vmlinux", quiet)


def test_modinfo_and_names() -> None:
    info = modinfo(module("mtd,virtio-ring"))
    assert info["depends"] == "mtd,virtio-ring"
    assert info["vermagic"].startswith("6.1.0-test ")
    assert module_name("9pnet_virtio.ko.xz") == "9pnet_virtio"
    assert module_name("virtio-rng.ko") == "virtio_rng"


def full_tree(tmp_path: Path, overrides: dict[str, bytes | None] | None = None
              ) -> ModuleTree:
    mods: dict[str, bytes | None] = {
        "kernel/drivers/virtio/virtio_ring.ko": module(),
        "kernel/drivers/virtio/virtio.ko": module("virtio_ring"),
        "kernel/drivers/virtio/virtio_pci.ko": module("virtio,virtio_ring"),
        "kernel/net/9p/9pnet.ko": module(),
        "kernel/net/9p/9pnet_virtio.ko.xz": lzma.compress(module("9pnet,virtio_ring,virtio")),
        "kernel/fs/9p/9p.ko": module("9pnet,netfs"),
        "kernel/fs/netfs/netfs.ko": module(),
        "kernel/drivers/block/virtio_blk.ko": module("virtio,virtio_ring"),
        "kernel/drivers/mtd/mtd.ko": module(),
        "kernel/drivers/mtd/devices/block2mtd.ko": module("mtd"),
    }
    mods.update(overrides or {})
    root = kernel_tree(tmp_path, "6.1.0-test",
                       {k: v for k, v in mods.items() if v is not None}, builtin=["netfs"])
    kernel = kernel_from_tree(root)
    assert kernel.modules is not None
    return ModuleTree(kernel.modules, kernel.release)


def test_load_order_puts_dependencies_first(tmp_path: Path) -> None:
    order = [name for name, _ in full_tree(tmp_path).load_order(REQUIRED_MODULES)]
    assert sorted(order) == sorted(["virtio_ring", "virtio", "virtio_pci", "9pnet",
                                    "9pnet_virtio", "9p", "virtio_blk", "mtd", "block2mtd"])
    for before, after in [("virtio_ring", "virtio"), ("virtio", "virtio_pci"),
                          ("9pnet", "9pnet_virtio"), ("9pnet", "9p"), ("mtd", "block2mtd")]:
        assert order.index(before) < order.index(after)
    assert "netfs" not in order  # built in


def test_compressed_module_is_loaded_decompressed(tmp_path: Path) -> None:
    data = dict(full_tree(tmp_path).load_order(["9pnet_virtio"]))
    assert data["9pnet_virtio"][:4] == b"\x7fELF"


def test_kernel_without_block2mtd_names_the_option(tmp_path: Path) -> None:
    tree = full_tree(tmp_path, {"kernel/drivers/mtd/devices/block2mtd.ko": None})
    with pytest.raises(VMError, match=r"^kernel 6\.1\.0-test has no block2mtd "
                                      r"\(CONFIG_MTD_BLOCK2MTD\): neither built in nor"):
        tree.load_order(REQUIRED_MODULES, REQUIRED_MODULES)


def test_kernel_without_9p_dependency_says_who_needs_it(tmp_path: Path) -> None:
    tree = full_tree(tmp_path, {"kernel/net/9p/9pnet.ko": None})
    with pytest.raises(VMError, match="has no 9pnet, needed by"):
        tree.load_order(REQUIRED_MODULES, REQUIRED_MODULES)


def test_module_for_another_kernel_is_refused(tmp_path: Path) -> None:
    tree = full_tree(tmp_path,
                     {"kernel/drivers/block/virtio_blk.ko": module(vermagic="5.10.0 SMP")})
    with pytest.raises(VMError, match=r"virtio_blk\.ko is for kernel 5\.10\.0, not "
                                      r"6\.1\.0-test"):
        tree.load_order(["virtio_blk"])


# --- debian:SUITE through a private apt configuration ----------------------------------

SID_ABI = "7.2.13+deb14-amd64"


class FakeSuiteApt:
    """apt for a suite whose image package is a meta package over binary/modules/base
    packages (Debian's 7.x layout); records every command with apt's -o options."""

    def __init__(self, suites: tuple[str, ...] = ("sid",), online: bool = True) -> None:
        self.suites, self.online = suites, online
        self.commands: list[list[str]] = []
        self.downloads: list[str] = []
        self.version = "7.2.13-1"

    def __call__(self, cmd: list[str], cwd: Path | None = None
                 ) -> subprocess.CompletedProcess[str]:
        self.commands.append(cmd)
        opts = [c for c in cmd if c.startswith("-o")]
        args = [c for c in cmd if not c.startswith("-o")]

        def done(rc: int, out: str = "", err: str = "") -> subprocess.CompletedProcess[str]:
            return subprocess.CompletedProcess(cmd, rc, out, err)

        if args[:2] == ["apt-get", "update"]:
            listfile = next(o for o in opts if o.startswith("-oDir::Etc::sourcelist="))
            suite = Path(listfile.split("=", 1)[1]).read_text().split()[-2]
            if not self.online:
                return done(0, err=f"W: Failed to fetch http://archive/dists/{suite}/"
                                   "InRelease  Temporary failure resolving 'archive'\n")
            if suite not in self.suites:
                return done(100, err=f"E: The repository 'http://archive {suite} Release' "
                                     "does not have a Release file.\n")
            state = next(o for o in opts if o.startswith("-oDir::State="))
            lists = Path(state.split("=", 1)[1]) / "lists"
            (lists / f"archive_dists_{suite}_main_binary-amd64_Packages").write_text("x")
            return done(0)
        if args[:2] == ["apt-cache", "depends"]:
            if args[2] == "linux-image-amd64":
                return done(0, f"{args[2]}\n  Depends: linux-base-amd64\n"
                               f"  Depends: linux-image-{SID_ABI}\n")
            return done(0, f"{args[2]}\n  PreDepends: linux-base\n |Depends: dracut\n"
                           f"  Depends: <linux-initramfs-tool>\n"
                           f"  Depends: linux-base-{SID_ABI}\n"
                           f"  Depends: linux-binary-{SID_ABI}\n"
                           f"  Depends: linux-modules-{SID_ABI}\n")
        if args[:2] == ["apt-cache", "show"]:
            return done(0, f"Package: {args[-1]}\nVersion: {self.version}\n")
        if args[:2] == ["apt-get", "download"]:
            self.downloads.append(args[2])
            assert cwd is not None
            (cwd / f"{args[2].replace('=', '_')}_amd64.deb").write_text(args[2])
            return done(0)
        if args[:2] == ["dpkg-deb", "-x"]:
            name = Path(args[2]).read_text()
            mods = Path(args[3]) / "usr/lib/modules" / SID_ABI
            mods.mkdir(parents=True, exist_ok=True)
            if name.startswith("linux-binary-"):
                (mods / "vmlinuz").write_bytes(bzimage(b"", SID_ABI))
            if name.startswith("linux-modules-"):
                (mods / "kernel").mkdir()
                (mods / "kernel" / "brd.ko").write_bytes(module(vermagic=SID_ABI))
            if name.startswith("linux-base-"):
                (mods / "modules.builtin").write_text("kernel/virtio_pci.ko\n")
            return done(0)
        if Path(args[0]).name == "depmod":
            assert args[1:] == ["-b", args[2], SID_ABI]
            (Path(args[2]) / "lib/modules" / SID_ABI / "modules.dep").write_text("")
            return done(0)
        raise AssertionError(f"unexpected command {cmd}")


SID_ARCHIVE = Archive("http://archive.example/debian", "/usr/share/keyrings/k.gpg")


def test_suite_kernel_joins_the_split_packages_into_one_tree(tmp_path: Path) -> None:
    apt = FakeSuiteApt()
    kernel = fetch_suite_kernel(KernelCache(tmp_path), "sid", quiet, run=apt,
                                archive=SID_ARCHIVE)
    assert kernel.release == SID_ABI
    assert kernel.image.name == "vmlinuz"
    assert kernel.modules is not None and (kernel.modules / "kernel/brd.ko").is_file()
    assert sorted(apt.downloads) == sorted(
        f"linux-{part}-{SID_ABI}=7.2.13-1" for part in ("image", "base", "binary", "modules"))


@pytest.mark.skipif(shutil.which("depmod", path="/usr/sbin:/sbin:/usr/bin:/bin") is None,
                    reason="needs depmod (kmod)")
def test_suite_kernel_gets_a_modules_dep_from_depmod(tmp_path: Path) -> None:
    kernel = fetch_suite_kernel(KernelCache(tmp_path), "sid", quiet, run=FakeSuiteApt(),
                                archive=SID_ARCHIVE)
    assert kernel.modules is not None and (kernel.modules / "modules.dep").is_file()


def test_suite_apt_never_reads_the_host_sources(tmp_path: Path) -> None:
    apt = FakeSuiteApt()
    fetch_suite_kernel(KernelCache(tmp_path), "sid", quiet, run=apt, archive=SID_ARCHIVE)
    private = tmp_path / "apt" / "sid"
    assert (private / "sources.list").read_text() == \
        "deb [signed-by=/usr/share/keyrings/k.gpg] http://archive.example/debian sid main\n"
    for cmd in apt.commands:
        if cmd[0] in ("apt-get", "apt-cache"):
            dirs = {o.split("=", 1)[0]: o.split("=", 1)[1] for o in cmd if o.startswith("-o")
                    and o.split("=", 1)[0] in ("-oDir::Etc::sourcelist",
                                               "-oDir::Etc::sourceparts", "-oDir::State",
                                               "-oDir::State::status", "-oDir::Cache")}
            assert len(dirs) == 5 and all(v.startswith(str(private)) for v in dirs.values())


def test_suite_kernel_is_cached_per_version(tmp_path: Path) -> None:
    apt, cache = FakeSuiteApt(), KernelCache(tmp_path)
    fetch_suite_kernel(cache, "sid", quiet, run=apt, archive=SID_ARCHIVE)
    messages: list[str] = []
    fetch_suite_kernel(cache, "sid", messages.append, run=apt, archive=SID_ARCHIVE)
    assert len(apt.downloads) == 4 and "(cached)" in messages[0]
    apt.version = "7.2.14-1"  # the suite moved on: its new kernel is fetched
    fetch_suite_kernel(cache, "sid", quiet, run=apt, archive=SID_ARCHIVE)
    assert len(apt.downloads) == 8


def test_unknown_suite_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(VMError, match=r"^no kernel package reachable: no Debian suite "
                                      r"'nosuch' in the archive \(E: The repository "):
        fetch_suite_kernel(KernelCache(tmp_path), "nosuch", quiet, run=FakeSuiteApt(),
                           archive=SID_ARCHIVE)
    assert not (tmp_path / "apt" / "nosuch").exists()


def test_offline_suite_without_cache_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(VMError, match=r"^no kernel package reachable: cannot refresh the "
                                      r"package lists of Debian sid \(W: Failed to fetch"):
        fetch_suite_kernel(KernelCache(tmp_path), "sid", quiet,
                           run=FakeSuiteApt(online=False), archive=SID_ARCHIVE)


def test_offline_suite_uses_its_last_cached_kernel(tmp_path: Path) -> None:
    cache = KernelCache(tmp_path)
    first = fetch_suite_kernel(cache, "sid", quiet, run=FakeSuiteApt(), archive=SID_ARCHIVE)
    messages: list[str] = []
    again = fetch_suite_kernel(cache, "sid", messages.append,
                               run=FakeSuiteApt(online=False), archive=SID_ARCHIVE)
    assert again == first
    assert f"using the cached debian:sid kernel {SID_ABI}" in messages[0]


def test_fetch_package_downloads_each_version_once(tmp_path: Path) -> None:
    apt = FakeSuiteApt()
    deb = fetch_package("sid", "linux-source-7.2", tmp_path, run=apt, archive=SID_ARCHIVE)
    assert deb == tmp_path / "debs/sid/linux-source-7.2_7.2.13-1_amd64.deb"
    assert fetch_package("sid", "linux-source-7.2", tmp_path, run=apt,
                         archive=SID_ARCHIVE) == deb
    assert apt.downloads == ["linux-source-7.2=7.2.13-1"]


def test_host_archive_is_the_one_carrying_the_host_release(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "deb [arch=amd64 signed-by=/k/other.gpg] https://other.example/apt stable main\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /k/debian.gpg\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n")
    assert host_archive(tmp_path, "bookworm") == Archive("http://mirror.example/debian",
                                                         "/k/debian.gpg")
    assert host_archive(tmp_path, "trixie") == Archive("https://other.example/apt",
                                                       "/k/other.gpg")


def test_host_without_a_debian_archive_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(VMError, match="name no Debian archive with a main component"):
        host_archive(tmp_path, "bookworm")


@pytest.mark.parametrize("suite", ["", "../etc", "sid main", "-x"])
def test_bad_suite_names_are_refused(suite: str) -> None:
    with pytest.raises(ValueError, match="not a Debian suite name"):
        check_suite(suite)


def test_a_softdep_loads_the_generic_algorithm_first(tmp_path: Path) -> None:
    # libcrc32c (xfs's, on 6.1) asks for crc32c by alias; without modprobe in the guest
    # its init fails unless the runner loads a provider first
    libcrc32c = elf64({".text": b"\xc3", ".modinfo": b"license=GPL\0depends=\0softdep=pre: "
                       b"crc32c\0vermagic=6.1.0-test SMP mod_unload \0"})
    mods = {"kernel/lib/libcrc32c.ko": libcrc32c, "kernel/fs/xfs/xfs.ko": module("libcrc32c"),
            "kernel/arch/x86/crypto/crc32c-intel.ko": module(),
            "kernel/crypto/crc32c_generic.ko": module()}
    root = kernel_tree(tmp_path, modules=mods) / "lib/modules/6.1.0-test"
    (root / "modules.alias").write_text(
        "alias crypto-crc32c crc32c_intel\nalias crc32c crc32c_intel\n"
        "alias crc32c crc32c_generic\nalias pci:v*d* virtio_pci\n")
    tree = ModuleTree(root, "6.1.0-test")
    assert [name for name, _ in tree.load_order(["xfs"])] == [
        "crc32c_generic", "libcrc32c", "xfs"]
    assert tree.soft_pre("pre: crypto-crc32c post: libcrc32c") == ["crc32c_intel"]
    assert tree.soft_pre("pre: libcrc32c nothing_like_it") == ["libcrc32c"]
    assert tree.soft_pre("post: crc32c") == []
