"""fsx as a Hypothesis state machine: the same operations and checks, with shrinking.

Each rule is one fsx operation with Hypothesis-chosen offset and length, applied through
the engine exactly as a replayed log entry is (so fsx's trimming and alignment apply);
the size is checked after every rule, reads are compared, and ``teardown`` compares the
whole file. When a check fails, the failure carries the operation log as ``.fsxops``
text, and since Hypothesis re-raises the failure of the shrunk example, what is printed
is the shortest sequence it found, ready for ``--folio-fsx-replay``.

Its profiles, ``fsx-quick`` and ``fsx-thorough``, are the run's ``--folio-hypothesis``
levels (:mod:`pytest_folio.hypothesis_budget`: the numbers, the shrinking budget, the
example database).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pytest_folio.fsx.config import QUICK, THOROUGH, FsxOptions
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from pytest_folio.fsx.log import (
    FL_CLOSE_OPEN,
    FL_KEEP_SIZE,
    FL_NONE,
    LogEntry,
    format_fsxops,
    op_code,
)
from pytest_folio.hypothesis_budget import register_profiles, run_machine
from pytest_folio.targets.protocols import AnyFileSystem

register_profiles()
__all__ = ["QUICK", "THOROUGH", "FsxMachine", "FsxStateFailure", "fsx_machine",
           "run_fsx_machine"]

_files = itertools.count()
# Offsets and lengths within fsx's default limits, so shrinking heads for small numbers.
_OFF = st.integers(0, FsxOptions().maxfilelen - 1)
_LEN = st.integers(0, FsxOptions().maxoplen)
_CO = st.booleans()  # close and reopen the file after the operation (fsx's -c)


def _range_rule(name: str, *, keep_size: bool = False) -> Callable[..., None]:
    """The rule for an fsx operation on a range of the file, named as the operation
    (Hypothesis prints the shrunk steps by these names); with ``keep_size``, the rule
    also draws fallocate's FALLOC_FL_KEEP_SIZE."""

    def apply(self: FsxMachine, offset: int, size: int, close_open: bool,
              keep_size: bool = False) -> None:
        self._op(name, offset, size, keep_size=keep_size, close_open=close_open)

    apply.__name__ = apply.__qualname__ = name
    if keep_size:
        return rule(offset=_OFF, size=_LEN, keep_size=st.booleans(), close_open=_CO)(apply)
    return rule(offset=_OFF, size=_LEN, close_open=_CO)(apply)


class FsxStateFailure(FsxFailure):
    """An fsx failure found by the state machine; ``fsxops_text`` replays it."""

    def __init__(self, failure: FsxFailure, fsxops_text: str) -> None:
        super().__init__(f"{failure.summary}\nshrunk operation log (.fsxops):\n{fsxops_text}",
                         status=failure.status, badoff=failure.badoff, report=failure.report)
        self.summary = failure.summary
        self.fsxops_text = fsxops_text


class FsxMachine(RuleBasedStateMachine):
    """Subclass with :func:`fsx_machine` rather than directly: it sets the target."""

    filesystem: ClassVar[Callable[[], AnyFileSystem]]
    options: ClassVar[FsxOptions] = FsxOptions()

    def __init__(self) -> None:
        super().__init__()
        self.fs = type(self).filesystem()
        self.path = f"fsx-hypothesis-{next(_files)}.dat"
        self.engine = FsxEngine(self.fs, self.options.replace(closeprob=0), path=self.path)
        self._guard(self.engine.start)

    def _guard(self, action: Callable[[], Any]) -> None:
        try:
            action()
        except FsxStateFailure:
            raise
        except FsxFailure as failure:
            self.engine.close()
            raise FsxStateFailure(failure, format_fsxops(self.engine.log)) from None

    def _op(self, name: str, offset: int, size: int, dest: int | None = None, *,
            keep_size: bool = False, close_open: bool = False) -> None:
        args = (offset, size, 0) if dest is None else (offset, size, dest, 0)
        flags = (FL_KEEP_SIZE if keep_size else FL_NONE) | (
            FL_CLOSE_OPEN if close_open else FL_NONE)
        entry = LogEntry(op_code(name), args, flags)
        self._guard(lambda: self.engine.step(entry))

    read = _range_rule("read")
    write = _range_rule("write")
    mapread = _range_rule("mapread")
    mapwrite = _range_rule("mapwrite")

    @rule(size=_OFF, close_open=_CO)
    def truncate(self, size: int, close_open: bool) -> None:
        self._op("truncate", 0, size, close_open=close_open)

    fallocate = _range_rule("fallocate", keep_size=True)
    punch_hole = _range_rule("punch_hole")
    zero_range = _range_rule("zero_range", keep_size=True)
    collapse_range = _range_rule("collapse_range")
    insert_range = _range_rule("insert_range")

    @rule(offset=_OFF, size=_LEN, dest=_OFF, close_open=_CO)
    def copy_range(self, offset: int, size: int, dest: int, close_open: bool) -> None:
        # fsx's generate_dest_range(): the source inside the file, not overlapping dest
        file_size = self.engine.model.size
        offset = offset % file_size if file_size else 0
        size = min(size, file_size - offset)
        if abs(dest - offset) < size:
            dest = offset + size
        self._op("copy_range", offset, size, dest, close_open=close_open)

    @rule(close_open=_CO)
    def fsync(self, close_open: bool) -> None:
        self._op("fsync", 0, 0, close_open=close_open)

    @invariant()
    def size_matches(self) -> None:
        self._guard(self.engine.check_size)

    def teardown(self) -> None:
        try:
            if self.engine.fd is not None:  # not already failed
                self._guard(self.engine.check_contents)
        finally:
            self.engine.close()
            self.fs.unlink(self.path)


def fsx_machine(filesystem: Callable[[], AnyFileSystem],
                options: FsxOptions | None = None) -> type[FsxMachine]:
    """A state machine class testing the file systems ``filesystem()`` returns (called
    once per example; returning the same object is fine, each example uses a new file)."""
    attrs: dict[str, Any] = {"filesystem": staticmethod(filesystem)}
    if options is not None:
        attrs["options"] = options
    return type("FsxMachine", (FsxMachine,), attrs)


def run_fsx_machine(filesystem: Callable[[], AnyFileSystem],
                    options: FsxOptions | None = None,
                    profile: str = QUICK, *, seed: int | None = None, **run: Any) -> None:
    """Run the machine under a registered profile (``fsx-quick``, ``fsx-thorough``, or
    any profile of your own); raises :class:`FsxStateFailure` with the shrunk log.

    With ``seed`` (the suite passes the run's seed) the sequences Hypothesis tries are
    that seed's: the same seed tries the same ones again, another seed others. ``run``:
    :func:`~pytest_folio.hypothesis_budget.run_machine`'s database, key and shrinking."""
    run_machine(fsx_machine(filesystem, options), profile, seed=seed, **run)
