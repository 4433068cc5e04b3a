"""A user's factory that the plugin cannot use is one usage line naming it, once, before
any test: wrong keywords (saying which the plugin passes), missing members, wrong types,
bad geometry, a read() that does not answer bytes, an exception from the factory (even
SystemExit), a member that raises when read. ``python -m pytest_folio check`` runs the
same checks and says the same line."""

from __future__ import annotations

import pytest

from pytest_folio.cli import main

QUICK = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")

FACTORIES = """
from tests.helpers.mtd_devices import RamMTD

def positional(bs, path):
    return None

def _ram(size, erasesize, attrs):
    dev = RamMTD(size=size, erasesize=erasesize)
    dev.__dict__.update(attrs)
    return dev

def negative_size(size, erasesize, **_):
    return _ram(size, erasesize, {"size": -1})

def text_erasesize(size, erasesize, **_):
    return _ram(size, erasesize, {"erasesize": "128K"})

def eraseblocks_do_not_divide(size, erasesize, **_):
    return _ram(size, erasesize, {"erasesize": 3 * 4096})

class ListRead(RamMTD):
    def read(self, offset, length):
        return list(super().read(offset, length))

def list_read(size, erasesize, **_):
    return ListRead(size=size, erasesize=erasesize)

class StrRead(RamMTD):
    def read(self, offset, length):
        return super().read(offset, length).decode("latin-1")

def str_read(size, erasesize, **_):
    return StrRead(size=size, erasesize=erasesize)

def nothing(**_):
    return object()

def exits(**_):
    raise SystemExit(3)

def raising_blocksize(blocksize, root):
    from tests.helpers.fsx_memfs import MemFS

    class Raising(MemFS):
        @property
        def blocksize(self):
            raise RuntimeError("no block size yet")

        @blocksize.setter
        def blocksize(self, value):
            pass

    return Raising(blocksize)

def raises(size, erasesize, **_):
    raise TypeError("cannot make one")

def text_blocksize(blocksize, root):
    from tests.helpers.fsx_memfs import MemFS
    fs = MemFS(blocksize)
    fs.blocksize = str(blocksize)
    return fs
"""

USES_DEVICE = """
def test_a(mtd_device):
    pass

def test_b(mtd_device):
    pass
"""

USES_FS = """
def test_a(filesystem):
    pass
"""

CASES = [
    ("--folio-mtd", "positional",
     "factory facs:positional needs bs, path, which the plugin does not pass: it calls "
     "the factory with the keywords size, erasesize, folio_order, readonly (those it "
     "takes, or all of them to **kwargs)"),
    ("--folio-fs", "positional",
     "factory facs:positional needs bs, path, which the plugin does not pass: it calls "
     "the factory with the keywords blocksize, root, cache_bytes (those it takes, or all "
     "of them to **kwargs)"),
    ("--folio-mtd", "negative_size",
     "factory facs:negative_size returned a device of size -1, erasesize 131072, "
     "writesize 1, oobsize 0: size, erasesize and writesize must be positive, oobsize "
     "not negative"),
    ("--folio-mtd", "text_erasesize",
     "factory facs:text_erasesize returned a device whose erasesize is '128K', not an int"),
    ("--folio-mtd", "eraseblocks_do_not_divide",
     "factory facs:eraseblocks_do_not_divide returned a device of size 16777216 in "
     "eraseblocks of 12288 and pages of 1: the eraseblocks must divide the size, the "
     "pages the eraseblocks"),
    ("--folio-mtd", "list_read",
     "factory facs:list_read returned a device whose read(0, 16) returned list, not "
     "bytes-like (bytes, bytearray, memoryview)"),
    ("--folio-mtd", "str_read",
     "factory facs:str_read returned a device whose read(0, 16) returned str, not "
     "bytes-like (bytes, bytearray, memoryview)"),
    ("--folio-mtd", "exits",
     "factory facs:exits(size=16777216, erasesize=131072, folio_order=0) raised "
     "SystemExit: 3"),
    ("--folio-fs", "raising_blocksize",
     "factory facs:raising_blocksize returned Raising, whose members raise when read: "
     "RuntimeError: no block size yet"),
    ("--folio-mtd", "nothing",
     "factory facs:nothing returned object, not an MTD device (missing: name, type, flags, "
     "size, erasesize, writesize, oobsize, read, write, erase, sync, close)"),
    ("--folio-mtd", "raises",
     "factory facs:raises(size=16777216, erasesize=131072, folio_order=0) raised "
     "TypeError: cannot make one"),
    ("--folio-fs", "text_blocksize",
     "factory facs:text_blocksize returned a file system whose blocksize is '4096', not a "
     "positive int"),
]


@pytest.mark.parametrize(("option", "factory", "message"), CASES,
                         ids=[f"{o[8:]}-{f}" for o, f, _ in CASES])
def test_a_factory_problem_is_one_usage_line_before_any_test(
        pytester: pytest.Pytester, option: str, factory: str, message: str) -> None:
    pytester.makepyfile(facs=FACTORIES)
    pytester.makepyfile(USES_DEVICE if option == "--folio-mtd" else USES_FS)
    pytester.syspathinsert()
    result = pytester.runpytest(*QUICK, f"{option}=facs:{factory}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.errlines[0] == f"ERROR: {option}: {message}"
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "During handling" not in output


@pytest.mark.parametrize(("option", "factory", "message"), CASES,
                         ids=[f"{o[8:]}-{f}" for o, f, _ in CASES])
def test_check_says_the_same_line_as_the_plugin(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], option: str,
        factory: str, message: str) -> None:
    pytester.makepyfile(facs=FACTORIES)
    pytester.syspathinsert()
    assert main(["check", f"--{option[8:]}", f"facs:{factory}"]) == 2
    out, err = capsys.readouterr()
    assert err == f"python -m pytest_folio check: error: {option}: {message}\n"
    assert out == ""
