"""The answer rules (pytest_folio.targets.answers): every shape carrying the protocol's
information passes, in the one shape callers compare; a shape carrying other
information, or a read's answer that changes later, is one line naming the call."""

from __future__ import annotations

import errno
import os
from typing import Any, cast

import pytest

from pytest_folio.fsx.differential import Mismatch, compare, generate, supported
from pytest_folio.model.ramfs import Ramfs
from pytest_folio.targets.answers import (
    FS_RULES,
    MTD_RULES,
    AnswerError,
    answering,
    count_answer,
    data_answer,
    named_errno,
    names_answer,
)
from pytest_folio.targets.capabilities import supports
from pytest_folio.targets.protocols import (
    AnyFileSystem,
    Directories,
    FileSystem,
    FileSystemBase,
    MappedIO,
    MTDDevice,
    Reopenable,
)
from tests.helpers.fsx_cachedfs import CachedFS
from tests.helpers.fsx_memfs import MemFS
from tests.helpers.mtd_devices import RamMTD
from tests.helpers.usual_python import UsualFS, UsualMTD


@pytest.mark.parametrize("answer", [b"abcd", bytearray(b"abcd"), memoryview(b"abcd"),
                                    memoryview(bytearray(b"xabcd"))[1:]])
def test_any_bytes_like_read_answer_is_its_bytes(answer: Any) -> None:
    data = data_answer(answer, "read(0, 4)", 4, exact=True)
    assert data == b"abcd" and type(data) is bytes


@pytest.mark.parametrize(("answer", "length", "exact", "message"), [
    ("abcd", 4, True, "read(0, 4) returned str, not bytes-like"),
    (None, 4, True, "read(0, 4) returned NoneType, not bytes-like"),
    ([1, 2, 3, 4], 4, True, "read(0, 4) returned list, not bytes-like"),
    (b"abc", 4, True, "read(0, 4) returned 3 bytes, not 4"),
    (b"abcde", 4, False, "read(0, 4) returned 5 bytes, more than 4"),
])
def test_a_read_answer_of_another_shape_is_refused(answer: Any, length: int, exact: bool,
                                                   message: str) -> None:
    with pytest.raises(AnswerError, match=message.replace("(", r"\(").replace(")", r"\)")):
        data_answer(answer, "read(0, 4)", length, exact=exact)


def test_a_short_file_read_is_an_answer() -> None:
    assert data_answer(bytearray(b"ab"), "pread(3, 4, 0)", 4, exact=False) == b"ab"


def test_a_write_answers_none_or_the_count_and_a_count_must_be_right() -> None:
    assert count_answer(None, "write(0, <4 bytes>)", 4, exact=True) == 4
    assert count_answer(4, "write(0, <4 bytes>)", 4, exact=True) == 4
    assert count_answer(2, "pwrite(3, <4 bytes>, 0)", 4, exact=False) == 2  # a short write
    for bad, exact in ((3, True), (5, False), (-1, False), (True, True), ("4", True)):
        with pytest.raises(AnswerError, match=r"write\(0, <4 bytes>\) returned"):
            count_answer(bad, "write(0, <4 bytes>)", 4, exact=exact)


def test_names_answer_in_any_order_from_any_iterable() -> None:
    assert names_answer(("b", "a"), "listdir('')") == ["a", "b"]
    assert names_answer(iter(["b", "a"]), "listdir('')") == ["a", "b"]
    for bad in ("ab", [b"a"], None):
        with pytest.raises(AnswerError, match=r"listdir\(''\) returned"):
            names_answer(bad, "listdir('')")


def test_a_device_behind_the_rules_is_the_device_to_every_check() -> None:
    dev = answering(UsualMTD(), MTD_RULES)
    assert type(dev).__name__ == "UsualMTD" and isinstance(dev, UsualMTD)
    assert isinstance(dev, MTDDevice) and isinstance(dev, Reopenable)
    assert answering(dev, MTD_RULES) is dev
    assert dev.write(0, b"ab") == 2 and dev.erase(0, 64 << 10) is None
    assert dev.reopen() is None and dev.sync() is None
    assert dev.read(0, 2) == b"\xff\xff" and type(dev.read(0, 2)) is bytes
    dev.name = "renamed"                                # attributes are the device's
    assert dev.name == "renamed"


@pytest.mark.parametrize(("error", "call", "code"), [
    (OSError(errno.EIO, "I/O error"), "read", errno.EIO),
    (FileNotFoundError("f"), "open", errno.ENOENT),
    (FileExistsError("d"), "mkdir", errno.EEXIST),
    (IsADirectoryError("d"), "open", errno.EISDIR),
    (NotADirectoryError("f"), "listdir", errno.ENOTDIR),
    (PermissionError("d"), "unlink", errno.EPERM),
    (PermissionError("f"), "mmap_write", errno.EACCES),
    (OSError(errno.EROFS), "write", errno.EROFS),
    (type("MyMissing", (FileNotFoundError,), {})("f"), "stat", errno.ENOENT),
    (OSError("failed"), "read", None),
    (OSError(10**9), "read", None),
])
def test_an_error_raised_without_its_errno_says_the_one_it_names(
        error: OSError, call: str, code: int | None) -> None:
    assert named_errno(error, call) == code


def test_a_target_behind_the_rules_raises_errors_with_their_errno() -> None:
    class RaisingByClass(MemFS):
        def stat(self, path: str) -> os.stat_result:
            raise FileNotFoundError(path)

    fs = answering(RaisingByClass(4096), FS_RULES)
    with pytest.raises(FileNotFoundError) as info:
        fs.stat("nowhere")
    assert info.value.errno == errno.ENOENT


class OnlyTheCore(FileSystemBase, MemFS):
    """MemFS whose optional calls are FileSystemBase's: absent."""


def test_a_file_system_behind_the_rules_offers_what_it_offers() -> None:
    for raw in (OnlyTheCore(), CachedFS()):
        fs = answering(raw, FS_RULES)
        assert isinstance(fs, FileSystem)
        for capability in (MappedIO, Directories):
            assert supports(fs, capability) is supports(raw, capability)
    assert not supports(answering(OnlyTheCore(), FS_RULES), MappedIO)


class ViewFS(MemFS):
    """pread answers a view of the file's bytes: it changes when the file does."""

    def pread(self, fd: int, n: int, offset: int) -> bytes:
        data = self._file(fd)
        return memoryview(data)[offset:offset + n]  # type: ignore[return-value]


class ReusedBufferMTD(RamMTD):
    """read fills one buffer and answers it every time."""

    buffer = bytearray()

    def read(self, offset: int, length: int) -> bytes:
        self.buffer[:] = super().read(offset, length)
        return self.buffer  # type: ignore[return-value]


def test_a_view_into_the_file_is_reported_as_one() -> None:
    fs = answering(ViewFS(), FS_RULES)
    fd = fs.open("f", os.O_CREAT | os.O_RDWR)
    fs.pwrite(fd, b"old!", 0)
    assert fs.pread(fd, 4, 0) == b"old!"
    fs.pwrite(fd, b"new!", 0)                      # same length: no resize
    with pytest.raises(AnswerError, match=r"the answer of pread\(3, 4, 0\) \(call 3\) had "
                                          r"changed by call 5 \(fsync\(3\)\): it is a view "
                                          r"into the target's cache"):
        fs.fsync(fd)


def test_a_view_that_blocks_the_files_growth_is_reported_as_one() -> None:
    fs = answering(ViewFS(), FS_RULES)
    fd = fs.open("f", os.O_CREAT | os.O_RDWR)
    fs.pwrite(fd, b"old!", 0)
    fs.pread(fd, 4, 0)
    with pytest.raises(AnswerError, match=r"pwrite\(3, <4 bytes>, 4\) raised BufferError "
                                          r".* while the answer of pread\(3, 4, 0\) was held"):
        fs.pwrite(fd, b"more", 4)                  # the bytearray cannot grow


def test_a_buffer_reused_by_the_next_reads_is_reported() -> None:
    dev = answering(ReusedBufferMTD(size=1 << 20, erasesize=16384), MTD_RULES)
    dev.write(0, b"abcd")
    dev.read(0, 4)
    dev.read(4, 4)                # the first answer is now 0xff bytes
    with pytest.raises(AnswerError, match=r"the answer of read\(0, 4\) \(call 2\) had "
                                          r"changed by call 4 \(sync\(\)\)"):
        dev.sync()


def test_the_differential_compares_information_not_shapes() -> None:
    ops = generate(11, supported(Ramfs(blocksize=4096)), count=300)
    compare(cast(AnyFileSystem, UsualFS(4096)), Ramfs(blocksize=4096, features="full"), ops)


def test_the_differential_names_an_answer_of_another_shape() -> None:
    class TextRead(UsualFS):
        def pread(self, fd: int, n: int, offset: int) -> Any:
            return super().pread(fd, n, offset).decode("latin-1")

    ops = generate(11, supported(Ramfs(blocksize=4096)), count=600)
    with pytest.raises(Mismatch, match=r"target broke the answer rules: pread\(.*\) "
                                       r"returned str, not bytes-like"):
        compare(cast(AnyFileSystem, TextRead(4096)), Ramfs(blocksize=4096, features="full"),
                ops)
