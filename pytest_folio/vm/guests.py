"""``vm --guests N``: N guests as the xdist workers of one pytest session on the host.

Each guest boots as ``vm`` boots one (the same kernel, modules, initramfs and disks of its
own), but instead of pytest its init runs :func:`pytest_folio.vm.gateway.serve` on a
virtio-serial port whose host end is a unix socket in the run's private directory. Once
every guest says it is listening, the host runs ONE pytest, the xdist controller, with a
``--tx popen//id=guestN//python=... gateway relay SOCKET`` per guest: collection, the
seed and the parameters are decided there, every worker's reports come back there, and
the summary, the skip summary, the timing table and ``--folio-save`` cover all guests.

A guest that panics, hangs (no console line, not even the init's heartbeat, for
:data:`HANG_AFTER` seconds) or runs out of time is killed; the relay then sees its end
close, xdist reports the test it was running as crashed and gives the tests it had not
started to the other guests, and the session goes on. Its console's last lines are kept
under ``--folio-failures``. Ctrl-C and SIGTERM kill every guest.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from pytest_folio.files import write_file
from pytest_folio.vm import VMError
from pytest_folio.vm.gateway import PORT_NAME
from pytest_folio.vm.guest import device_lines, size_map
from pytest_folio.vm.initramfs import MARK, GuestDisk, GuestJob, build_initramfs
from pytest_folio.vm.qemu import Disk, GuestRun, Machine, qemu_command, run_guest
from pytest_folio.vmabi import GUEST_TARGETS_ENV

if TYPE_CHECKING:
    from pytest_folio.vm.runner import VMRun

HANG_AFTER = 300.0     # seconds without a console line (the init says "alive" every 10 s)
EXIT_WAIT = 30.0       # a guest gets this long to power off once the session ended
SCREEN = 200           # console lines kept for a guest that went down: the whole panic
PLUGIN = "pytest_folio.vm.guestplugin"
PANIC_WORDS = ("Kernel panic", "BUG:", "Oops", "general protection fault", "WARNING:")


def guest_names(count: int) -> list[str]:
    return [f"guest{i}" for i in range(1, count + 1)]


def server_argv(python: str, name: str) -> list[str]:
    """What a guest's init runs instead of pytest."""
    return [python, "-m", "pytest_folio.vm.gateway", "serve", "--port", PORT_NAME,
            "--name", name]


def serving_guest(name: str, work: Path, busybox: Path, modules: list[tuple[str, bytes]],
                  job: GuestJob, machine: Machine, disks: list[tuple[Disk, GuestDisk]],
                  console: GuestConsole) -> Guest:
    """Guest ``name`` of a session, its disks and results share made under ``work/name``:
    its initramfs runs the worker server instead of ``job``'s argv (with a heartbeat,
    the bytecode share uncached: other guests write it too), its worker channel's socket
    is ``work/name.sock``."""
    where = work / name
    initrd = where / "initramfs.cpio"
    initrd.write_bytes(build_initramfs(busybox, modules, dataclasses.replace(
        job, argv=server_argv(sys.executable, name), disks=[g for _, g in disks],
        heartbeat=True, pycache_shared=True)))
    return Guest(name, dataclasses.replace(
        machine, initrd=initrd, out=where / "out", disks=tuple(d for d, _ in disks),
        worker_socket=work / f"{name}.sock"), console)


def tx_spec(python: str, name: str, sock: Path) -> str:
    """xdist's gateway spec for a guest: a popen worker whose python is the relay."""
    relay = " ".join(shlex.quote(a) for a in (python, "-m", "pytest_folio.vm.gateway",
                                               "relay", str(sock)))
    if "//" in relay:
        raise VMError(f"cannot name the relay to xdist: {relay!r} contains '//'")
    return f"popen//id={name}//python={relay}"


def controller_argv(head: list[str], sockets: dict[str, Path], pytest_args: list[str],
                    python: str = sys.executable,
                    remote: dict[str, str] | None = None) -> list[str]:
    """The host's pytest: ``head`` (pytest, the plugin, the guests' targets), xdist with
    one gateway per guest (``remote``: the gateway specs of guests on other machines),
    then the user's arguments (which come last and so win)."""
    return [*head, "-p", "xdist", "-p", PLUGIN, "--dist=load", "--max-worker-restart=0",
            *(f"--tx={tx_spec(python, name, sock)}" for name, sock in sockets.items()),
            *(f"--tx={spec}" for spec in (remote or {}).values()), *pytest_args]


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back until the block is done, then deliver them to the
    handlers they had: a process started in the block is known to whoever stops it
    (an interrupt inside ``Popen`` would leave a controller nobody terminates)."""
    held: list[int] = []
    kept = {signum: signal.signal(signum, lambda n, frame: held.append(n))
            for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for kind, handler in kept.items():  # None: one not set from Python
            signal.signal(kind, signal.SIG_DFL if handler is None else handler)
        for number in held[:1]:
            signal.raise_signal(number)


@dataclasses.dataclass
class ControllerPlan:
    """What the controller gets once the guests are up: arguments after the user's, its
    environment, and the gateway specs of guests on other machines."""

    args: list[str]
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    remote: dict[str, str] = dataclasses.field(default_factory=dict)


def ramfs_kept(marks: list[tuple[str, str]]) -> dict[int, str]:
    """The ramfs mounts a guest kept (its ``ramfs WHERE BLOCKSIZE ...`` lines): block
    size -> where."""
    kept = {}
    for key, value in marks:
        words = value.split()
        if key == "ramfs" and len(words) >= 2 and words[1].isdigit():
            kept[int(words[1])] = words[0]
    return kept


def ramfs_args(marks: list[tuple[str, str]]) -> list[str]:
    """``--folio-fs``/``--folio-block-sizes`` for the ramfs mounts a guest kept, as the
    guest's own pytest would get them."""
    kept = ramfs_kept(marks)
    return [f"--folio-fs={size_map(kept)}",
            f"--folio-block-sizes={','.join(f'{size >> 10}k' for size in kept)}"]


class GuestConsole:
    """One guest's console: marks recorded, device lines and anything after the start
    said on stderr with the guest's name (pytest's output comes from the controller)."""

    def __init__(self, name: str, err: TextIO, show_boot: bool) -> None:
        self.name, self.err, self.show_boot = name, err, show_boot
        self.tail: collections.deque[str] = collections.deque(maxlen=SCREEN)
        self.marks: list[tuple[str, str]] = []
        self.on_start: list[str] = []  # said once the guest loaded its modules
        self.last_seen = time.monotonic()
        self.lock = threading.Lock()

    def __call__(self, line: str) -> None:
        self.last_seen = time.monotonic()
        if line.startswith(MARK + " "):
            key, _, value = line[len(MARK) + 1:].partition(" ")
            if key == "alive":
                return
            self.marks.append((key, value))
            if key == "kernel":
                self.say(value.strip())
            elif key in ("mtd", "fs", "ramfs", "ramfs-skip"):
                for shown in device_lines(key, value):
                    self.say(shown)
            elif key == "start":
                for shown in self.on_start:
                    self.say(shown)
            return
        self.tail.append(line)
        if line.strip() and (self.show_boot or self.mark("start") is not None):
            self.say(line)

    def say(self, text: str) -> None:
        with self.lock:
            self.err.write(f"folio-vm: {self.name}: {text}\n")
            self.err.flush()

    def mark(self, key: str) -> str | None:
        found = [v for k, v in self.marks if k == key]
        return found[-1] if found else None

    def listening(self) -> bool:
        return self.mark("listening") is not None

    def done(self) -> bool:
        return self.mark("exit") is not None or self.mark("error") is not None

    def silent_for(self) -> float:
        return time.monotonic() - self.last_seen

    def screen(self) -> str:
        return "\n".join(self.tail) + "\n"

    def panic_line(self) -> str | None:
        found = [ln.strip() for ln in self.tail if any(w in ln for w in PANIC_WORDS)]
        return found[0] if found else None


@dataclasses.dataclass
class Guest:
    """One booted guest: its machine, console and how it ended."""

    name: str
    machine: Machine
    console: GuestConsole
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    hung: bool = False
    result: GuestRun | None = None
    error: str | None = None
    thread: threading.Thread | None = None

    @property
    def socket(self) -> Path:
        assert self.machine.worker_socket is not None
        return self.machine.worker_socket

    def ended(self) -> bool:
        return self.thread is not None and not self.thread.is_alive()

    def fault(self, timeout: float) -> str | None:
        """Why this guest went down before its worker was done; None: it did not."""
        if self.error is not None:
            return self.error
        if self.result is None or self.console.mark("exit") is not None:
            return None
        if self.result.ended == "stopped" and not self.hung:
            return None                     # the runner stopped it
        if self.console.mark("error") is not None:
            return f"failed: {self.console.mark('error')}"
        if self.hung:
            return f"hung: no console output for {HANG_AFTER:g} s (qemu killed)"
        if self.result.ended == "timeout":
            return f"did not finish within {timeout:g} s (qemu killed)"
        panic = self.console.panic_line()
        if panic is not None:
            return f"panicked: {panic}"
        return (f"qemu exited (status {self.result.returncode}) before the worker was "
                f"done: {self.console.tail[-1].strip() if self.console.tail else ''}")


class GuestSession:
    """Boot the guests, run the controller over them, stop them, report their faults."""

    def __init__(self, run: VMRun, qemu: str, guests: list[Guest],
                 failures: Path | None) -> None:
        self.run, self.qemu, self.guests, self.failures = run, qemu, guests, failures
        self.timeout = run.opts.timeout

    def boot(self, guest: Guest) -> None:
        def stop() -> bool:
            if guest.console.listening() and guest.console.silent_for() > HANG_AFTER:
                guest.hung = True
            return guest.stop.is_set() or guest.hung
        try:
            guest.result = run_guest(qemu_command(self.qemu, guest.machine), guest.console,
                                     timeout=self.timeout, done=guest.console.done,
                                     stop=stop)
        except VMError as exc:
            guest.error = str(exc)
        if guest.console.listening() and guest.fault(self.timeout) is not None:
            self.report(guest)      # at once: the session goes on without it

    def start(self) -> None:
        for guest in self.guests:
            self.run.progress(f"booting {guest.name} under {guest.machine.accel.upper()} "
                              f"({guest.machine.cpus} CPUs, {guest.machine.mem_mib} MiB)")
            guest.thread = threading.Thread(target=self.boot, args=(guest,),
                                            name=guest.name, daemon=True)
            guest.thread.start()

    def wait_listening(self) -> list[Guest]:
        """The guests whose worker channel is up; the others are reported."""
        waiting = list(self.guests)
        while waiting:
            waiting = [g for g in waiting if not g.console.listening() and not g.ended()]
            time.sleep(0.2)
        up = [g for g in self.guests if g.console.listening() and not g.ended()]
        for guest in self.guests:
            if guest not in up:
                self.report(guest)
        return up

    def hold(self, until: Callable[[list[Guest]], None]) -> list[Guest]:
        """Boot the guests and keep them up while ``until`` (given those that came up)
        runs; then let them power off. For a machine whose guests serve another's
        controller (:mod:`pytest_folio.vm.agent`)."""
        self.start()
        try:
            up = self.wait_listening()
            until(up)
            self.stop_all(EXIT_WAIT)
        finally:
            for guest in self.guests:
                guest.stop.set()
            self.stop_all()
        return up

    def stop_all(self, wait: float = 0.0) -> None:
        """Let the guests power off by themselves for ``wait`` seconds, then kill them."""
        deadline = time.monotonic() + wait
        for guest in self.guests:
            if guest.thread is not None:
                guest.thread.join(max(0.0, deadline - time.monotonic()))
            guest.stop.set()
        for guest in self.guests:
            if guest.thread is not None:
                guest.thread.join()

    def report(self, guest: Guest) -> None:
        """Say why ``guest`` went down and keep its console's last screen."""
        why = guest.fault(self.timeout) or "never came up"
        where = ""
        if self.failures is not None:
            path = self.failures / f"vm-{guest.name}-{time.strftime('%Y%m%d-%H%M%S')}" \
                / "console.txt"
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                write_file(path, guest.console.screen().encode())
                where = f" (its console's last {len(guest.console.tail)} lines: {path})"
        self.run.progress(f"{guest.name} {why}{where}")

    def controller(self, argv: list[str], env: dict[str, str]) -> int:
        """Run the host's pytest; Ctrl-C and SIGTERM reach here as KeyboardInterrupt
        (the runner turns SIGTERM into one) and take the controller down too."""
        env = {**self.run.environ, **env, GUEST_TARGETS_ENV: "1"}
        proc = None
        try:
            with deferred_interrupts():     # none lands between the fork and ``proc``
                proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
            return proc.wait()
        except KeyboardInterrupt:
            for guest in self.guests:
                guest.stop.set()
            if proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(EXIT_WAIT)
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            raise

    def execute(self, head: list[str], pytest_args: list[str],
                after: Callable[[list[Guest]], ControllerPlan]) -> int:
        """The whole session; the controller's exit status. The controller's arguments:
        ``head``, xdist's, ``pytest_args``, then the plan ``after`` makes for the guests
        that came up."""
        self.start()
        try:
            up = self.wait_listening()
            plan = after(up)
            if not up and not plan.remote:
                raise VMError("no guest came up: " + "; ".join(
                    f"{g.name} {g.fault(self.timeout) or 'never came up'}"
                    for g in self.guests))
            names = [*(g.name for g in up), *plan.remote]
            self.run.progress(f"{len(names)} guest(s) listening after "
                              f"{time.monotonic() - self.run.clock:.1f} s: "
                              f"{', '.join(names)}")
            argv = controller_argv(head, {g.name: g.socket for g in up},
                                   [*pytest_args, *plan.args], remote=plan.remote)
            status = self.controller(argv, plan.env)
            self.stop_all(EXIT_WAIT)
        finally:
            for guest in self.guests:
                guest.stop.set()
            self.stop_all()
        return status
