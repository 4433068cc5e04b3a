"""The booted kernel's source and headers: which version, which packages, which compiler."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_folio.vm import VMError
from pytest_folio.vm.apt import Archive, SuiteApt
from pytest_folio.vm.kernel import Kernel
from pytest_folio.vm.source import (
    KernelSource,
    SourceCache,
    _relocate_headers,
    check_compiler,
    debian_version,
    kernel_compiler,
    source_package,
)
from tests.helpers.vm import bzimage


def test_a_debian_kernel_names_its_package_version() -> None:
    image = bzimage(b"", "6.1.0-57-amd64 (debian-kernel@lists.debian.org) #1 SMP "
                         "PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-11-26)")
    assert debian_version(image) == "6.1.192-3"


def test_a_kernel_built_elsewhere_names_none() -> None:
    assert debian_version(bzimage(b"", "6.1.0-test")) is None
    assert debian_version(b"\x7fELF" + b"\0" * 100) is None


def test_the_source_package_is_named_by_major_and_minor() -> None:
    assert source_package("6.1.192-3") == "linux-source-6.1"
    assert source_package("7.2.13-1") == "linux-source-7.2"


def test_the_compiler_comes_from_the_headers_kernelvariables(tmp_path: Path) -> None:
    (tmp_path / ".kernelvariables").write_text(
        "CCACHE = ccache\nCC = $(if $(DEBIAN_KERNEL_USE_CCACHE),$(CCACHE)) "
        "$(CROSS_COMPILE)gcc-12\n")
    assert kernel_compiler(tmp_path) == "gcc-12"


def test_else_from_the_config_cc_version_text(tmp_path: Path) -> None:
    (tmp_path / ".config").write_text('CONFIG_CC_VERSION_TEXT="gcc-14 (Debian 14.2.0-19) '
                                      '14.2.0"\n')
    assert kernel_compiler(tmp_path) == "gcc-14"


def test_a_missing_compiler_is_one_line_pointing_at_build_kernel(tmp_path: Path) -> None:
    src = KernelSource("7.2.13+deb14-amd64", "7.2.13-1", tmp_path, tmp_path,
                       tmp_path / "x.tar.xz", "gcc-99")
    with pytest.raises(VMError, match=r"kernel 7.2.13\+deb14-amd64 was built with gcc-99, "
                                      r"which this host does not have"):
        check_compiler(src)


def test_a_7x_flavour_makefile_has_its_output_directory_pointed_there_too(
        tmp_path: Path) -> None:
    flavour = tmp_path / "pkg/usr/src/linux-headers-7.2.13+deb14-amd64"
    flavour.mkdir(parents=True)
    (flavour / "Makefile").write_text(
        "KBUILD_OUTPUT=/usr/src/linux-headers-7.2.13+deb14-amd64\n"
        "include /usr/src/linux-headers-7.2.13+deb14-common/Makefile\n")
    entry = tmp_path / "entry"
    _relocate_headers(tmp_path, entry)
    assert (flavour / "Makefile").read_text() == (
        f"KBUILD_OUTPUT={entry}/pkg/usr/src/linux-headers-7.2.13+deb14-amd64\n"
        f"include {entry}/pkg/usr/src/linux-headers-7.2.13+deb14-common/Makefile\n")


def test_the_flavour_makefile_is_pointed_into_the_cache(tmp_path: Path) -> None:
    flavour = tmp_path / "pkg/usr/src/linux-headers-6.1.0-57-amd64"
    flavour.mkdir(parents=True)
    (flavour / "Makefile").write_text("include /usr/src/linux-headers-6.1.0-57-common/Makefile\n")
    entry = tmp_path / "entry"
    _relocate_headers(tmp_path, entry)
    assert (flavour / "Makefile").read_text() == \
        f"include {entry}/pkg/usr/src/linux-headers-6.1.0-57-common/Makefile\n"


# --- fetched through the suite's private apt configuration ------------------------------

RELEASE = "6.1.0-57-amd64"
VERSION = "6.1.192-3"


class FakeArchive:
    """apt-get/apt-cache/dpkg-deb for a kernel's source and headers, recording every
    command; answers only commands that carry a private apt configuration."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []
        self.downloads: list[str] = []

    def __call__(self, cmd: list[str], cwd: Path | None = None
                 ) -> subprocess.CompletedProcess[str]:
        self.commands.append(cmd)
        args = [c for c in cmd if not c.startswith("-o")]
        if args[0] in ("apt-get", "apt-cache"):
            assert any(c.startswith("-oDir::Etc::sourcelist=") for c in cmd), cmd
        out = ""
        if args[:2] == ["apt-get", "update"]:
            state = next(c for c in cmd if c.startswith("-oDir::State="))
            (Path(state.split("=", 1)[1]) / "lists" / "x_Packages").write_text("x")
        elif args[:2] == ["apt-cache", "depends"]:
            assert args[2] == f"linux-headers-{RELEASE}={VERSION}"
            out = ("  Depends: linux-headers-6.1.0-57-common\n"
                   "  Depends: linux-kbuild-6.1\n  Depends: libc6\n")
        elif args[:2] == ["apt-get", "download"]:
            self.downloads.append(args[2])
            assert cwd is not None
            (cwd / f"{args[2].replace('=', '_')}_amd64.deb").write_text(args[2])
        elif args[:2] == ["dpkg-deb", "-x"]:
            name = Path(args[2]).read_text().split("=")[0]
            src = Path(args[3]) / "usr/src"
            src.mkdir(parents=True, exist_ok=True)
            if name == f"linux-headers-{RELEASE}":
                (src / name).mkdir()
                (src / name / "Makefile").write_text("include /usr/src/x/Makefile\n")
            elif name == "linux-source-6.1":
                (src / "linux-source-6.1.tar.xz").write_text("")
        else:
            raise AssertionError(f"unexpected command {cmd}")
        return subprocess.CompletedProcess(cmd, 0, out, "")


def test_the_source_and_headers_come_through_the_suites_private_apt(tmp_path: Path) -> None:
    image = tmp_path / "vmlinuz"
    image.write_bytes(bzimage(b"", f"{RELEASE} (debian-kernel@lists.debian.org) #1 SMP "
                                   f"PREEMPT_DYNAMIC Debian {VERSION} (2026-11-26)"))
    apt = FakeArchive()
    source = SourceCache(tmp_path).fetch(Kernel(image, RELEASE, None), lambda m: None,
                                         "bookworm", run=apt,
                                         archive=Archive("http://archive.example/debian"))
    assert sorted(apt.downloads) == sorted(
        f"{p}={VERSION}" for p in ("linux-source-6.1", f"linux-headers-{RELEASE}",
                                   "linux-headers-6.1.0-57-common", "linux-kbuild-6.1"))
    assert source.tarball is not None and source.tarball.name == "linux-source-6.1.tar.xz"
    assert sorted(p.name for p in (tmp_path / "debs/bookworm").iterdir())[0].endswith(".deb")
    assert (tmp_path / "apt/bookworm/sources.list").read_text() == \
        "deb http://archive.example/debian bookworm main\n"


def test_a_cached_source_asks_no_apt_at_all(tmp_path: Path) -> None:
    image = tmp_path / "vmlinuz"
    image.write_bytes(bzimage(b"", f"{RELEASE} (x) #1 SMP Debian {VERSION} (2026-11-26)"))
    kernel, archive = Kernel(image, RELEASE, None), Archive("http://archive.example/debian")
    SourceCache(tmp_path).fetch(kernel, lambda m: None, "bookworm", FakeArchive(), archive)
    again = FakeArchive()
    SourceCache(tmp_path).fetch(kernel, lambda m: None, "bookworm", again, archive)
    assert again.commands == []


def test_the_hosts_release_reads_its_updates_and_security_suites_too(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /k/debian.gpg\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\nSigned-By: /k/debian.gpg\n")
    assert SuiteApt(tmp_path, "bookworm").sources(tmp_path) == [
        (Archive("http://mirror.example/debian", "/k/debian.gpg"), "bookworm"),
        (Archive("http://mirror.example/debian", "/k/debian.gpg"), "bookworm-updates"),
        (Archive("http://mirror.example/debian-security", "/k/debian.gpg"),
         "bookworm-security")]
