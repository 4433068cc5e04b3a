"""The booted kernel's source and headers: which version, which packages, which compiler."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_folio.vm import VMError
from pytest_folio.vm.source import (
    KernelSource,
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


def test_the_flavour_makefile_is_pointed_into_the_cache(tmp_path: Path) -> None:
    flavour = tmp_path / "pkg/usr/src/linux-headers-6.1.0-57-amd64"
    flavour.mkdir(parents=True)
    (flavour / "Makefile").write_text("include /usr/src/linux-headers-6.1.0-57-common/Makefile\n")
    entry = tmp_path / "entry"
    _relocate_headers(tmp_path, entry)
    assert (flavour / "Makefile").read_text() == \
        f"include {entry}/pkg/usr/src/linux-headers-6.1.0-57-common/Makefile\n"
