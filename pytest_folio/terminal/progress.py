"""Progress on long work, live: one call per step, ``progress.step("...")``.

The suites that run for minutes (speed, stress, torture) and the VM runner (kernel
download, module build, boot) call :func:`step`; where it shows depends on who is
listening:

- under pytest (the plugin's :class:`PytestProgress`): with ``-v`` or in CI (``CI`` set)
  one ``folio: ...`` line per step, as pytest's own ``-v`` lines; on a terminal at normal
  verbosity one status line, rewritten in place and cleared before pytest writes again;
  nothing under ``-q``, and nothing from xdist workers (they have no terminal);
- elsewhere, or when the caller names its stream (the ``vm`` subcommand's stderr): one
  line per step there.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

import pytest

Sink = Callable[[str], None]
_sinks: list[Sink] = []


def step(message: str, stream: TextIO | None = None) -> None:
    """Report one step of long work (a line of text without a newline): on ``stream``
    when given (a command's own output), else where the running pytest shows it, else
    on stderr."""
    if stream is None and _sinks:
        _sinks[-1](message)
        return
    out = stream or sys.stderr
    out.write(message + "\n")
    out.flush()


class PytestProgress:
    """The pytest plugin side: shows steps through the terminal reporter."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.shown = False

    def pytest_sessionstart(self) -> None:
        if not hasattr(self.config, "workerinput"):
            _sinks.append(self.show)

    def pytest_unconfigure(self) -> None:
        if self.show in _sinks:
            _sinks.remove(self.show)

    def _reporter(self) -> Any:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    def _uncaptured(self) -> Any:
        """Output capture off while writing (a test's capture would swallow it), as
        pytest's live logging does."""
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        return (capture.global_and_fixture_disabled() if capture is not None
                else contextlib.nullcontext())

    def show(self, message: str) -> None:
        tr = self._reporter()
        verbosity = self.config.get_verbosity()
        if tr is None or verbosity < 0:
            return
        if verbosity >= 1 or os.environ.get("CI"):
            with self._uncaptured():
                tr.write_line(f"folio: {message}")
            return
        tw = tr._tw
        if not getattr(tr, "isatty", False):
            return
        # the status line goes past the writer's own bookkeeping, so pytest's line and
        # its [ NN%] column are put back exactly by clear()
        width = max(20, tw.fullwidth - 1)
        with self._uncaptured():
            tw._file.write("\r\x1b[K" + f"folio: {message}"[:width])
            tw._file.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            tw = self._reporter()._tw
            with self._uncaptured():
                tw._file.write("\r\x1b[K" + tw._current_line)
                tw._file.flush()
            self.shown = False

    # cleared before the terminal reporter writes its letter or summary
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: Any) -> None:
        self.clear()

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self) -> None:
        self.clear()
