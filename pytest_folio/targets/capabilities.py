"""What a target supports: every optional call the suites use, declared once.

A target needs only its protocol (:class:`~.targets.protocols.MTDDevice`,
:class:`~.targets.protocols.FileSystem`); each optional call in :data:`CAPABILITIES`
adds checks. A declaration names the call's protocol (its signature), what it unlocks,
what the suites do without it and, for a file system, the feature names it gives. Every
answer to "what does this target support?" comes from it: :func:`supports` and
:func:`features_of` (what the suites and fsx ask), :func:`offered` (the run's header and
``python -m pytest_folio check SPEC``), the differential's ``supported`` (its features
plus what only a probe can tell) and the table in docs/architecture.md
(:func:`markdown_table`; a test keeps the two equal). :func:`signature_problem` checks
a target's calls against the protocols, as a call would use them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import inspect
import os
import typing
from collections.abc import Callable
from typing import Any

from pytest_folio.linux.uapi import FALLOC_FEATURE_MODE, FALLOC_MODE_FEATURE
from pytest_folio.targets.protocols import (
    ChunkedMTD,
    CopyFileRange,
    Directories,
    DropCaches,
    DropDeviceCaches,
    Fallocate,
    FileSystem,
    HasBadBlocks,
    HasFeatures,
    HasFolioOrder,
    HasOOB,
    HasStats,
    MappedIO,
    MTDDevice,
    PowerCut,
    PowerCutUnit,
    RealDevice,
    Reopenable,
    Unmountable,
    protocol_members,
)
from pytest_folio.terminal.textwidth import WIDTH, wrap

KINDS = {"mtd": MTDDevice, "fs": FileSystem}      # the core protocol of each kind


@dataclasses.dataclass(frozen=True)
class Capability:
    """One optional call: the protocol the suites ask for (None: a keyword of the
    factory, not a call of the target), what it unlocks and what the suites do without
    it (``code`` in backquotes, shown plain on a terminal), and for a file system the
    names :func:`features_of` gives for it (``narrowable``: a target's ``features`` may
    narrow them)."""

    kind: str                       # "mtd" or "fs"
    protocol: type | None
    unlocks: str
    without: str
    features: tuple[str, ...] = ()
    narrowable: bool = False
    keyword: str = ""               # the factory keyword, when protocol is None

    @property
    def name(self) -> str:
        """The call as a user writes it: ``reopen()``, ``drop_caches(path)``,
        ``stats.snapshot()``, ``power_cut_unit`` (from the protocol)."""
        return self.keyword if self.protocol is None else members_text(self.protocol)

    def text(self, field: str) -> str:
        """``unlocks`` or ``without`` for a terminal: without the backquotes."""
        return str(getattr(self, field)).replace("`", "")


CAPABILITIES = (
    Capability("mtd", Reopenable,
               "fsx for flash closes and opens the device between operations (what was "
               "synced must still be there)",
               "fsx for flash never reopens the device"),
    Capability("mtd", DropDeviceCaches,
               "fsx for flash's drop operation, and the race suite's droppers on a "
               "device of a factory (the cached folios are forgotten while writers run)",
               "fsx for flash never drops, and the race suite skips on a factory's "
               "device"),
    Capability("mtd", PowerCut,
               "the power-cut suites (`-k power`): what was synced survives a power "
               "failure",
               "the power-cut suites skip"),
    Capability("mtd", PowerCutUnit,
               "the power-cut suites check that a cut leaves each aligned unit of this "
               "size all old or all new (a folio, when written back as one)",
               "a page is promised"),
    Capability("mtd", HasStats,
               "`test_speed` records the model's counters (compound_head calls, folio "
               "lookups, bytes copied) beside every time",
               "speed rows carry times only"),
    Capability("mtd", HasBadBlocks,
               "the suites skip bad eraseblocks, as the kernel's mtd tests do",
               "every eraseblock is taken for good"),
    Capability("mtd", HasOOB,
               "mtd_readtest reads each page's out-of-band bytes too",
               "the read test reads data only"),
    Capability("mtd", HasFolioOrder,
               "a device's own folio order places fsx for flash's folio boundaries and "
               "labels its measurements when a test has no order",
               "the test's folio order, or none"),
    Capability("mtd", ChunkedMTD,
               "`test_speed` moves an eraseblock in one call, into buffers the caller "
               "keeps",
               "one read or write per driver-sized piece: the same passes, more Python "
               "calls"),
    Capability("mtd", RealDevice,
               "`True`: suites that erase and write need `--folio-allow-destructive`",
               "taken for a device that may be written"),
    Capability("mtd", None,
               "the factory makes a read-only device: the read-only checks "
               "(`test_readonly_device_refuses_every_write_and_erase`)",
               "the read-only checks skip", keyword="readonly=True"),
    Capability("fs", MappedIO,
               "fsx's mapread and mapwrite, the EOF-page checks, mapped writes in the "
               "semantics suites", "those operations are skipped (fsx counts them)",
               features=("mmap",), narrowable=True),
    Capability("fs", Fallocate,
               "fsx's fallocate, punch hole, zero, collapse and insert range; the "
               "fallocate and st_blocks checks", "those operations and checks are skipped",
               features=("fallocate", "punch_hole", "zero_range", "collapse_range",
                         "insert_range"), narrowable=True),
    Capability("fs", CopyFileRange,
               "fsx's copy range, the copy tests", "those are skipped",
               features=("copy_range",), narrowable=True),
    Capability("fs", Directories,
               "the directory tests of the namespace suites, directories in the "
               "differential", "those are skipped, and every name is in the root",
               features=("directories",)),
    Capability("fs", DropCaches,
               "fsx's close and reopen drops the file's cached folios (fsx's `echo 3 > "
               "drop_caches`), so data lost between the cache and the backing store "
               "shows, at 16K and 64K blocks too; the differential drops too",
               "close and reopen keep the cache: writeback and read-in bugs may stay "
               "hidden", features=("drop_caches",)),
    Capability("fs", PowerCut,
               "the power-cut suites (`-k power`): what was fsync'd survives a power "
               "failure",
               "the power-cut suites skip"),
    Capability("fs", PowerCutUnit,
               "the power-cut suites check that a cut leaves each aligned unit of this "
               "size all old or all new (a block, when written back as one)",
               "a page is promised"),
    Capability("fs", Unmountable,
               "called after each test, also a failed one, so the file system can check "
               "itself and free what it holds",
               "the file system is dropped without a tear-down"),
)

# The feature names a file system's ``features`` may narrow (a fallocate that only
# punches holes lists {"fallocate", "punch_hole"}).
FS_FEATURES = frozenset(f for c in CAPABILITIES if c.narrowable for f in c.features)


def _is_call(protocol: type, member: str) -> bool:
    return callable(getattr(protocol, member, None))


def _parameters(call: Callable[..., Any]) -> list[inspect.Parameter]:
    """A protocol call's parameters, ``self`` left out."""
    return list(inspect.signature(call).parameters.values())[1:]


class _Optional:
    """A default shown as ``...``: the protocol says a parameter may be left out, not
    what it must default to."""

    def __repr__(self) -> str:
        return "..."


def _call_text(member: str, params: list[inspect.Parameter]) -> str:
    """A call as Python writes it (``*args``, ``/``, ``*`` and defaults included),
    without annotations."""
    return f"{member}{inspect.Signature([p.replace(annotation=p.empty) for p in params])}"


def call_text(protocol: type, member: str, optional: bool = False) -> str:
    """One call of ``protocol`` as a user writes it: ``mkdir(path, mode)``, with
    ``optional`` ``mkdir(path, mode=...)``."""
    marker = _Optional() if optional else inspect.Parameter.empty
    return _call_text(member, [p if p.default is p.empty else p.replace(default=marker)
                               for p in _parameters(getattr(protocol, member))])


def members_text(protocol: type) -> str:
    """A protocol's members as a user writes them: calls with their parameters'
    names, attributes bare, an attribute that is a protocol with its calls
    (``stats.snapshot()``)."""
    hints = typing.get_type_hints(protocol)
    parts = []
    for member in protocol_members(protocol):
        if _is_call(protocol, member):
            parts.append(call_text(protocol, member))
        elif getattr(hints.get(member), "_is_protocol", False):
            parts.append(f"{member}.{members_text(hints[member])}")
        else:
            parts.append(member)
    return ", ".join(parts)


def supports(obj: object, protocol: type) -> bool:
    """Whether ``obj`` has every member of ``protocol`` (FileSystemBase's EOPNOTSUPP
    defaults count as left out)."""
    if not isinstance(obj, protocol):
        return False
    return not any(getattr(getattr(obj, name, None), "__folio_unsupported__", False)
                   for name in protocol_members(protocol))


def features_of(fs: object) -> frozenset[str]:
    """What the suites may use of file system ``fs``, as feature names: those of the
    optional calls it has (:data:`CAPABILITIES`), the :data:`FS_FEATURES` among them
    narrowed by its ``features`` when it lists them."""
    have = {feature for c in CAPABILITIES if c.protocol is not None and c.features
            and supports(fs, c.protocol) for feature in c.features}
    if isinstance(fs, HasFeatures):
        have -= FS_FEATURES - frozenset(fs.features)
    return frozenset(have)


# What a file system answers for a fallocate mode or copy it has the call for but not
# the mode (tmpfs: collapse, insert and zero range), as fsx's probe takes it.
UNSUPPORTED_ERRNOS = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.ENOTTY})
_PROBE_NAME = ".folio-feature-probe"
# every mode a fallocate feature stands for is tried, as fsx tries allocation with and
# without KEEP_SIZE apart (its fallocate_calls and keep_size_calls): libfuse's
# passthrough, and the FUSE file systems made from it, allocate with mode 0 and answer
# EOPNOTSUPP for every other mode
_FEATURE_MODES = {feature: [m for m, f in FALLOC_MODE_FEATURE.items() if f == feature]
                  for feature in FALLOC_FEATURE_MODE}


def working_features(fs: Any) -> frozenset[str]:
    """:func:`features_of`, less the fallocate modes and ``copy_range`` that a target
    which does not list its ``features`` answers with EOPNOTSUPP (or ENOSYS) on a
    scratch file, as Linux file systems answer for a mode they lack; that scratch file
    is removed again. A target listing ``features`` is taken at its word."""
    have = set(features_of(fs))
    probes = [f for f in (*FALLOC_FEATURE_MODE, "copy_range") if f in have]
    if isinstance(fs, HasFeatures) or not probes:
        return frozenset(have)
    bs = fs.blocksize
    try:
        fd = fs.open(_PROBE_NAME, os.O_RDWR | os.O_CREAT | os.O_EXCL)
    except OSError:
        return frozenset(have)
    try:
        for feature in probes:
            for mode in _FEATURE_MODES.get(feature, [None]):
                try:
                    fs.ftruncate(fd, 0)
                    fs.pwrite(fd, b"\xa5" * (4 * bs), 0)
                    if mode is None:
                        fs.copy_file_range(fd, fd, bs, 0, 2 * bs)
                    else:
                        fs.fallocate(fd, mode, bs, bs)
                except OSError as exc:
                    if exc.errno in UNSUPPORTED_ERRNOS:
                        have.discard(feature)
                        if mode == 0:       # no fallocate at all: no mode either
                            have -= set(FALLOC_FEATURE_MODE)
                        break
    finally:
        with contextlib.suppress(OSError):
            fs.close(fd)
        with contextlib.suppress(OSError):
            fs.unlink(_PROBE_NAME)
    return frozenset(have)


def takes_readonly(factory: Callable[..., Any] | None) -> bool:
    """Whether a factory can be asked for a read-only device (``readonly=`` or
    ``**kwargs``; whether it honours it is the read-only checks' to find); None, the
    reference (which can)."""
    if factory is None:
        return True
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "readonly" or p.kind is p.VAR_KEYWORD for p in params)


def offered(obj: object, kind: str,
            factory: Callable[..., Any] | None = None) -> list[tuple[Capability, bool]]:
    """Every capability of ``kind`` (mtd, fs) with whether ``obj`` (made by ``factory``,
    for the factory's own capabilities; None for the reference) offers it."""
    return [(c, takes_readonly(factory) if c.protocol is None else supports(obj, c.protocol))
            for c in CAPABILITIES if c.kind == kind]


def _call_problem(obj: object, protocol: type, member: str) -> str | None:
    """Whether ``obj``'s ``member`` can be called as the protocol's is: with each
    number of positional arguments from the required ones to all of them. Where
    Python leaves a choice, any is taken: more optional parameters, ``*args``,
    ``**kwargs``, other parameter names, a bound method or a callable object."""
    call = getattr(obj, member)
    if not callable(call):
        return f"{member} is {type(call).__name__}, not a call"
    try:
        params = list(inspect.signature(call).parameters.values())
    except (TypeError, ValueError):     # a builtin without one: nothing to check
        return None
    signature = inspect.Signature(params)
    expected = _parameters(getattr(protocol, member))
    required = sum(p.default is p.empty for p in expected)
    for count in range(required, len(expected) + 1):
        try:
            signature.bind(*range(count))
        except TypeError as exc:
            return (f"{_call_text(member, params)} cannot be called "
                    "as the protocol's "
                    f"{call_text(protocol, member, optional=True)} with {count} argument"
                    f"{'' if count == 1 else 's'} ({exc})")
    return None


def signature_problem(obj: object, kind: str) -> str | None:
    """The first call of ``obj`` (an MTD device or file system, by ``kind``) that cannot
    be called as its protocol says, as the end of a sentence; the core protocol's calls
    and those of the optional calls it offers are checked. None when all can."""
    protocols_of = [KINDS[kind], *(c.protocol for c in CAPABILITIES if c.kind == kind
                                   and c.protocol is not None and supports(obj, c.protocol))]
    checked: set[str] = set()
    for protocol in protocols_of:
        for member in protocol_members(protocol):
            if member in checked or not _is_call(protocol, member):
                continue
            checked.add(member)
            problem = _call_problem(obj, protocol, member)
            if problem is not None:
                return f"returned {type(obj).__name__}, whose {problem}"
    return None


def lacking_line(rows: list[tuple[Capability, bool]]) -> str:
    """One line: what a target lacks and what the suites therefore skip, each
    separated by "; " (no ``without`` holds one: the header splits there)."""
    missing = [f"{c.name} ({c.text('without')})" for c, has in rows if not has]
    return "lacks " + "; ".join(missing) if missing else "offers every optional call"


def table(rows: list[tuple[Capability, bool]], width: int = WIDTH) -> str:
    """The capabilities for a terminal, each a block of lines within ``width``
    columns: offered (yes or no) and the call, then what it unlocks."""
    lines = ["offered  optional call: what it unlocks (without it: ...)"]
    for capability, has in rows:
        lines += wrap(f"{'yes' if has else 'no':<7}  {capability.name}", width,
                      " " * 13)
        what = capability.text("unlocks")
        if not has:
            what += f" (without it: {capability.text('without')})"
        lines += wrap("         " + what, width, " " * 9)
    return "\n".join(lines)


def markdown_table() -> str:
    """The table of docs/architecture.md, made from :data:`CAPABILITIES`."""
    lines = ["| optional call | protocol | kind | unlocks | without it |",
             "|---|---|---|---|---|"]
    for c in CAPABILITIES:
        name = f"`{c.name}`" if c.protocol is not None else f"`{c.name}` (a factory keyword)"
        protocol = f"`{c.protocol.__name__}`" if c.protocol is not None else "-"
        if c.features:
            protocol += " (feature" + ("s " if len(c.features) > 1 else " ") + ", ".join(
                f"`{f}`" for f in c.features) + ")"
        lines.append(f"| {name} | {protocol} | {c.kind.upper()} | {c.unlocks} | "
                     f"{c.without} |")
    return "\n".join(lines)

