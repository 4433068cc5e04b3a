"""fsx's options: lengths, alignment, operation toggles and close/open probability.

The defaults are fsx's (256 KiB file, 64 KiB operations, byte alignment, every operation
on) with two exceptions: ``quiet`` is on, because pytest shows the output only on failure
anyway, and the file is closed and reopened after 1 in 16 operations (fsx: never unless
``-c``), because writes lost at close are a bug class of their own; ``-c 0`` turns that
off.
:func:`parse_fsx_args` reads fsx's own command-line flags, so an xfstests invocation such
as ``-q -l 1m -o 128k -c 4 -W`` carries over unchanged.
"""

from __future__ import annotations

import dataclasses
import getopt
import shlex
from collections.abc import Sequence
from typing import Any

from pytest_folio.hypothesis_budget import profile_name

DEFAULT_MAXFILELEN = 256 * 1024
DEFAULT_MAXOPLEN = 64 * 1024

# The Hypothesis profiles of the state machine (pytest_folio.fsx.machine), by name: the
# machine imports Hypothesis, so the names live here for callers that only pass them on.
QUICK = profile_name("fsx", "quick")
THOROUGH = profile_name("fsx", "thorough")


@dataclasses.dataclass(frozen=True)
class FsxOptions:
    """One fsx run's parameters; the fsx flag that sets each is in its comment."""

    numops: int = 10000              # -N: operations to run
    seed: int = 1                    # -S: random seed
    maxfilelen: int = DEFAULT_MAXFILELEN  # -l: upper bound on the file size
    maxoplen: int = DEFAULT_MAXOPLEN      # -o: upper bound on an operation's length
    readbdy: int = 1                 # -r: read (and copy source) alignment
    truncbdy: int = 1                # -t: truncate alignment
    writebdy: int = 1                # -w: write (and copy destination) alignment
    closeprob: int = 16              # -c P: close and reopen after 1 in P (0: never)
    style: int = 0                   # -s 1: truncate to the (small) operation length
    randomoplen: bool = True         # -O turns off: every operation is maxoplen long
    sizechecks: bool = True          # -n turns off: no size check after each operation
    check_file: bool = False         # -X: compare the whole file after each operation
    pollute_eof: bool = False        # -e 1: junk past EOF before each size change
    flush: bool = False              # -f: fsync and drop the cache after each operation
    do_fsync: bool = False           # -y: fsync after every write
    quiet: bool = True               # -q: no "skipping ..." chatter
    mapped_reads: bool = True        # -R turns off: mapread becomes read
    mapped_writes: bool = True       # -W turns off: mapwrite becomes write
    fallocate_calls: bool = True     # -F turns off
    keep_size_calls: bool = True     # -K turns off FALLOC_FL_KEEP_SIZE variants
    punch_hole_calls: bool = True    # -H turns off
    zero_range_calls: bool = True    # -z turns off
    collapse_range_calls: bool = True  # -C turns off
    insert_range_calls: bool = True  # -I turns off
    copy_range_calls: bool = True    # -E turns off
    fsync_calls: bool = True         # -Y turns off (fsx runs fsync only with -i)

    def __post_init__(self) -> None:
        for name in ("maxfilelen", "maxoplen", "readbdy", "truncbdy", "writebdy"):
            if getattr(self, name) <= 0:
                raise ValueError(f"fsx {name} must be positive, not {getattr(self, name)}")
        if self.numops < 0:
            raise ValueError(f"fsx numops must not be negative, not {self.numops}")
        if self.closeprob < 0:
            raise ValueError(f"fsx closeprob must not be negative, not {self.closeprob}")
        if self.style not in (0, 1):
            raise ValueError(f"fsx style must be 0 or 1, not {self.style}")
        if self.maxfilelen >= 1 << 31 or self.maxoplen >= 1 << 31:
            raise ValueError("fsx lengths must stay below 2 GiB, as fsx's 32-bit log does")

    def replace(self, **changes: Any) -> FsxOptions:
        return dataclasses.replace(self, **changes)


def getnum(text: str) -> int:
    """fsx's getnum(): C integer syntax with an optional b (512), k, m or w (4) suffix."""
    scale = {"b": 512, "k": 1024, "m": 1 << 20, "w": 4}.get(text[-1:].lower(), 1)
    body = text[:-1] if scale != 1 else text
    try:
        if body.lower().startswith(("0x", "-0x")):
            return int(body, 16) * scale
        if len(body.lstrip("-")) > 1 and body.lstrip("-").startswith("0"):
            return int(body, 8) * scale
        return int(body, 10) * scale
    except ValueError:
        raise ValueError(f"fsx: not a number: {text!r}") from None


_VALUE_FLAGS = {"N": "numops", "S": "seed", "l": "maxfilelen", "o": "maxoplen",
                "r": "readbdy", "t": "truncbdy", "w": "writebdy", "c": "closeprob",
                "s": "style"}
_ON_FLAGS = {"X": "check_file", "y": "do_fsync", "q": "quiet", "f": "flush"}
_BOOL_VALUE_FLAGS = {"e": "pollute_eof"}      # fsx's -e takes 0 or 1
_OFF_FLAGS = {"O": "randomoplen", "n": "sizechecks", "R": "mapped_reads",
              "W": "mapped_writes", "F": "fallocate_calls", "K": "keep_size_calls",
              "H": "punch_hole_calls", "z": "zero_range_calls", "C": "collapse_range_calls",
              "I": "insert_range_calls", "E": "copy_range_calls", "Y": "fsync_calls"}

# fsx's flags that turn off what this engine never does, accepted and ignored so an
# xfstests command line carries over: -a atomic writes, -T dontcache I/O, -J clone
# range, -B dedupe range, -0 exchange range, -u unshare range.
NOOP_FLAGS = {"a": "atomic writes", "T": "dontcache I/O", "J": "clone range",
              "B": "dedupe range", "0": "exchange range", "u": "unshare range"}


def parse_fsx_args(args: str | Sequence[str], base: FsxOptions | None = None) -> FsxOptions:
    """Apply fsx command-line flags (``"-l 1m -o 128k -c 4 -W"``) on top of ``base``.

    Flags that make no sense against a FileSystem object (-Z O_DIRECT, -A AIO, file
    names, ...) are refused with a one-line ValueError rather than silently ignored.
    """
    argv = shlex.split(args) if isinstance(args, str) else list(args)
    shortopts = "".join(f"{flag}:" for flag in (*_VALUE_FLAGS, *_BOOL_VALUE_FLAGS)) + "".join(
        _ON_FLAGS) + "".join(_OFF_FLAGS) + "".join(NOOP_FLAGS)
    try:
        pairs, rest = getopt.getopt(argv, shortopts)
    except getopt.GetoptError as exc:
        raise ValueError(f"fsx arguments {' '.join(argv)!r}: {exc.msg}") from None
    if rest:
        raise ValueError(f"fsx arguments: unexpected {' '.join(rest)!r} (no file name here)")
    changes: dict[str, Any] = {}
    for flag, value in pairs:
        letter = flag[1:]
        if letter in _VALUE_FLAGS:
            changes[_VALUE_FLAGS[letter]] = getnum(value)
        elif letter in _BOOL_VALUE_FLAGS:
            if value not in ("0", "1"):
                raise ValueError(f"fsx -{letter} takes 0 or 1, not {value!r}")
            changes[_BOOL_VALUE_FLAGS[letter]] = value == "1"
        elif letter in _ON_FLAGS:
            changes[_ON_FLAGS[letter]] = True
        elif letter in NOOP_FLAGS:
            continue
        else:
            changes[_OFF_FLAGS[letter]] = False
    return (base or FsxOptions()).replace(**changes)


# What changes how a replayed operation runs: the alignment and the operations turned off
# (the other flags choose random operations, or add checks).
_REPLAY_VALUE_FLAGS = ("r", "t", "w")
_REPLAY_OFF_FLAGS = ("R", "W", "F", "K", "H", "z", "C", "I", "E", "Y")


def replay_flags(options: FsxOptions) -> str:
    """The fsx flags, of those that change what a replayed log does, that ``options``
    sets away from fsx's defaults (``"-r 4096 -t 4096 -w 4096"``; ``""`` for none)."""
    default = FsxOptions()
    words = [f"-{flag} {getattr(options, _VALUE_FLAGS[flag])}" for flag in _REPLAY_VALUE_FLAGS
             if getattr(options, _VALUE_FLAGS[flag]) != getattr(default, _VALUE_FLAGS[flag])]
    words += [f"-{flag}" for flag in _REPLAY_OFF_FLAGS if not getattr(options, _OFF_FLAGS[flag])]
    return " ".join(words)
