"""The catalogue's wrapper bugs break data, never an answer: from the same state, each
call through a wrapper bug succeeds or fails exactly as through the healthy wrapper, on
every kind of descriptor (read-only, write-only, appending, read-write). A wrapper that
read through a write-only descriptor would invent an EBADF, and the catalogue would then
count a bug as caught by an error of its own making."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import pytest

from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.targets.protocols import (
    FALLOC_FL_COLLAPSE_RANGE,
    FALLOC_FL_INSERT_RANGE,
    FALLOC_FL_KEEP_SIZE,
    FALLOC_FL_PUNCH_HOLE,
    FALLOC_FL_ZERO_RANGE,
)
from tests.helpers.fsx_broken import BUGS, PassThrough
from tests.helpers.fsx_cachedfs import CachedFS

ACCESS = {"rdonly": os.O_RDONLY, "wronly": os.O_WRONLY, "rdwr": os.O_RDWR,
          "append": os.O_WRONLY | os.O_APPEND}
SIZE = 5 * PAGE_SIZE + 100
Call = Callable[[PassThrough, int, int], object]


def fallocate(fs: PassThrough, fd: int, other: int, *, mode: int, offset: int,
              length: int) -> None:
    fs.fallocate(fd, mode, offset, length)


# one call each, with good and bad arguments; fd is the file under test, other a
# read-write descriptor of a second file
CALLS: dict[str, Call] = {
    "pread": lambda fs, fd, other: fs.pread(fd, 3 * PAGE_SIZE, 100),
    "pwrite": lambda fs, fd, other: fs.pwrite(fd, b"x" * PAGE_SIZE, 2 * PAGE_SIZE + 7),
    "pwrite past EOF": lambda fs, fd, other: fs.pwrite(fd, b"y" * 10, SIZE + PAGE_SIZE),
    "pwrite across EOF": lambda fs, fd, other: fs.pwrite(fd, b"z" * PAGE_SIZE, SIZE - 9),
    "pwrite at -1": lambda fs, fd, other: fs.pwrite(fd, b"x", -1),
    "truncate down": lambda fs, fd, other: fs.ftruncate(fd, PAGE_SIZE + 3),
    "truncate up": lambda fs, fd, other: fs.ftruncate(fd, SIZE + 3 * PAGE_SIZE),
    "truncate to -1": lambda fs, fd, other: fs.ftruncate(fd, -1),
    "fsync": lambda fs, fd, other: fs.fsync(fd),
    "close": lambda fs, fd, other: fs.close(fd),
    "mmap_read": lambda fs, fd, other: fs.mmap_read(fd, PAGE_SIZE, 2 * PAGE_SIZE),
    "mmap_write": lambda fs, fd, other: fs.mmap_write(fd, 10, b"m" * PAGE_SIZE),
    "copy from it": lambda fs, fd, other: fs.copy_file_range(fd, other, 2 * PAGE_SIZE,
                                                             10, 0),
    "copy into it": lambda fs, fd, other: fs.copy_file_range(other, fd, 2 * PAGE_SIZE,
                                                             0, 10),
    **{f"fallocate {name}": functools.partial(fallocate, mode=mode, offset=off, length=n)
       for name, mode, off, n in [
           ("allocate", 0, PAGE_SIZE, SIZE),
           ("keep size", FALLOC_FL_KEEP_SIZE, PAGE_SIZE, SIZE),
           ("punch", FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 2 * PAGE_SIZE),
           ("zero", FALLOC_FL_ZERO_RANGE, 100, 2 * PAGE_SIZE + 50),
           ("collapse", FALLOC_FL_COLLAPSE_RANGE, PAGE_SIZE, 2 * PAGE_SIZE),
           ("collapse unaligned", FALLOC_FL_COLLAPSE_RANGE, 1, PAGE_SIZE),
           ("insert", FALLOC_FL_INSERT_RANGE, PAGE_SIZE, 2 * PAGE_SIZE),
           ("insert at EOF", FALLOC_FL_INSERT_RANGE, 8 * PAGE_SIZE, PAGE_SIZE),
           ("of zero length", 0, 0, 0),
       ]},
}


def answer(make: Callable[[CachedFS], PassThrough], access: int, call: Call) -> str:
    """What one call from a fresh state answers: "ok" or the errno's name."""
    fs = make(CachedFS(PAGE_SIZE))
    for path in ("/f", "/g"):
        fd = fs.open(path, os.O_RDWR | os.O_CREAT)
        fs.pwrite(fd, bytes(range(256)) * (SIZE // 256) + b"t" * (SIZE % 256), 0)
        fs.close(fd)
    other = fs.open("/g", os.O_RDWR)
    fd = fs.open("/f", access)
    try:
        call(fs, fd, other)
    except OSError as e:
        return os.strerror(e.errno or 0)
    return "ok"


@pytest.mark.parametrize("bug", BUGS, ids=[b.__name__ for b in BUGS])
def test_a_wrapper_bug_answers_every_call_as_the_healthy_wrapper_does(bug: type) -> None:
    differ = [f"{call} on {kind}: healthy {want}, {bug.__name__} {got}"
              for kind, access in ACCESS.items() for call, run in CALLS.items()
              if (want := answer(PassThrough, access, run))
              != (got := answer(bug, access, run))]
    assert not differ, "\n".join(differ)


def test_the_calls_reach_both_answers_on_each_kind_of_descriptor() -> None:
    """The table is worth something only if the healthy answers differ by descriptor."""
    for kind, access in ACCESS.items():
        answers = {answer(PassThrough, access, run) for run in CALLS.values()}
        assert "ok" in answers and len(answers) > 1, (kind, answers)
