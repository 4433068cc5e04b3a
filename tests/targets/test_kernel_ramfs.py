"""A real kernel ramfs in a temporary directory: mounted, used, always unmounted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.targets.directory import DirectoryFS
from pytest_folio.targets.kernel_ramfs import KernelRamfsUnavailable, mount_kernel_ramfs

# hypothesis's plugin re-imports hypothesis in every in-process run (~2 s); not needed here
QUICK = ("-p", "no:hypothesispytest")


def _mounted(path: str) -> bool:
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == path for line in f)


def test_kernel_ramfs_fixture(kernel_ramfs: DirectoryFS) -> None:
    assert os.statvfs(kernel_ramfs.root).f_blocks == 0  # ramfs reports no capacity
    assert _mounted(kernel_ramfs.root)
    fd = kernel_ramfs.open("f", os.O_RDWR | os.O_CREAT)
    kernel_ramfs.pwrite(fd, b"x" * 5000, 0)
    st = kernel_ramfs.fstat(fd)
    assert (st.st_size, st.st_blksize, st.st_blocks) == (5000, PAGE_SIZE, 16)
    assert "fallocate" not in kernel_ramfs.features


def test_unmounted_even_when_the_test_fails() -> None:
    seen: list[str] = []
    try:
        with pytest.raises(ZeroDivisionError), mount_kernel_ramfs() as fs:
            seen.append(fs.root)
            fs.open("held-open", os.O_RDWR | os.O_CREAT)
            1 / 0  # noqa: B018
    except KernelRamfsUnavailable as exc:
        pytest.skip(str(exc))
    assert not _mounted(seen[0]) and not Path(seen[0]).exists()


def test_blocksize_is_honoured_or_refused_with_the_reason() -> None:
    """Mainline ramfs ignores blocksize= silently; we must not pretend it worked."""
    try:
        with mount_kernel_ramfs(16384) as fs:
            assert fs.blocksize == 16384
            root = fs.root
    except KernelRamfsUnavailable as exc:
        assert "needs root" in str(exc) or "no blocksize mount option" in str(exc) \
            or "failed" in str(exc)
        return
    assert not _mounted(root)


def test_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(KernelRamfsUnavailable, match="needs root"), mount_kernel_ramfs():
        pass


def test_fixture_skips_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
import os
import pytest

@pytest.fixture(autouse=True)
def not_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
""")
    pytester.makepyfile("def test_k(kernel_ramfs): pass")
    result = pytester.runpytest(*QUICK, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*mounting a kernel ramfs needs root*"])
