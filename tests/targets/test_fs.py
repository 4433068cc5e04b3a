"""``--folio-fs``: resolving specs, bad input, and the ``filesystem`` fixture per target."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_folio.model.ramfs import Ramfs
from pytest_folio.targets import spec as spec_module
from pytest_folio.targets.fs import resolve_fs_target
from pytest_folio.targets.spec import TargetError

# hypothesis's plugin re-imports hypothesis in every in-process run (~2 s); not needed here
QUICK = ("-p", "no:hypothesispytest")


def test_reference_knobs() -> None:
    target = resolve_fs_target("reference:features=full,memory=64M")
    assert target.kind == "reference" and target.per_size
    assert target.options == {"features": "full", "memory": 64 << 20}
    assert target.label == "reference:features=full,memory=64M"
    assert resolve_fs_target("reference").options == {}
    assert resolve_fs_target("reference").label == "reference"
    with target.open(16384) as fs:
        assert isinstance(fs, Ramfs)
        assert (fs.blocksize, fs.memory.size) == (16384, 64 << 20)
        assert "collapse_range" in fs.features


@pytest.mark.parametrize(("spec", "message"), [
    ("reference:features=most", "features='most' is not one of default|full"),
    ("reference:colour=red", "unknown knob 'colour' for the reference file system; "
                             "valid knobs: features=default|full, memory=SIZE"),
    ("reference:memory=lots", "memory='lots': not a size"),
    ("reference:features", "is not of the form name=value"),
    ("/no/such/dir", "/no/such/dir does not exist"),
    ("no_such_module_xyz:factory", "cannot import factory"),
    ("os:sep", "'os:sep' is not callable"),
    ("what-is-this", "unknown target 'what-is-this'"),
])
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(TargetError) as info:
        resolve_fs_target(spec)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_entry_point_names(monkeypatch: pytest.MonkeyPatch) -> None:
    class EntryPoint:
        def load(self) -> object:
            return lambda blocksize, root: Ramfs(blocksize=blocksize)

    class Broken:
        def load(self) -> object:
            raise ImportError("no module named vendorfs")

    monkeypatch.setattr(spec_module, "registered_targets",
                        lambda: {"vendorfs": EntryPoint(), "brokenfs": Broken()})
    target = resolve_fs_target("vendorfs")
    assert target.kind == "factory" and target.per_size
    with target.open(65536) as fs:
        assert isinstance(fs, Ramfs) and fs.blocksize == 65536
    with pytest.raises(TargetError, match="cannot load registered target 'brokenfs'"):
        resolve_fs_target("brokenfs")
    with pytest.raises(TargetError, match=r"\(brokenfs, vendorfs\)"):
        resolve_fs_target("otherfs")


def test_a_file_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(TargetError, match="is not a directory"):
        resolve_fs_target(str(tmp_path / "f"))


def test_directory_target_resolves(tmp_path: Path) -> None:
    target = resolve_fs_target(str(tmp_path))
    assert target.kind == "path" and not target.per_size
    with target.open(None) as fs:
        root = fs.root  # type: ignore[attr-defined]
        assert Path(root).parent == tmp_path
    assert list(tmp_path.iterdir()) == []


def test_bad_spec_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest(*QUICK, "--folio-fs", "reference:features=most")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --folio-fs: features='most' is not one of *"])
    assert "Traceback" not in result.stderr.str()


USES_FILESYSTEM = """
import os

def test_write(filesystem):
    fd = filesystem.open("f", os.O_RDWR | os.O_CREAT)
    assert filesystem.pwrite(fd, b"hello", 0) == 5
    assert filesystem.pread(fd, 10, 0) == b"hello"
    filesystem.close(fd)
    assert "f" in filesystem.listdir("")
"""


def test_filesystem_fixture_on_a_directory(pytester: pytest.Pytester, tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (target / "precious").write_text("keep")
    pytester.makepyfile(USES_FILESYSTEM)
    result = pytester.runpytest(*QUICK, "--folio-fs", str(target), "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_write PASSED*"])
    assert sorted(os.listdir(target)) == ["precious"]


FACTORY = """
import os
from pytest_folio.targets.directory import DirectoryFS

SEEN = []

class Recording(DirectoryFS):
    def __init__(self, root, blocksize):
        super().__init__(root)
        self.blocksize = blocksize

    def umount(self):
        super().umount()
        with open(os.path.join(os.path.dirname(__file__), "umounted.txt"), "a") as f:
            f.write(f"{self.blocksize}\\n")

def factory(blocksize, root):
    assert os.listdir(root) == []
    return Recording(root, blocksize)

def not_a_filesystem(blocksize, root):
    return object()
"""


def test_filesystem_fixture_on_a_factory(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(myfs=FACTORY)
    pytester.makepyfile(USES_FILESYSTEM + """
def test_blocksize(filesystem):
    assert filesystem.blocksize in (4096, 16384)
""")
    pytester.syspathinsert()
    result = pytester.runpytest(*QUICK, "--folio-fs", "myfs:factory",
                                "--folio-block-sizes", "4k,16k", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_write?4K? PASSED*", "*test_write?16K? PASSED*"])
    umounted = (pytester.path / "umounted.txt").read_text().split()
    # the ones the run made first, one at each asked size, to check the factory; then
    # each test's
    assert umounted[:2] == ["4096", "16384"]
    assert sorted(umounted[2:]) == ["16384", "16384", "4096", "4096"]


def test_factory_returning_junk_fails_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(myfs=FACTORY)
    pytester.makepyfile(USES_FILESYSTEM)
    pytester.syspathinsert()
    result = pytester.runpytest(*QUICK, "--folio-fs", "myfs:not_a_filesystem",
                                "--folio-block-sizes", "4k")
    # once, before any test: a usage error
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        "ERROR: --folio-fs: factory myfs:not_a_filesystem returned object, not a "
        "FileSystem (missing: blocksize, open, close, pread, pwrite, ftruncate, fstat, "
        "fsync, unlink, rename, listdir, stat)")
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
