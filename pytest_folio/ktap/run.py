"""Run KTAP-speaking programs (the kernel's selftests) and make their output one KTAP log,
then hand it to pytest: the guest's side of ``python -m pytest_folio vm --ktap``.

::

    python -m pytest_folio.ktap.run --out LOG [--timeout S] \\
        [--program NAME=PATH [--directory NAME=WHERE]]... [--missing NAME=REASON]... \\
        -- PYTEST-ARGS...

Each program runs in turn with its output nested under one top-level test named for it,
every line stamped with the time it arrived (``[   12.345678] ``, as the kernel's console
does), so that ``--folio-ktap`` reads the tests' nesting, outcomes and durations. The
exit status decides the top-level result as the kselftest runner's does: 0 passes, 4
(``KSFT_SKIP``) skips, a timeout or any other status fails. A program the host could not
build is a skipped test with the build's reason; the tests are numbered in the order
given. ``--directory NAME=WHERE`` gives the program named NAME a directory for its
page-cache cases as its one argument: a fresh directory made in WHERE (a scratch file
system's mount point; removed afterwards), or, for ``tmpfs:OPTIONS``, a tmpfs mounted
with those options in a mount namespace of the program's own. Then pytest runs with
``--folio-ktap`` naming the log, beside whatever else the command line asks for.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pytest_folio.files import write_file

KSFT_SKIP = 4
DEBUGFS = "/sys/kernel/debug"
TMPFS = "tmpfs:"
SHMEM_THP = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
PRIVATE_MOUNT = "/tmp/folio-pagecache"   # in the program's own mount namespace only


@dataclasses.dataclass(frozen=True)
class Entry:
    """One top-level test of the log: a program (``path``, given a directory for its
    page-cache cases when ``where`` is set), or one that cannot run (``reason``)."""

    name: str
    path: str = ""
    reason: str = ""
    where: str = ""


class _Stamper:
    """A program's output lines, each with the time it arrived."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.lines: list[str] = []

    def stamp(self) -> str:
        return f"[{time.monotonic() - self.start:12.6f}] "

    def read(self, stream: object) -> None:
        assert hasattr(stream, "readline")
        for raw in iter(stream.readline, b""):
            self.lines.append(self.stamp() + "  " + raw.decode("utf-8", "replace").rstrip())


def run_program(number: int, entry: Entry, timeout: float, stamper: _Stamper) -> None:
    """Run one program; its output (indented: its tests are this test's subtests) and
    its result line go to ``stamper``."""
    name = entry.name
    why = unusable(entry.where)
    if why is not None:
        stamper.lines.append(f"{stamper.stamp()}ok {number} {name} # SKIP {why}")
        return
    scratch = None
    if entry.where and not entry.where.startswith(TMPFS):
        try:
            scratch = tempfile.mkdtemp(prefix="ktap-", dir=entry.where)
        except OSError as exc:
            stamper.lines.append(f"{stamper.stamp()}not ok {number} {name} # ERROR cannot "
                                 f"make a directory in {entry.where}: {exc.strerror}")
            return
    try:
        fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            proc = subprocess.Popen(command(entry.path, fd, entry.where, scratch), cwd="/",
                                    pass_fds=(fd,), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        finally:
            os.close(fd)
        result = _wait(proc, number, name, timeout, stamper)
    except OSError as exc:
        result = f"not ok {number} {name} # ERROR cannot start it: {exc.strerror}"
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)   # ours, made above
    stamper.lines.append(stamper.stamp() + result)


def _wait(proc: subprocess.Popen[bytes], number: int, name: str, timeout: float,
          stamper: _Stamper) -> str:
    """Read ``proc``'s output into ``stamper`` until it ends; its result line."""
    reader = threading.Thread(target=stamper.read, args=(proc.stdout,), daemon=True)
    reader.start()
    try:
        status = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join(5)
        return f"not ok {number} {name} # TIMEOUT {timeout:g} seconds"
    reader.join(5)
    if status == 0:
        return f"ok {number} {name}"
    if status == KSFT_SKIP:
        return f"ok {number} {name} # SKIP exit status 4 (KSFT_SKIP)"
    if status < 0:
        return f"not ok {number} {name} # killed by {signal.Signals(-status).name}"
    return f"not ok {number} {name} # exit={status}"


def unusable(where: str) -> str | None:
    """Why a program cannot have its page-cache directory at ``where`` here (a skip
    reason), or None."""
    if not where:
        return None
    if where.startswith(TMPFS):
        options = where[len(TMPFS):]
        if os.geteuid() != 0 or not all(map(shutil.which, ("unshare", "mount", "mkdir"))):
            return (f"a tmpfs mounted -o {options} of its own needs root, unshare(1) and "
                    "mount(8)")
        if "huge=" in options and not os.path.exists(SHMEM_THP):
            return (f"this kernel's tmpfs takes no huge= option (no {SHMEM_THP}: "
                    "CONFIG_TRANSPARENT_HUGEPAGE is off)")
        return None
    if not os.path.isdir(where):
        return f"{where} is not a directory"
    return None


def command(path: str, fd: int, where: str = "", scratch: str | None = None) -> list[str]:
    """The command that runs the program at ``path`` (open as ``fd``), with ``scratch``
    (or, for ``where`` = ``tmpfs:OPTIONS``, such a tmpfs) as its argument. It gets a
    fresh tmpfs of its own on /tmp (its working directory too) when /tmp cannot be
    written, as in a guest, whose /tmp is the host's, read-only: the selftests make
    their files and mounts there. ``unshare`` gives it a mount namespace of its own, so
    nothing else sees these mounts; the program runs through its descriptor, as the
    tmpfs may hide its path."""
    args = [scratch] if scratch else []
    setup = []
    if where.startswith(TMPFS):
        setup = ["mount -t tmpfs tmpfs /tmp", f"mkdir {PRIVATE_MOUNT}",
                 f"mount -t tmpfs -o {shlex.quote(where[len(TMPFS):])} tmpfs "
                 f"{PRIVATE_MOUNT}"]
        args = [PRIVATE_MOUNT]
    unshare = shutil.which("unshare")
    if not setup and (unshare is None or os.geteuid() != 0 or os.access("/tmp", os.W_OK)):
        return [path, *args]
    setup = setup or ["mount -t tmpfs tmpfs /tmp"]
    script = " && ".join([*setup, "cd /tmp", f'exec /proc/self/fd/{fd} "$@"'])
    return [unshare or "unshare", "--mount", "--propagation", "private", "sh", "-c", script,
            "sh", *args]


def write_log(out: Path, entries: list[Entry], timeout: float) -> None:
    """Run the programs of ``entries`` in turn and write the one KTAP log of them."""
    stamper = _Stamper(time.monotonic())
    stamper.lines += [stamper.stamp() + "KTAP version 1",
                      stamper.stamp() + f"1..{len(entries)}"]
    for number, entry in enumerate(entries, 1):
        if entry.path:
            run_program(number, entry, timeout, stamper)
        else:
            stamper.lines.append(f"{stamper.stamp()}ok {number} {entry.name} # SKIP "
                                 f"{entry.reason}")
    write_file(out, "\n".join(stamper.lines) + "\n")


def mount_debugfs() -> None:
    """Mount debugfs where the mm selftests look for it, when it is not (a guest's
    fresh /sys); they say so themselves if it cannot be had."""
    if os.path.ismount(DEBUGFS) or not os.path.isdir(DEBUGFS):
        return
    subprocess.run(["mount", "-t", "debugfs", "none", DEBUGFS], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"NAME=VALUE, not {text!r}")
    return name, value


def _program(text: str) -> Entry:
    name, path = _pair(text)
    return Entry(name, path=path)


def _missing(text: str) -> Entry:
    name, reason = _pair(text)
    return Entry(name, reason=reason or "no reason given")


def entries_of(args: argparse.Namespace,
               parser: argparse.ArgumentParser) -> list[Entry]:
    """The tests in the order given, each ``--directory`` joined to its program."""
    entries: list[Entry] = args.entries
    for name, where in args.directory:
        at = [i for i, e in enumerate(entries) if e.name == name and e.path]
        if len(at) != 1:
            parser.error(f"--directory {name}={where}: no one --program named {name!r}")
        entries[at[0]] = dataclasses.replace(entries[at[0]], where=where)
    return entries


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_folio.ktap.run")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--program", dest="entries", type=_program, action="append",
                        default=[], metavar="NAME=PATH")
    parser.add_argument("--missing", dest="entries", type=_missing, action="append",
                        metavar="NAME=REASON")
    parser.add_argument("--directory", type=_pair, action="append", default=[],
                        metavar="NAME=DIR|tmpfs:OPTIONS")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    entries = entries_of(args, parser)
    rest = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    mount_debugfs()
    write_log(args.out, entries, args.timeout)
    pytest = [sys.executable, "-m", "pytest", *rest, f"--folio-ktap={args.out}"]
    os.execv(sys.executable, pytest)
    return 1      # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
