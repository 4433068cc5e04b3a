"""fsx as a Hypothesis state machine: the same operations and checks, with shrinking.

Each rule is one fsx operation with Hypothesis-chosen offset and length, applied through
the engine exactly as a replayed log entry is (so fsx's trimming and alignment apply);
the size is checked after every rule, reads are compared, and ``teardown`` compares the
whole file. When a check fails, the failure carries the operation log as ``.fsxops``
text, and since Hypothesis re-raises the failure of the shrunk example, what is printed
is the shortest sequence it found, ready for ``--folio-fsx-replay``.

Profiles (no deadline: a real file system's latency is not a bug)::

    fsx-quick     25 examples of up to 50 operations (the suite's default)
    fsx-thorough  500 examples of up to 200 operations
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    get_state_machine_test,
    invariant,
    rule,
    run_state_machine_as_test,
)

from pytest_folio.fsx.config import QUICK, THOROUGH, FsxOptions
from pytest_folio.fsx.engine import FsxEngine, FsxFailure
from pytest_folio.fsx.log import (
    FL_CLOSE_OPEN,
    FL_KEEP_SIZE,
    FL_NONE,
    OP_COLLAPSE_RANGE,
    OP_COPY_RANGE,
    OP_FALLOCATE,
    OP_FSYNC,
    OP_INSERT_RANGE,
    OP_MAPREAD,
    OP_MAPWRITE,
    OP_PUNCH_HOLE,
    OP_READ,
    OP_TRUNCATE,
    OP_WRITE,
    OP_ZERO_RANGE,
    LogEntry,
    format_fsxops,
)
from pytest_folio.targets.protocols import FileSystem

_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile(QUICK, max_examples=25, stateful_step_count=50, deadline=None,
                          suppress_health_check=_HEALTH)
settings.register_profile(THOROUGH, max_examples=500, stateful_step_count=200,
                          deadline=None, suppress_health_check=_HEALTH)

_files = itertools.count()


class FsxStateFailure(FsxFailure):
    """An fsx failure found by the state machine; ``fsxops_text`` replays it."""

    def __init__(self, failure: FsxFailure, fsxops_text: str) -> None:
        super().__init__(f"{failure.summary}\nshrunk operation log (.fsxops):\n{fsxops_text}",
                         status=failure.status, badoff=failure.badoff, report=failure.report)
        self.summary = failure.summary
        self.fsxops_text = fsxops_text


class FsxMachine(RuleBasedStateMachine):
    """Subclass with :func:`fsx_machine` rather than directly: it sets the target."""

    filesystem: ClassVar[Callable[[], FileSystem]]
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

    def _op(self, op: int, offset: int, size: int, dest: int | None = None, *,
            keep_size: bool = False, close_open: bool = False) -> None:
        args = (offset, size, 0) if dest is None else (offset, size, dest, 0)
        flags = (FL_KEEP_SIZE if keep_size else FL_NONE) | (
            FL_CLOSE_OPEN if close_open else FL_NONE)
        self._guard(lambda: self.engine.step(LogEntry(op, args, flags)))

    # Offsets and lengths within fsx's limits, so shrinking heads for small numbers.
    _off = st.integers(0, options.maxfilelen - 1)
    _len = st.integers(0, options.maxoplen)
    _co = st.booleans()  # close and reopen the file after the operation (fsx's -c)

    @rule(offset=_off, size=_len, close_open=_co)
    def read(self, offset: int, size: int, close_open: bool) -> None:
        self._op(OP_READ, offset, size, close_open=close_open)

    @rule(offset=_off, size=_len, close_open=_co)
    def write(self, offset: int, size: int, close_open: bool) -> None:
        self._op(OP_WRITE, offset, size, close_open=close_open)

    @rule(offset=_off, size=_len, close_open=_co)
    def mapread(self, offset: int, size: int, close_open: bool) -> None:
        self._op(OP_MAPREAD, offset, size, close_open=close_open)

    @rule(offset=_off, size=_len, close_open=_co)
    def mapwrite(self, offset: int, size: int, close_open: bool) -> None:
        self._op(OP_MAPWRITE, offset, size, close_open=close_open)

    @rule(size=_off, close_open=_co)
    def truncate(self, size: int, close_open: bool) -> None:
        self._op(OP_TRUNCATE, 0, size, close_open=close_open)

    @rule(offset=_off, size=_len, keep_size=st.booleans(), close_open=_co)
    def fallocate(self, offset: int, size: int, keep_size: bool, close_open: bool) -> None:
        self._op(OP_FALLOCATE, offset, size, keep_size=keep_size, close_open=close_open)

    @rule(offset=_off, size=_len, close_open=_co)
    def punch_hole(self, offset: int, size: int, close_open: bool) -> None:
        self._op(OP_PUNCH_HOLE, offset, size, close_open=close_open)

    @rule(offset=_off, size=_len, keep_size=st.booleans(), close_open=_co)
    def zero_range(self, offset: int, size: int, keep_size: bool, close_open: bool) -> None:
        self._op(OP_ZERO_RANGE, offset, size, keep_size=keep_size, close_open=close_open)

    @rule(offset=_off, size=_len, close_open=_co)
    def collapse_range(self, offset: int, size: int, close_open: bool) -> None:
        self._op(OP_COLLAPSE_RANGE, offset, size, close_open=close_open)

    @rule(offset=_off, size=_len, close_open=_co)
    def insert_range(self, offset: int, size: int, close_open: bool) -> None:
        self._op(OP_INSERT_RANGE, offset, size, close_open=close_open)

    @rule(offset=_off, size=_len, dest=_off, close_open=_co)
    def copy_range(self, offset: int, size: int, dest: int, close_open: bool) -> None:
        # fsx's generate_dest_range(): the source inside the file, not overlapping dest
        file_size = self.engine.model.size
        offset = offset % file_size if file_size else 0
        size = min(size, file_size - offset)
        if abs(dest - offset) < size:
            dest = offset + size
        self._op(OP_COPY_RANGE, offset, size, dest, close_open=close_open)

    @rule(close_open=_co)
    def fsync(self, close_open: bool) -> None:
        self._op(OP_FSYNC, 0, 0, close_open=close_open)

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


def fsx_machine(filesystem: Callable[[], FileSystem],
                options: FsxOptions | None = None) -> type[FsxMachine]:
    """A state machine class testing the file systems ``filesystem()`` returns (called
    once per example; returning the same object is fine, each example uses a new file)."""
    attrs: dict[str, Any] = {"filesystem": staticmethod(filesystem)}
    if options is not None:
        attrs["options"] = options
    return type("FsxMachine", (FsxMachine,), attrs)


def run_fsx_machine(filesystem: Callable[[], FileSystem], options: FsxOptions | None = None,
                    profile: str = QUICK, *, seed: int | None = None) -> None:
    """Run the machine under a registered profile (``fsx-quick``, ``fsx-thorough``, or
    any profile of your own); raises :class:`FsxStateFailure` with the shrunk log.

    With ``seed`` (the suite passes the run's seed) the sequences Hypothesis tries are
    that seed's: the same seed tries the same ones again, another seed others."""
    machine = fsx_machine(filesystem, options)
    if seed is None:
        run_state_machine_as_test(machine, settings=settings.get_profile(profile))
        return
    hypothesis_seed(seed)(get_state_machine_test(
        machine, settings=settings.get_profile(profile)))()
