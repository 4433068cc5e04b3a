"""The one declaration of the optional calls (``CAPABILITIES``) and everything made from
it: the docs table, what a target offers, its features, the header line, ``python -m
pytest_folio check SPEC`` and its signature check."""

from __future__ import annotations

import ast
import functools
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_folio.cli import main
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.targets import protocols
from pytest_folio.targets.answers import FS_RULES, MTD_RULES, answering
from pytest_folio.targets.capabilities import (
    CAPABILITIES,
    FS_FEATURES,
    KINDS,
    features_of,
    lacking_line,
    markdown_table,
    offered,
    signature_problem,
    table,
    takes_readonly,
    working_features,
)
from pytest_folio.terminal.textwidth import WIDTH
from tests.helpers import CHECKOUT, subprocess_env
from tests.helpers.mtd_devices import FolioCacheMTD, RamMTD
from tests.helpers.usual_python import PosixChoicesFS, UsualFS

# Protocols that are not optional calls: the cores, the static type of code that may
# make any call, the type of an attribute of one (HasStats.stats), and the narrowing
# ``features`` attribute.
NOT_OPTIONAL = {"MTDDevice", "FileSystem", "AnyFileSystem", "Snapshot", "HasFeatures"}


def test_the_docs_table_is_the_declaration() -> None:
    docs = (CHECKOUT / "docs" / "architecture.md").read_text()
    start = docs.index("| optional call | protocol | kind | unlocks | without it |")
    end = docs.index("\n\n", start)
    assert docs[start:end] == markdown_table(), (
        "docs/architecture.md's table of optional calls differs from "
        "pytest_folio.targets.capabilities.CAPABILITIES: paste markdown_table()'s output")


def test_every_declaration_is_complete_and_names_a_protocol() -> None:
    seen = set()
    for capability in CAPABILITIES:
        assert capability.kind in KINDS and capability.unlocks and capability.without
        assert ";" not in capability.without      # the header splits lacking_line there
        assert (capability.kind, capability.name) not in seen
        seen.add((capability.kind, capability.name))
        if capability.protocol is None:
            assert capability.kind == "mtd" and capability.name == "readonly=True"
            continue
        assert getattr(protocols, capability.protocol.__name__) is capability.protocol
        assert getattr(capability.protocol, "_is_runtime_protocol", False)
        assert capability.kind == "fs" or not capability.features
    narrowable = {"mmap", "fallocate", "punch_hole", "zero_range", "collapse_range",
                  "insert_range", "copy_range"}
    assert narrowable == FS_FEATURES


def _protocol_names() -> set[str]:
    return {name for name, value in vars(protocols).items()
            if isinstance(value, type) and getattr(value, "_is_protocol", False)
            and value.__module__ == protocols.__name__}


def _asked_for(path: Path) -> set[str]:
    """The protocols a module asks an object for: the class given to isinstance,
    supports or cast, or named in an annotation."""
    asked: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("isinstance", "supports", "cast") and len(node.args) == 2:
            target = node.args[0] if node.func.id == "cast" else node.args[1]
            asked.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return asked


def test_every_capability_asked_for_is_declared() -> None:
    declared = {c.protocol.__name__ for c in CAPABILITIES if c.protocol is not None}
    names = _protocol_names()
    assert names - NOT_OPTIONAL == declared, "a protocol is neither declared nor a core"
    sources = [*(CHECKOUT / "pytest_folio").rglob("*.py"),
               *(CHECKOUT / "suites").rglob("*.py")]
    undeclared = {f"{path.relative_to(CHECKOUT)}: {name}" for path in sources
                  for name in _asked_for(path) & names
                  if name not in declared | NOT_OPTIONAL}
    assert not undeclared
    assert any("DropDeviceCaches" in _asked_for(p) for p in sources)   # the scan finds


def _features_asked_for(path: Path) -> set[str]:
    """The feature names a suite asks for: ``need(fs, "mmap")`` and ``"mmap" in
    features``."""
    asked: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "need":
            asked.update(str(a.value) for a in node.args[1:] if isinstance(a, ast.Constant))
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In) and \
                isinstance(node.left, ast.Constant) and \
                isinstance(node.comparators[0], ast.Name) and \
                node.comparators[0].id == "features":
            asked.add(str(node.left.value))
    return asked


def test_every_feature_a_suite_asks_for_is_declared() -> None:
    declared = {f for c in CAPABILITIES for f in c.features}
    asked = {name for path in (CHECKOUT / "suites").rglob("*.py")
             for name in _features_asked_for(path)}
    assert {"mmap", "fallocate", "punch_hole", "copy_range"} <= asked   # the scan finds
    assert asked <= declared, asked - declared


def test_offered_tells_the_devices_apart() -> None:
    ram = {c.name: has for c, has in offered(RamMTD(), "mtd", RamMTD)}
    cache = {c.name: has for c, has in offered(FolioCacheMTD(), "mtd", FolioCacheMTD)}
    assert not ram["reopen()"] and cache["reopen()"]
    assert not ram["drop_caches()"] and cache["drop_caches()"]
    assert takes_readonly(FolioCacheMTD) and not takes_readonly(lambda size: None)
    assert lacking_line([(CAPABILITIES[0], True)]) == "offers every optional call"


def test_features_come_from_the_declaration_and_narrow_only_the_narrowable() -> None:
    fs = Ramfs(blocksize=4096, memory=8 << 20)
    try:
        assert features_of(fs) == {"mmap", "copy_range", "directories"}
        fs.features = frozenset()
        assert features_of(fs) == {"directories"}       # a call, not a narrowable feature
    finally:
        fs.umount()
        fs.memory.release()


def test_working_features_drop_the_modes_a_target_answers_eopnotsupp_for() -> None:
    """A target without ``features`` whose fallocate refuses some modes with EOPNOTSUPP,
    as tmpfs does, is not asked for them; nothing of the probe stays behind."""
    fs = PosixChoicesFS(4096)
    assert {"zero_range", "collapse_range", "insert_range"} <= features_of(fs)
    assert working_features(fs) == features_of(fs) - {"zero_range", "collapse_range",
                                                      "insert_range"}
    assert list(fs.listdir("")) == []
    listed = UsualFS(4096)                 # lists its features: taken at its word
    assert working_features(listed) == features_of(listed)


class _Core:
    """An MTD device's core calls, doing nothing."""

    name = "core"
    type = protocols.MTD_RAM
    flags = protocols.MTD_CAP_RAM
    size = 1 << 20
    erasesize = 64 << 10
    writesize = 1
    oobsize = 0

    def read(self, offset: int, length: int) -> bytes:
        return bytes(length)

    def write(self, offset: int, data: bytes) -> None: ...
    def erase(self, offset: int, length: int) -> None: ...
    def sync(self) -> None: ...
    def close(self) -> None: ...


def _with(**calls: Any) -> object:
    return type("Device", (_Core,), calls)()


class _ReadOOB:
    def __call__(self, offset: int, length: int) -> bytes:
        return bytes(length)


def _free_read_oob(dev: object, offset: int, length: int) -> bytes:
    return bytes(length)


class _Other:
    def read_oob(self, at: int, n: int, /, extra: int = 0) -> bytes:
        return bytes(n)


USUAL: dict[str, dict[str, Any]] = {
    "defaults": {"read_into": lambda self, offset, buf, chunk=0: None,
                 "write_from": lambda self, offset, data, chunk=4096: None},
    "an extra optional parameter": {"read_oob": lambda self, o, n, flags=0: b""},
    "*args": {"read_oob": lambda self, *args: b""},
    "*args and **kwargs": {"block_isbad": lambda self, *a, **k: False},
    "a keyword-only extra": {"read_oob": lambda self, o, n, *, raw=False: b""},
    "other names, positional-only": {"read_oob": lambda self, at, n, /: b""},
    "a staticmethod": {"block_isbad": staticmethod(lambda offset: False)},
    "a callable object": {"read_oob": _ReadOOB()},
    "a partial": {"__init__": lambda self: setattr(
        self, "read_oob", functools.partial(_free_read_oob, self))},
    "another object's bound method": {"read_oob": property(lambda self: _Other().read_oob)},
    "a builtin": {"reopen": staticmethod(sys.getrecursionlimit)},
}


@pytest.mark.parametrize("calls", USUAL.values(), ids=USUAL.keys())
def test_the_signature_check_takes_what_python_allows(calls: dict[str, Any]) -> None:
    dev = _with(**calls)
    assert signature_problem(dev, "mtd") is None
    assert signature_problem(answering(dev, MTD_RULES), "mtd") is None


def _annotated_read_oob(self: object, offset: int, length: int = 0, extra: int = 1, *,
                        more: int) -> bytes:
    return b""


WRONG: dict[str, tuple[dict[str, Any], str]] = {
    "one parameter short": ({"read_oob": lambda self, offset: b""},
                            "read_oob(offset) cannot be called as the protocol's "
                            "read_oob(offset, length) with 2 arguments"),
    "one required too many": ({"block_isbad": lambda self, offset, plane: False},
                              "block_isbad(offset, plane) cannot be called as the "
                              "protocol's block_isbad(offset) with 1 argument"),
    "a required keyword-only": ({"read_oob": lambda self, offset, *, length: b""},
                                "read_oob(offset, *, length) cannot be called as"),
    "no room for an optional one": ({"read_into": lambda self, offset, buf: None,
                                     "write_from": lambda self, offset, data, chunk=0: None},
                                    "read_into(offset, buf) cannot be called as the "
                                    "protocol's read_into(offset, buf, chunk=...) with 3"),
    "the file system's drop_caches on a device": (
        {"drop_caches": lambda self, path: None},
        "drop_caches(path) cannot be called as the protocol's drop_caches() with 0"),
    "a core call": ({"erase": lambda self, offset: None}, "erase(offset) cannot be"),
    "annotated, shown without": ({"read_oob": _annotated_read_oob},
                                 "whose read_oob(offset, length=0, extra=1, *, more) cannot "
                                 "be called as the protocol's read_oob(offset, length) with 2 "
                                 "arguments (missing a required argument: 'more')"),
    "not a call": ({"block_isbad": 5}, "whose block_isbad is int, not a call"),
}


@pytest.mark.parametrize(("calls", "said"), WRONG.values(), ids=WRONG.keys())
def test_the_signature_check_names_the_call_and_its_signature(calls: dict[str, Any],
                                                              said: str) -> None:
    for dev in (_with(**calls), answering(_with(**calls), MTD_RULES)):
        problem = signature_problem(dev, "mtd")
        assert problem is not None and "\n" not in problem
        assert problem.startswith("returned Device, whose ") and said in problem


def test_the_file_system_base_defaults_are_not_checked_but_the_calls_are() -> None:
    class Short(Ramfs):
        def mkdir(self, path: str) -> None:  # type: ignore[override]
            super().mkdir(path)

    fs = Short(blocksize=4096, memory=8 << 20)
    try:
        problem = signature_problem(answering(fs, FS_RULES), "fs")
        assert problem is not None and "protocol's mkdir(path, mode=...)" in problem
    finally:
        fs.umount()
        fs.memory.release()


def test_check_refuses_a_wrong_signature_in_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "short_oob.py").write_text(
        "from tests.helpers.mtd_devices import RamMTD\n\n"
        "class ShortOOB(RamMTD):\n"
        "    def read_oob(self, offset):\n"
        "        return b''\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["check", "short_oob:ShortOOB", "--size=1M", "--erasesize=64K"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m pytest_folio check: error: --folio-mtd: factory "
                          "short_oob:ShortOOB returned ShortOOB, whose read_oob(offset) "
                          "cannot be called as the protocol's read_oob(offset, length)")
    assert err.count("\n") == 1


def test_check_prints_what_a_factorys_device_offers(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert main(["check", "tests.helpers.mtd_devices:FolioCacheMTD", "--size=1M",
                 "--erasesize=64K"]) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(out) if line.startswith("offered  optional call"))
    assert " ".join(line.strip() for line in out[:head]) == (
        "--folio-mtd=tests.helpers.mtd_devices:FolioCacheMTD: an MTD device "
        "(FolioCacheMTD 'foliocache'): size 1M, erasesize 64K, writesize 1, oobsize 0")
    rows = {line.split()[1]: line.split()[0] for line in out[head + 1:]
            if not line[0].isspace()}
    assert rows["reopen()"] == "yes" and rows["stats.snapshot()"] == "no"
    assert all(len(line) <= WIDTH for line in out[1:])


def test_the_table_fits_the_terminal_and_says_what_is_missing() -> None:
    rows = offered(object(), "fs")
    lines = table(rows).splitlines()
    assert all(len(line) <= WIDTH for line in lines)
    assert sum(not line.startswith(" ") for line in lines) == len(rows) + 1
    assert "`" not in table(rows) and "(without it: the power-cut suites skip)" in \
        " ".join(line.strip() for line in lines)


def test_check_finds_the_kind_and_refuses_a_bad_target_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "tests.helpers.fsx_broken:PassThrough.factory"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--folio-fs=tests.helpers.fsx_broken:PassThrough.factory: a file "
                          "system")
    assert "\nyes      mmap_read(fd, offset, length), mmap_write(fd, offset, data)\n" in out
    assert "\nno       drop_caches(path)\n" in out
    assert main(["check", "--mtd", "tests.helpers.fsx_broken:PassThrough.factory"]) == 2
    err = capsys.readouterr().err
    assert err == ("python -m pytest_folio check: error: --folio-mtd: factory "
                   "tests.helpers.fsx_broken:PassThrough.factory needs blocksize, which the "
                   "plugin does not pass: it calls the factory with the keywords size, "
                   "erasesize, folio_order, readonly (those it takes, or all of them to "
                   "**kwargs)\n")


def test_check_takes_about_a_second_of_cpu() -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "pytest_folio", "check", "reference"],
                          cwd=CHECKOUT, env=subprocess_env(), capture_output=True,
                          text=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stderr
    assert "--folio-mtd=reference" in proc.stdout and "--folio-fs=reference" in proc.stdout
    assert all(len(line) <= WIDTH for line in proc.stdout.splitlines())
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 3, cpu      # CPU time: wall-clock time depends on the machine's load


def test_the_header_says_what_a_factorys_target_lacks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(mtd_device):\n    pass\n")
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                "--folio-mtd=tests.helpers.mtd_devices:RamMTD",
                                "--folio-orders=0")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "folio: mtd tests.helpers.mtd_devices:RamMTD lacks:",
        "    reopen() (fsx for flash never reopens the device)",
        "    drop_caches() (fsx for flash never drops, and the race suite skips on a*",
        "    power_cut() (*"])
    header = [line for line in result.outlines if line.startswith(("folio:", "    "))]
    assert all(len(line) <= WIDTH for line in header)
    assert not any("`" in line for line in header)


def test_a_wrong_signature_stops_the_run_before_any_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        short_reopen="from tests.helpers.mtd_devices import RamMTD\n\n"
                     "class Short(RamMTD):\n"
                     "    def reopen(self, how):\n"
                     "        pass\n",
        test_x="def test_x(mtd_device):\n    pass\n")
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                "--folio-mtd=short_reopen:Short", "--folio-orders=0",
                                "-o", "pythonpath=.")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*factory short_reopen:Short returned Short, whose "
                                 "reopen(how) cannot be called as the protocol's reopen() "
                                 "with 0 arguments (missing a required argument: 'how')"])


def test_drop_caches_has_one_signature_per_kind() -> None:
    names = {(c.kind, c.name) for c in CAPABILITIES}
    assert {("fs", "drop_caches(path)"), ("mtd", "drop_caches()")} <= names

    class DevicesDrop(Ramfs):
        def drop_caches(self) -> None: ...

    fs = DevicesDrop(blocksize=4096, memory=8 << 20)
    try:
        problem = signature_problem(fs, "fs")
        assert problem is not None and "protocol's drop_caches(path) with 1" in problem
    finally:
        fs.umount()
        fs.memory.release()


def test_fsx_probes_every_narrowable_feature_as_an_operation() -> None:
    from pytest_folio.fsx.log import OP_NAMES
    from pytest_folio.fsx.probe import OPTIONAL

    assert {OP_NAMES[op] for op in OPTIONAL} | {"mmap"} == FS_FEATURES
