"""Reading a user's input files, bounded, and quoting them back in one short line.

Every operation log the package reads (``.fsxops``, ``.mtdops``, ``.fsdiff``, whether
replayed by a test or shrunk by ``python -m pytest_folio shrink``) goes through
:func:`read_log`: a regular file (a FIFO would block the open, ``/dev/zero`` never ends)
of at most :data:`MAX_LOG_BYTES`, checked before a byte is read. Every parser's error
quotes the bad part through :func:`excerpt`: at most a few dozen characters, control
characters escaped, so a megabyte of NUL bytes is still a one-line error.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path

from pytest_folio.sizes import format_size

# A log is read and parsed once, on the controller, and handed to every xdist worker as
# its operations: larger ones are refused before the tests (16 MiB is some 500,000
# operations, parsed in a few seconds).
MAX_LOG_BYTES = 16 << 20
EXCERPT_CHARS = 40


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """``text`` quoted as Python's ``repr`` does (control characters escaped), cut to
    ``limit`` characters with ``...`` after the quote when longer."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def printable(text: str, keep: str = "\n") -> str:
    """``text`` with control characters other than those in ``keep`` escaped
    (``\\x1b``), so that printing a name read from a file cannot move the cursor or
    retitle a terminal; ``keep=""`` makes an error message one line whatever it
    quotes."""
    if text.isprintable():
        return text
    return "".join(c if c in keep or unicodedata.category(c) != "Cc"
                   else repr(c)[1:-1] for c in text)


def describe_file_type(mode: int) -> str:
    """What a file is, for a message: ``a directory``, ``a FIFO``..."""
    for test, name in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def read_limited(path: str | os.PathLike[str], error: type[Exception],
                 limit: int = MAX_LOG_BYTES, what: str = "log") -> bytes:
    """The bytes of the ``what`` file at ``path``; ``error`` (one line naming the path)
    when it is not a regular file, is larger than ``limit`` bytes, or cannot be read."""
    shown = os.fspath(path)
    try:    # O_NONBLOCK: opening a FIFO would wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"cannot read {shown}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{shown}: is {describe_file_type(info.st_mode)}, not a {what} file")
        if info.st_size > limit:
            raise error(f"{shown}: {format_size(info.st_size)} is more than the "
                        f"{format_size(limit)} a {what} may have")
        data = bytearray()
        while len(data) <= limit and (chunk := os.read(fd, limit + 1 - len(data))):
            data += chunk
    except OSError as exc:
        raise error(f"cannot read {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:       # grew since the fstat
        raise error(f"{shown}: more than the {format_size(limit)} a {what} may have")
    return bytes(data)


def read_log(path: str | os.PathLike[str], error: type[Exception],
             limit: int = MAX_LOG_BYTES) -> str:
    """The text of the log at ``path`` (:func:`read_limited`); ``error`` also when it is
    not UTF-8."""
    try:
        return read_limited(path, error, limit).decode()
    except UnicodeDecodeError as exc:
        raise error(f"{os.fspath(path)}: not UTF-8 text (byte {exc.start})") from None


def regular_file(path: Path, what: str) -> str | None:
    """Why ``path`` cannot be read as a ``what`` file (None when it is a regular file):
    missing, or a directory, a device, a FIFO... named as such."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return str(exc.strerror or exc)
    if stat.S_ISREG(mode):
        return None
    return f"is {describe_file_type(mode)}, not {what}"
