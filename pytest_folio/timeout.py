"""``--folio-timeout SECONDS``: a test whose set-up, call or teardown runs longer fails,
with the stack of where it was, and the run goes on.

A target that hangs (a device read that never returns, a lock taken twice, a loop that
never ends) would otherwise stop the whole run with no word of where. Each phase gets a
``SIGALRM`` timer; its handler fails the test from where the main thread is, so the
failure shows the target's frames, and pytest goes on with the next test. A call blocked
in the kernel is interrupted too (the signal ends the system call and Python runs the
handler). The checks the plugin makes of a user's factory before the tests (one device
and one file system made and read) run under the same limit: a hang there is one usage
error naming where it was.

A C extension that never returns to Python, a test that catches ``BaseException`` and
carries on, or one that ignores ``SIGALRM`` cannot be stopped this way: for those,
Python's ``faulthandler`` prints every thread's stack as a backstop, :data:`GRACE` after
the limit (cancelled when the phase ends in time; Python has one such timer, so within
a phase it takes the place of pytest's ``faulthandler_timeout``). Without ``SIGALRM``
(Windows) or outside the main thread, only that stack dump is done.

:func:`deadline` is the one timer; ``python -m pytest_folio shrink`` bounds each replay
with it as well.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from types import FrameType

import pytest

_HIDDEN = ("/_pytest/", "/pluggy/", "/pytest/__main__.py", "<frozen runpy>", "/execnet/",
           "/xdist/", "<string>", f"/{__name__.replace('.', '/')}.py")


# The longest limit every platform's timers hold (a 32-bit time_t; faulthandler's and
# setitimer's own limit on 64-bit Linux is some 292 years): longer is a usage error.
MAX_SECONDS = float((1 << 31) - 1)


def grace(seconds: float) -> float:
    """How long after the limit the stack-dump backstop fires: as long again, at most
    ten seconds (time for the failure the alarm raises to end the phase)."""
    return min(seconds, 10.0)


def where(frame: FrameType | None) -> str:
    """The stack at ``frame``, without pytest's and pluggy's frames above the test."""
    frames = [f for f in traceback.extract_stack(frame)
              if not any(part in f.filename for part in _HIDDEN)]
    return "".join(traceback.format_list(frames)).rstrip()


def innermost(frame: FrameType | None) -> str:
    """``FILE:LINE in FUNCTION`` of the frame a timer interrupted, for a one-line message."""
    if frame is None:
        return "an unknown place"
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


class TimedOut(BaseException):
    """A limit ran out (a BaseException, as pytest's failures are: the code interrupted
    may catch Exception); ``str()`` is where it was, :func:`innermost`."""

    @classmethod
    def raise_at(cls, frame: FrameType | None) -> None:
        """The ``expired`` of :func:`deadline` that raises this."""
        raise cls(innermost(frame))


def stderr_fd() -> int:
    """The descriptor of stderr as it is now (as pytest's faulthandler plugin finds it:
    a replaced ``sys.stderr`` may have none)."""
    try:
        fd = sys.stderr.fileno()
        if fd >= 0:
            return fd
    except (AttributeError, ValueError):    # io.UnsupportedOperation is a ValueError
        pass
    assert sys.__stderr__ is not None
    return sys.__stderr__.fileno()


@contextmanager
def deadline(seconds: float, expired: Callable[[FrameType | None], None],
             stderr: int | None = None) -> Iterator[None]:
    """Run the body under a ``seconds`` limit: ``expired(frame)`` is called from the
    ``SIGALRM`` handler in the main thread (it raises, to end the body) and every
    thread's stack goes to the descriptor ``stderr`` (default :func:`stderr_fd`)
    :func:`grace` later if the body still has not ended. Elsewhere only that stack dump
    is armed. Both are cancelled when the body ends."""
    faulthandler.dump_traceback_later(seconds + grace(seconds),
                                      file=stderr_fd() if stderr is None else stderr)
    can_interrupt = (hasattr(signal, "SIGALRM")
                     and threading.current_thread() is threading.main_thread())
    if not can_interrupt:
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        expired(frame)

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        faulthandler.cancel_dump_traceback_later()


class FolioTimeout:
    """The plugin registered when ``--folio-timeout`` is more than 0."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        # made in pytest_configure, outside pytest's capture: the stack dump of a test
        # that never ends must reach the terminal, not a capture file never shown
        self.stderr = os.dup(stderr_fd())

    def pytest_unconfigure(self) -> None:
        os.close(self.stderr)

    def _limit(self, item: pytest.Item, when: str) -> Generator[None, object, object]:
        def expired(frame: FrameType | None) -> None:
            pytest.fail(f"--folio-timeout: {when} of {item.nodeid} ran longer than "
                        f"{self.seconds:g} s; it was here:\n{where(frame)}", pytrace=False)

        with deadline(self.seconds, expired, self.stderr):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        return (yield from self._limit(item, "set-up"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        return (yield from self._limit(item, "call"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, object, object]:
        return (yield from self._limit(item, "teardown"))
