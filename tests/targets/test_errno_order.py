"""Every call of the FileSystem protocol, with every single fault and every pair of
faults at once, gives the same errno (or the same success) on a real tmpfs, through raw
system calls (the directory target), and on the reference ramfs.

Which fault wins when two are present is the kernel's order of checks (docs/fs.md,
"The order of checks"): pread64 refuses a negative offset before it looks at the
descriptor, file_mmap_ok runs before mmap's access checks, generic_copy_file_checks
before rw_verify_area... A case is a call, its arguments with no fault (it succeeds),
and the faults applied to them; two faults are only paired when they change different
arguments. Each case runs on a fresh copy of the same small tree on both sides.

Not here: EXDEV (rename and copy_file_range across file systems: the reference is one
file system), RLIMIT_FSIZE (the reference has no resource limits; the size limit faulted
is the file system's, MAX_LFS_FILESIZE), negative lengths of pread/pwrite/
copy_file_range (size_t: no value the kernel can be given, and Python's calls refuse
them).
"""

from __future__ import annotations

import errno
import os
import stat as statmod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.model.vfs import MAX_LFS_FILESIZE
from pytest_folio.targets.directory import directory_filesystem
from pytest_folio.targets.kernel_ramfs import KernelRamfsUnavailable, temporary_mount
from pytest_folio.targets.protocols import (
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    AnyFileSystem,
    protocol_members,
)

DATA = bytes(range(1, 251)) * 20        # 5000 bytes, no zero byte
LONG = "n" * 256                        # NAME_MAX + 1
BAD_FD = 999                            # never opened on either side
LAST_PAGE = MAX_LFS_FILESIZE + 1 - PAGE_SIZE    # the last page below 2**63
FALLOC_FL_UNKNOWN = 0x100               # a mode bit vfs_fallocate does not know

# the descriptors every case finds open: role -> (path, flags)
ROLES = {
    "rw": ("f", os.O_RDWR),
    "ro": ("f", os.O_RDONLY),
    "wo": ("f", os.O_WRONLY),
    "app": ("h", os.O_RDWR | os.O_APPEND),
    "h": ("h", os.O_RDWR),
    "dir": ("d", os.O_RDONLY),
    "maxapp": ("max", os.O_WRONLY | os.O_APPEND),
}


def build_tree(fs: AnyFileSystem) -> dict[str, int]:
    """f (5000 bytes), h (5000 bytes), max (MAX_LFS_FILESIZE bytes, a hole), d/ holding
    d/g, e/ empty; every role of ROLES open. The descriptors by role."""
    fs.mkdir("d")
    fs.mkdir("e")
    for name in ("f", "h", "d/g", "max"):
        fd = fs.open(name, os.O_RDWR | os.O_CREAT)
        if name == "max":
            fs.ftruncate(fd, MAX_LFS_FILESIZE)
        else:
            fs.pwrite(fd, DATA, 0)
        fs.close(fd)
    fds = {role: fs.open(path, flags) for role, (path, flags) in ROLES.items()}
    fds["bad"] = BAD_FD
    return fds


@dataclass(frozen=True)
class Call:
    """One call of the protocol: its arguments with no fault, the faults (name ->
    (argument, value)) and how to make it from resolved arguments."""

    name: str
    base: dict[str, Any]
    faults: dict[str, tuple[str, Any]]
    run: Callable[[AnyFileSystem, dict[str, Any]], Any]
    fd_args: tuple[str, ...] = ()

    def cases(self) -> Iterator[tuple[str, ...]]:
        yield ()
        yield from ((f,) for f in self.faults)
        for a, b in combinations(self.faults, 2):
            if self.faults[a][0] != self.faults[b][0]:
                yield (a, b)


def path(args: dict[str, Any], prefix: str = "") -> str:
    """A path from its parts: parent directory, name, trailing slash."""
    parent = args.get(prefix + "parent", "")
    return (parent + "/" if parent else "") + args[prefix + "name"] + args.get(
        prefix + "slash", "")


def path_faults(prefix: str = "", *, names: dict[str, str]) -> dict[str, tuple[str, Any]]:
    """The faults of a path: its parent missing, a file, too long; its own name's
    (``names``: fault -> name); a trailing slash."""
    faults: dict[str, tuple[str, Any]] = {
        prefix + "parent-missing": (prefix + "parent", "nope"),
        prefix + "parent-file": (prefix + "parent", "f"),
        prefix + "parent-toolong": (prefix + "parent", LONG),
        prefix + "slash": (prefix + "slash", "/"),
    }
    faults.update({prefix + fault: (prefix + "name", name) for fault, name in names.items()})
    return faults


FD_FAULTS_READ = {"fd-bad": ("fd", "bad"), "fd-writeonly": ("fd", "wo"),
                  "fd-dir": ("fd", "dir")}
FD_FAULTS_WRITE = {"fd-bad": ("fd", "bad"), "fd-readonly": ("fd", "ro"),
                   "fd-dir": ("fd", "dir")}
NAME_FAULTS = {"name-missing": "nope", "name-toolong": LONG}

CALLS = [
    Call("open", {"name": "f", "acc": os.O_RDONLY, "creat": 0, "excl": 0, "directory": 0,
                  "trunc": 0},
         {**path_faults(names={**NAME_FAULTS, "name-dir": "d", "name-dot": "."}),
          "write-access": ("acc", os.O_RDWR),
          "creat": ("creat", os.O_CREAT),
          "creat-excl": ("excl", os.O_CREAT | os.O_EXCL),
          "o-directory": ("directory", os.O_DIRECTORY),
          "o-trunc": ("trunc", os.O_TRUNC)},
         lambda fs, a: fs.open(path(a), a["acc"] | a["creat"] | a["excl"] | a["directory"]
                               | a["trunc"])),
    Call("close", {"fd": "rw"}, {"fd-bad": ("fd", "bad")},
         lambda fs, a: fs.close(a["fd"]), ("fd",)),
    Call("pread", {"fd": "rw", "n": 100, "offset": 0},
         {**FD_FAULTS_READ, "zero-length": ("n", 0), "offset-negative": ("offset", -1),
          "offset-overflow": ("offset", MAX_LFS_FILESIZE - 50),
          "offset-past-eof": ("offset", 1 << 20)},
         lambda fs, a: fs.pread(a["fd"], a["n"], a["offset"]), ("fd",)),
    Call("pwrite", {"fd": "rw", "data": b"x" * 100, "offset": 0},
         {**FD_FAULTS_WRITE, "fd-size-limit": ("fd", "maxapp"), "fd-append": ("fd", "app"),
          "zero-length": ("data", b""),
          "offset-negative": ("offset", -1),
          "offset-overflow": ("offset", MAX_LFS_FILESIZE - 50)},
         lambda fs, a: fs.pwrite(a["fd"], a["data"], a["offset"]), ("fd",)),
    Call("ftruncate", {"fd": "rw", "length": 100},
         {**FD_FAULTS_WRITE, "fd-append": ("fd", "app"), "length-negative": ("length", -1),
          "length-max": ("length", MAX_LFS_FILESIZE)},
         lambda fs, a: fs.ftruncate(a["fd"], a["length"]), ("fd",)),
    Call("fstat", {"fd": "rw"}, {"fd-bad": ("fd", "bad"), "fd-dir": ("fd", "dir")},
         lambda fs, a: fs.fstat(a["fd"]), ("fd",)),
    Call("fsync", {"fd": "rw"}, {"fd-bad": ("fd", "bad"), "fd-readonly": ("fd", "ro"),
                                 "fd-dir": ("fd", "dir")},
         lambda fs, a: fs.fsync(a["fd"]), ("fd",)),
    Call("fallocate", {"fd": "rw", "mode": 0, "offset": 0, "length": 4096},
         {**FD_FAULTS_WRITE, "fd-append": ("fd", "app"),
          "mode-unknown": ("mode", FALLOC_FL_UNKNOWN),
          "mode-punch-without-keep-size": ("mode", FALLOC_FL_PUNCH_HOLE),
          "mode-punch": ("mode", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE),
          "offset-negative": ("offset", -1), "offset-overflow": ("offset", LAST_PAGE),
          "offset-wraps": ("offset", MAX_LFS_FILESIZE),
          "zero-length": ("length", 0), "length-negative": ("length", -1)},
         lambda fs, a: fs.fallocate(a["fd"], a["mode"], a["offset"], a["length"]), ("fd",)),
    Call("copy_file_range",
         {"src": "rw", "dst": "h", "count": 100, "offset_src": 0, "offset_dst": 0},
         {"src-bad": ("src", "bad"), "src-writeonly": ("src", "wo"), "src-dir": ("src", "dir"),
          "src-append": ("src", "app"),
          "dst-bad": ("dst", "bad"), "dst-readonly": ("dst", "ro"), "dst-dir": ("dst", "dir"),
          "dst-append": ("dst", "app"), "dst-same-file": ("dst", "rw"),
          "zero-length": ("count", 0), "count-huge": ("count", (1 << 64) - 1),
          "offset-src-negative": ("offset_src", -1),
          "offset-src-overflow": ("offset_src", MAX_LFS_FILESIZE - 50),
          "offset-src-past-eof": ("offset_src", 1 << 20),
          "offset-dst-negative": ("offset_dst", -1),
          "offset-dst-size-limit": ("offset_dst", MAX_LFS_FILESIZE),
          "offset-dst-overflow": ("offset_dst", MAX_LFS_FILESIZE - 50)},
         lambda fs, a: fs.copy_file_range(a["src"], a["dst"], a["count"], a["offset_src"],
                                          a["offset_dst"]), ("src", "dst")),
    Call("mmap_read", {"fd": "rw", "offset": 0, "length": 100},
         {**FD_FAULTS_READ, "zero-length": ("length", 0),
          "offset-negative": ("offset", -PAGE_SIZE), "offset-unaligned-negative": (
              "offset", -1), "offset-overflow": ("offset", LAST_PAGE),
          "offset-past-eof": ("offset", 1 << 20)},
         lambda fs, a: fs.mmap_read(a["fd"], a["offset"], a["length"]), ("fd",)),
    Call("mmap_write", {"fd": "rw", "offset": 0, "data": b"y" * 100},
         {**FD_FAULTS_WRITE, "fd-writeonly": ("fd", "wo"), "fd-append": ("fd", "app"),
          "zero-length": ("data", b""),
          "offset-negative": ("offset", -PAGE_SIZE), "offset-unaligned-negative": (
              "offset", -1), "offset-overflow": ("offset", LAST_PAGE),
          "offset-past-eof": ("offset", 1 << 20)},
         lambda fs, a: fs.mmap_write(a["fd"], a["offset"], a["data"]), ("fd",)),
    Call("unlink", {"name": "f"},
         path_faults(names={**NAME_FAULTS, "name-dir": "d", "name-dot": ".",
                            "name-dotdot": ".."}),
         lambda fs, a: fs.unlink(path(a))),
    Call("mkdir", {"name": "new"},
         path_faults(names={"name-toolong": LONG, "name-exists-file": "f",
                            "name-exists-dir": "d", "name-dot": ".", "name-dotdot": ".."}),
         lambda fs, a: fs.mkdir(path(a))),
    Call("rmdir", {"name": "e"},
         path_faults(names={**NAME_FAULTS, "name-file": "f", "name-not-empty": "d",
                            "name-dot": ".", "name-dotdot": ".."}),
         lambda fs, a: fs.rmdir(path(a))),
    Call("rename", {"src-name": "f", "dst-name": "new"},
         {**path_faults("src-", names={**NAME_FAULTS, "name-dir": "e", "name-dot": ".",
                                       "name-dotdot": ".."}),
          **path_faults("dst-", names={"name-toolong": LONG, "name-dir": "e",
                                       "name-dir-not-empty": "d", "name-file": "h",
                                       "name-same": "f", "name-dot": ".", "name-dotdot": "..",
                                       "name-inside": "e/x"})},
         lambda fs, a: fs.rename(path(a, "src-"), path(a, "dst-"))),
    Call("listdir", {"name": "d"},
         path_faults(names={**NAME_FAULTS, "name-file": "f", "name-dot": "."}),
         lambda fs, a: fs.listdir(path(a))),
    Call("stat", {"name": "f"},
         path_faults(names={**NAME_FAULTS, "name-dir": "d", "name-dot": "."}),
         lambda fs, a: fs.stat(path(a))),
]


def outcome(call: Call, result: Any) -> Any:
    """What is compared of a success: the bytes, count or names; a stat's type and a
    file's size; that open gave a descriptor (its number is each side's own)."""
    if call.name == "open":
        return "a descriptor"
    if isinstance(result, os.stat_result):     # a directory's size is the file system's
        return ("stat", statmod.S_IFMT(result.st_mode),
                result.st_size if statmod.S_ISREG(result.st_mode) else None)
    return result


def run_case(fs: AnyFileSystem, call: Call, faults: tuple[str, ...]) -> Any:
    """The call with ``faults`` applied on a fresh tree: ('ok', outcome) or the errno."""
    fds = build_tree(fs)
    args = dict(call.base)
    for fault in faults:
        arg, value = call.faults[fault]
        args[arg] = value
    for arg in call.fd_args:
        args[arg] = fds[args[arg]]
    try:
        result = call.run(fs, args)
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, exc.errno)
    return ("ok", outcome(call, result))


def kernel_release() -> tuple[int, int]:
    """The running kernel's major and minor version."""
    major, minor = os.uname().release.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def older_kernel_differs(call: Call, faults: tuple[str, ...]) -> bool:
    """The reference follows current Linux; where an older kernel answered otherwise,
    its answer is not compared: O_CREAT|O_DIRECTORY is EINVAL only since Linux 6.4."""
    return (call.name == "open" and "o-directory" in faults
            and bool({"creat", "creat-excl"} & set(faults)) and kernel_release() < (6, 4))


def _mounted_tmpfs() -> list[str]:
    with open("/proc/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[2:3] == ["tmpfs"]]


@pytest.fixture(scope="module")
def tmpfs() -> Iterator[Path]:
    """A fresh tmpfs mounted for this module (root), else /dev/shm when it is a writable
    tmpfs; skipped with the reason otherwise."""
    try:
        with temporary_mount("tmpfs") as where:
            yield Path(where)
            return
    except KernelRamfsUnavailable as exc:
        reason = str(exc)
    shm = "/dev/shm"
    if shm in _mounted_tmpfs() and os.access(shm, os.W_OK):
        yield Path(shm)
        return
    pytest.skip(f"needs a tmpfs: {reason}, and /dev/shm is no writable tmpfs")


@pytest.mark.parametrize("call", CALLS, ids=[c.name for c in CALLS])
def test_every_pair_of_faults_fails_as_on_tmpfs(call: Call, tmpfs: Path) -> None:
    differences = []
    cases = list(call.cases())
    for faults in cases:
        if older_kernel_differs(call, faults):
            continue
        reference = run_case(Ramfs(features="full"), call, faults)
        with directory_filesystem(tmpfs) as real:
            kernel = run_case(real, call, faults)
        if reference != kernel:
            differences.append(f"{call.name} with {' + '.join(faults) or 'no fault'}: "
                               f"tmpfs {kernel}, reference {reference}")
    assert not differences, (f"{len(differences)} of {len(cases)} cases differ:\n"
                             + "\n".join(differences))


def test_the_table_covers_every_call_of_the_protocol() -> None:
    assert {c.name for c in CALLS} == set(protocol_members(AnyFileSystem)) - {"blocksize"}


def test_the_known_linux_answer_mmap_of_the_last_page_read_only_for_writing() -> None:
    """Checked on Linux 6.18's tmpfs through raw mmap(2): file_mmap_ok's EOVERFLOW comes
    before the access checks' EACCES."""
    fs = Ramfs()
    fds = build_tree(fs)
    with pytest.raises(OSError) as exc:
        fs.mmap_write(fds["ro"], LAST_PAGE, b"z")
    assert exc.value.errno == errno.EOVERFLOW


@pytest.mark.parametrize("call", [
    lambda fs, fds: fs.pwrite(fds["rw"], b"z", (1 << 64) + 5),
    lambda fs, fds: fs.pread(fds["rw"], -1, 0),
    lambda fs, fds: fs.pread(fds["rw"], 1, 1 << 63),
    lambda fs, fds: fs.ftruncate(fds["rw"], 1 << 64),
    lambda fs, fds: fs.fallocate(fds["rw"], 0, (1 << 64) + 5, 1),
    lambda fs, fds: fs.copy_file_range(fds["rw"], fds["h"], -1, 0, 0),
    lambda fs, fds: fs.copy_file_range(fds["rw"], fds["h"], 1, 0, (1 << 64) + 5),
], ids=["pwrite-offset-2**64+5", "pread-negative-length", "pread-offset-2**63",
        "ftruncate-2**64", "fallocate-offset-2**64+5", "copy-negative-count",
        "copy-offset-2**64+5"])
def test_numbers_no_c_type_holds_are_einval_and_change_nothing(
        call: Callable[[AnyFileSystem, dict[str, int]], Any], tmpfs: Path) -> None:
    """Never wrapped (an offset of 2**64 + 5 must not write at 5), never Python's
    ValueError or OverflowError: EINVAL on both sides, and both files as they were."""
    with directory_filesystem(tmpfs) as real:
        for fs in (real, Ramfs(features="full")):
            fds = build_tree(fs)
            with pytest.raises(OSError) as exc:
                call(fs, fds)
            assert exc.value.errno == errno.EINVAL, (fs, exc.value)
            assert fs.pread(fds["rw"], 6000, 0) == DATA and fs.pread(fds["h"], 6000, 0) == DATA
