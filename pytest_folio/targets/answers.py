"""What a target's calls may answer: the one place the suites, the oracles, the target
checks and ``python -m pytest_folio check`` take the rules from.

Storage promises data, sizes, errors and durability; how a Python call hands them back
is a matter of style, so every shape that carries the same information is accepted
(docs/mtd.md and docs/fs.md state the rules for users):

- a call that has nothing to say (MTD ``erase``, ``sync``, ``close``, ``reopen``; FS
  ``close``, ``ftruncate``, ``fsync``, ``fallocate``, ``mmap_write``, ``unlink``,
  ``rename``, ``mkdir``, ``rmdir``; both sides' ``drop_caches``, ``power_cut`` and
  ``umount``) may return anything: ``None``, 0, the object itself;
- a write (MTD ``write``, FS ``pwrite``) returns ``None`` (all of it written) or the
  count; a count, when given, is an int: all of the data for MTD (a flash write is whole
  or an error), at most the data's length for ``pwrite`` (less is a short write, which
  the suites report as one); ``copy_file_range`` answers its count, an int;
- a read (MTD ``read`` and ``read_oob``, FS ``pread`` and ``mmap_read``) returns any
  bytes-like object (bytes, bytearray, a memoryview, an array of bytes) of the length
  asked (at most that for the file-system reads, which stop at EOF) that is a snapshot:
  a view into the target's cache, or a buffer it fills again on the next read, changes
  when the target does and is reported as what it is;
- ``listdir`` returns the names, in any order, in any iterable of str;
- an error is an ``OSError`` with Linux's errno, or one raised the usual Python way
  without it: by the class that names it (``raise FileNotFoundError(path)``: ENOENT) or
  with the errno as its only argument (``OSError(errno.EIO)``); such an error is given
  that errno (:func:`named_errno`) before anyone reads it.

:func:`answering` puts these rules in front of a target: every answer is checked once,
converted once (bytes for a read, an int for a write, None for the rest, the names
sorted), and the callers compare what storage promises and nothing else. A breach is an
:class:`AnswerError` of one line naming the call.
"""

from __future__ import annotations

import collections
import errno
import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

# How long a read's answer is watched: the answers of the last few reads that could
# change (not bytes) are kept with their copies, and each is compared once it leaves the
# window (after WATCHED more such reads), or at the next call of SETTLING (all of them):
# a view into a cache changes at the next write there, a reused buffer at the next read,
# and a changed answer stays changed; comparing at every call cost the MTD speed suite
# two thirds of its time.
WATCHED = 8
SETTLING = frozenset({"close", "sync", "fsync", "reopen", "power_cut", "umount",
                      "drop_caches"})


# The errno each OSError subclass of PEP 3151 stands for, for an error raised by its class
# alone. PermissionError stands for EACCES and EPERM alike: the protocols have no
# owners or modes, so it is EPERM where POSIX answers that without them (unlink of a
# directory) and EACCES elsewhere (mmap of a read-only descriptor for writing).
_CLASS_ERRNO = ((FileNotFoundError, errno.ENOENT), (FileExistsError, errno.EEXIST),
                (IsADirectoryError, errno.EISDIR), (NotADirectoryError, errno.ENOTDIR),
                (PermissionError, errno.EACCES), (InterruptedError, errno.EINTR),
                (BlockingIOError, errno.EAGAIN), (TimeoutError, errno.ETIMEDOUT))


_EPERM_CALLS = frozenset({"unlink", "rmdir", "rename"})


def named_errno(exc: OSError, call: str = "") -> int | None:
    """The errno ``exc`` (raised by ``call``) says: its own, else the one its class
    names, else its only argument when that is an errno (``OSError(errno.EIO)`` keeps
    errno None); None when it says none (a bare ``OSError("failed")``)."""
    if exc.errno is not None:
        return exc.errno
    if isinstance(exc, PermissionError) and call in _EPERM_CALLS:
        return errno.EPERM
    for cls, code in _CLASS_ERRNO:
        if isinstance(exc, cls):
            return code
    if len(exc.args) == 1 and type(exc.args[0]) is int and exc.args[0] in errno.errorcode:
        return exc.args[0]
    return None


class AnswerError(AssertionError):
    """A target answered a call in a shape that carries other information than the
    protocol's (the message says which call and what it returned)."""


class Call:
    """A call, said in a few words only when a message needs it (``read(0x1000, 4096)``,
    data as its length): made at every call, so it does nothing until printed."""

    __slots__ = ("args", "name")

    def __init__(self, name: str, args: tuple[Any, ...]) -> None:
        self.name = name
        self.args = args

    def __str__(self) -> str:
        words = [f"<{len(a)} bytes>" if isinstance(a, (bytes, bytearray, memoryview))
                 else f"{a:#x}" if isinstance(a, int) and not isinstance(a, bool) and a > 4096
                 else repr(a) for a in self.args]
        return f"{self.name}({', '.join(words)})"


def _what(answer: object) -> str:
    """An answer in a few words: its type, and its value when it is a number."""
    number = isinstance(answer, (int, float))
    return type(answer).__name__ + (f" {answer!r}" if number else "")


def data_answer(answer: object, call: object, length: int, *, exact: bool) -> bytes:
    """A read's answer as bytes: any bytes-like object of ``length`` bytes (``exact``)
    or at most that; AnswerError otherwise."""
    if isinstance(answer, bytes):
        data = answer
    else:
        try:
            view = memoryview(answer)  # type: ignore[arg-type]
        except TypeError:
            raise AnswerError(f"{call} returned {_what(answer)}, not bytes-like "
                              "(bytes, bytearray, memoryview)") from None
        data = view.tobytes()
    if len(data) != length if exact else len(data) > length:
        raise AnswerError(f"{call} returned {len(data)} bytes, "
                          f"{'not' if exact else 'more than'} {length}")
    return data


def count_answer(answer: object, call: object, length: int, *, exact: bool) -> int:
    """A write's answer as its count: None is all ``length`` bytes; an int is the count,
    ``length`` when ``exact``, else from 0 to ``length``."""
    if answer is None:
        return length
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise AnswerError(f"{call} returned {_what(answer)}, not None or the count "
                          f"({length})")
    if answer != length if exact else not 0 <= answer <= length:
        raise AnswerError(f"{call} returned {answer}, not the count of {length} bytes "
                          f"{'written' if exact else '(or fewer, for a short write)'}")
    return answer


def names_answer(answer: object, call: object) -> list[str]:
    """``listdir``'s answer: the names as a sorted list (their order is no promise)."""
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Iterable):
        raise AnswerError(f"{call} returned {_what(answer)}, not a list of names")
    names = list(answer)
    bad = next((name for name in names if not isinstance(name, str)), None)
    if bad is not None:
        raise AnswerError(f"{call} returned a name {_what(bad)}, not a str")
    return sorted(names)


def _is_snapshot(answer: object) -> bool:
    """Whether ``answer`` cannot change: bytes, or a memoryview of bytes."""
    return isinstance(answer, bytes) or (isinstance(answer, memoryview)
                                         and isinstance(answer.obj, bytes))


class Snapshots:
    """The last few read answers that could change (not bytes), with their copies and
    when they were returned: :meth:`keep` and :meth:`check` say when one did change."""

    def __init__(self) -> None:
        self.calls = 0      # calls made so far, to say when an answer was given
        self.kept: collections.deque[tuple[int, object, object, bytes]] = (
            collections.deque())

    def keep(self, call: object, answer: object, data: bytes) -> None:
        """Watch ``answer`` (unless it cannot change); compare the oldest one watched
        when it leaves the window."""
        if not _is_snapshot(answer):
            self.kept.append((self.calls, call, answer, data))
            if len(self.kept) > WATCHED:
                self._compare(self.kept.popleft(), call)

    def check(self, after: object) -> None:
        """Compare every answer watched (and stop watching them)."""
        while self.kept:
            self._compare(self.kept.popleft(), after)

    def _compare(self, entry: tuple[int, object, object, bytes], after: object) -> None:
        number, call, answer, data = entry
        if (answer if isinstance(answer, bytearray)      # compared by memcmp
                else memoryview(answer).tobytes()) != data:  # type: ignore[arg-type]
            self.kept.clear()
            raise AnswerError(f"the answer of {call} (call {number}) had changed by call "
                              f"{self.calls} ({after}): it is a view into the target's "
                              "cache or a buffer it reuses, not a snapshot")

    def explain(self, exc: BufferError, call: object) -> AnswerError | None:
        """A BufferError while a read's memoryview is held: that view is into the
        target's own buffer (which it could not resize), else None."""
        views = [c for _, c, answer, _ in self.kept if isinstance(answer, memoryview)]
        if not views:
            return None
        self.kept.clear()
        return AnswerError(f"{call} raised BufferError ({exc}) while the answer of "
                           f"{views[-1]} was held: that answer is a view into the "
                           "target's cache, not a snapshot")


# What each call answers, by its name: the argument names (for keyword calls) and a
# function of (answer, call, args) giving the answer the callers see. The calls that have
# nothing to say answer None; every other call (open, stat, block_isbad...) passes its
# answer as it is.
Rule = Callable[[object, Call, tuple[Any, ...]], object]


def _read_rule(index: int, exact: bool) -> Rule:
    def rule(answer: object, call: Call, args: tuple[Any, ...]) -> bytes:
        return data_answer(answer, call, args[index], exact=exact)
    return rule


def _write_rule(index: int, exact: bool) -> Rule:
    def rule(answer: object, call: Call, args: tuple[Any, ...]) -> int:
        return count_answer(answer, call, len(args[index]), exact=exact)
    return rule


def _copy_rule(answer: object, call: Call, args: tuple[Any, ...]) -> int:
    if answer is None:
        raise AnswerError(f"{call} returned None, not the count copied")
    return count_answer(answer, call, args[2], exact=False)


NOTHING = frozenset({"close", "sync", "erase", "reopen", "drop_caches", "power_cut",
                     "umount", "ftruncate", "fsync", "fallocate", "mmap_write", "unlink",
                     "rename", "mkdir", "rmdir", "read_into", "write_from"})
Rules = dict[str, tuple[tuple[str, ...], Rule]]
MTD_RULES: Rules = {
    "read": (("offset", "length"), _read_rule(1, exact=True)),
    "read_oob": (("offset", "length"), _read_rule(1, exact=True)),
    "write": (("offset", "data"), _write_rule(1, exact=True)),
}
FS_RULES: Rules = {
    "pread": (("fd", "n", "offset"), _read_rule(1, exact=False)),
    "mmap_read": (("fd", "offset", "length"), _read_rule(2, exact=False)),
    "pwrite": (("fd", "data", "offset"), _write_rule(1, exact=False)),
    "copy_file_range": (("src", "dst", "count", "offset_src", "offset_dst"), _copy_rule),
    "listdir": (("path",), lambda answer, call, args: names_answer(answer, call)),
}


class Answering:
    """A target behind the answer rules: every attribute is the target's, every call
    answers in the protocol's one shape (see the module docstring), and a read's answer
    that changes later is reported. ``isinstance`` sees the target's class, and
    ``type(...).__name__`` its name."""

    _folio_target: Any
    _folio_rules: Rules
    _folio_snapshots: Snapshots
    _folio_calls: dict[str, tuple[Any, Callable[..., Any]]]

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._folio_target, name)
        if name.startswith("_") or not callable(value):
            return value
        cached = self._folio_calls.get(name)
        if cached is not None and cached[0] == value:
            return cached[1]
        wrapper = self._folio_wrap(name, value)
        self._folio_calls[name] = (value, wrapper)
        return wrapper

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._folio_target, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._folio_target, name)

    @property  # type: ignore[misc]
    def __class__(self) -> type:   # isinstance() sees the target's class
        return type(self._folio_target)

    def __repr__(self) -> str:
        return repr(self._folio_target)

    def _folio_wrap(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        snapshots = self._folio_snapshots
        entry = self._folio_rules.get(name)
        nothing = name in NOTHING
        settling = name in SETTLING

        def answered(*args: Any, **kwargs: Any) -> Any:
            snapshots.calls += 1
            try:
                answer = call(*args, **kwargs)
            except BufferError as exc:
                problem = snapshots.explain(exc, Call(name, args))
                if problem is None:
                    raise
                raise problem from None
            except OSError as exc:
                if exc.errno is None:
                    exc.errno = named_errno(exc, name)
                raise
            if entry is not None:
                names, rule = entry
                given = (*args, *(kwargs[n] for n in names[len(args):] if n in kwargs))
                what = Call(name, given)
                result = rule(answer, what, given)
                if isinstance(result, bytes):
                    snapshots.keep(what, answer, result)
                return result
            if settling and snapshots.kept:
                snapshots.check(Call(name, args))
            return None if nothing else answer

        if getattr(call, "__folio_unsupported__", False):
            answered.__folio_unsupported__ = True  # type: ignore[attr-defined]
        answered.__name__ = answered.__qualname__ = name
        answered.__doc__ = call.__doc__
        answered.__wrapped__ = call  # type: ignore[attr-defined]  # its signature
        return answered


def answering(target: T, rules: Rules) -> T:
    """``target`` behind the answer rules (``MTD_RULES`` or ``FS_RULES``); a target
    already behind them is returned as it is."""
    if is_answering(target):
        return target
    proxy = object.__new__(_proxy_class(type(target).__name__))
    for attr, value in (("_folio_target", target), ("_folio_rules", rules),
                        ("_folio_snapshots", Snapshots()), ("_folio_calls", {})):
        object.__setattr__(proxy, attr, value)
    return proxy  # type: ignore[return-value]


def is_answering(obj: object) -> bool:
    """Whether ``obj`` is a target behind the answer rules."""
    return issubclass(type(obj), Answering)


@functools.cache
def _proxy_class(name: str) -> type[Answering]:
    """A subclass named as the target's class, for messages built from its name."""
    return type(name, (Answering,), {})
