"""Run KTAP-speaking programs (the kernel's selftests) and make their output one KTAP log,
then hand it to pytest: the guest's side of ``python -m pytest_folio vm --ktap``.

::

    python -m pytest_folio.ktap.run --out LOG [--timeout S] \\
        [--program NAME=PATH]... [--missing NAME=REASON]... -- PYTEST-ARGS...

Each program runs in turn with its output nested under one top-level test named for it,
every line stamped with the time it arrived (``[   12.345678] ``, as the kernel's console
does), so that ``--folio-ktap`` reads the tests' nesting, outcomes and durations. The
exit status decides the top-level result as the kselftest runner's does: 0 passes, 4
(``KSFT_SKIP``) skips, a timeout or any other status fails. A program the host could not
build is a skipped test with the build's reason. Then pytest runs with ``--folio-ktap``
naming the log, beside whatever else the command line asks for.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pytest_folio.files import write_file

KSFT_SKIP = 4
DEBUGFS = "/sys/kernel/debug"


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


def run_program(number: int, name: str, path: str, timeout: float,
                stamper: _Stamper) -> None:
    """Run one program; its output (indented: its tests are this test's subtests) and
    its result line go to ``stamper``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            proc = subprocess.Popen(private_tmp(path, fd), cwd="/", pass_fds=(fd,),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            os.close(fd)
    except OSError as exc:
        stamper.lines.append(f"{stamper.stamp()}not ok {number} {name} # ERROR cannot "
                             f"start it: {exc.strerror}")
        return
    reader = threading.Thread(target=stamper.read, args=(proc.stdout,), daemon=True)
    reader.start()
    try:
        status = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join(5)
        stamper.lines.append(f"{stamper.stamp()}not ok {number} {name} # TIMEOUT "
                             f"{timeout:g} seconds")
        return
    reader.join(5)
    if status == 0:
        result = f"ok {number} {name}"
    elif status == KSFT_SKIP:
        result = f"ok {number} {name} # SKIP exit status 4 (KSFT_SKIP)"
    elif status < 0:
        result = f"not ok {number} {name} # killed by {signal.Signals(-status).name}"
    else:
        result = f"not ok {number} {name} # exit={status}"
    stamper.lines.append(stamper.stamp() + result)


def private_tmp(path: str, fd: int) -> list[str]:
    """The command that runs the program at ``path`` (open as ``fd``) with a fresh tmpfs
    of its own on /tmp (its working directory too) when /tmp cannot be written, as in a
    guest, whose /tmp is the host's, read-only: the selftests make their files and mounts
    there. ``unshare`` gives it a mount namespace of its own, so nothing else sees that
    tmpfs; the program runs through its descriptor, as the tmpfs may hide its path."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0 or os.access("/tmp", os.W_OK):
        return [path]
    return [unshare, "--mount", "--propagation", "private", "sh", "-c",
            f"mount -t tmpfs tmpfs /tmp && cd /tmp && exec /proc/self/fd/{fd}"]


def write_log(out: Path, programs: list[tuple[str, str]], missing: list[tuple[str, str]],
              timeout: float) -> None:
    """Run ``programs`` and write the one KTAP log of them (and of ``missing``)."""
    stamper = _Stamper(time.monotonic())
    stamper.lines += [stamper.stamp() + "KTAP version 1",
                      stamper.stamp() + f"1..{len(programs) + len(missing)}"]
    for number, (name, path) in enumerate(programs, 1):
        run_program(number, name, path, timeout, stamper)
    for number, (name, reason) in enumerate(missing, len(programs) + 1):
        stamper.lines.append(f"{stamper.stamp()}ok {number} {name} # SKIP {reason}")
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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_folio.ktap.run")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--program", type=_pair, action="append", default=[])
    parser.add_argument("--missing", type=_pair, action="append", default=[])
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    rest = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    mount_debugfs()
    write_log(args.out, args.program, args.missing, args.timeout)
    pytest = [sys.executable, "-m", "pytest", *rest, f"--folio-ktap={args.out}"]
    os.execv(sys.executable, pytest)
    return 1      # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
