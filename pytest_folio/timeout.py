"""``--folio-timeout SECONDS``: a test whose set-up, call or teardown runs longer fails,
with the stack of where it was, and the run goes on.

A target that hangs (a device read that never returns, a lock taken twice, a loop that
never ends) would otherwise stop the whole run with no word of where. Each phase gets a
``SIGALRM`` timer; its handler fails the test from where the main thread is, so the
failure shows the target's frames, and pytest goes on with the next test. A call blocked
in the kernel is interrupted too (the signal ends the system call and Python runs the
handler). A C extension that never returns to Python, or a test that catches
``BaseException`` and carries on, cannot be stopped this way: for those, Python's
``faulthandler`` still prints every thread's stack when the timer fires.

Without ``SIGALRM`` (Windows) or outside the main thread, only that stack dump is done.
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import threading
import traceback
from collections.abc import Generator
from types import FrameType

import pytest

_HIDDEN = ("/_pytest/", "/pluggy/", "/pytest/__main__.py", "<frozen runpy>", "/execnet/",
           "/xdist/", "<string>", f"/{__name__.replace('.', '/')}.py")


def where(frame: FrameType | None) -> str:
    """The stack at ``frame``, without pytest's and pluggy's frames above the test."""
    frames = [f for f in traceback.extract_stack(frame)
              if not any(part in f.filename for part in _HIDDEN)]
    return "".join(traceback.format_list(frames)).rstrip()


class FolioTimeout:
    """The plugin registered when ``--folio-timeout`` is more than 0."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def _limit(self, item: pytest.Item, when: str) -> Generator[None, object, object]:
        can_interrupt = (hasattr(signal, "SIGALRM")
                         and threading.current_thread() is threading.main_thread())
        if not can_interrupt:
            faulthandler.dump_traceback_later(self.seconds, file=sys.stderr)
            try:
                return (yield)
            finally:
                faulthandler.cancel_dump_traceback_later()

        def expired(signum: int, frame: FrameType | None) -> None:
            pytest.fail(f"--folio-timeout: {when} of {item.nodeid} ran longer than "
                        f"{self.seconds:g} s; it was here:\n{where(frame)}", pytrace=False)

        previous = signal.signal(signal.SIGALRM, expired)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        try:
            return (yield)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        return (yield from self._limit(item, "set-up"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        return (yield from self._limit(item, "call"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, object, object]:
        return (yield from self._limit(item, "teardown"))
