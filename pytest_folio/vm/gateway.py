"""The channel between an xdist controller on the host and a worker in a guest.

xdist starts a ``popen`` worker by running its ``python`` with ``-u -c BOOTSTRAP`` and
talking execnet's protocol over that process's stdin and stdout. For a guest, that
``python`` is :func:`relay` (``python -m pytest_folio.vm.gateway relay SOCKET``): it
connects to the guest's channel, a virtio-serial port whose host end is a unix socket in
the run's private directory, sends one header line (the arguments it was given) and then
copies bytes both ways. In the guest, :func:`serve` (``python -m pytest_folio.vm.gateway
serve --port NAME``) waits on that port, reads the header and replaces itself by
``python -u -c BOOTSTRAP`` with the port as its stdin and stdout: from then on the guest
runs an ordinary popen worker. A unix socket stands in for the port where there is no
guest (``serve --listen SOCKET``: the tests run it as a local subprocess).

A unix socket in a directory only this user may enter needs no secret: nobody else can
reach the worker, which runs as root in the guest and may write the bytecode cache the
host reuses.

A guest on another machine (``vm --host``) is reached the same way, one hop further:
xdist's ``python`` is :func:`ssh_relay` (``... gateway ssh-relay HOST SOCKET``), which
replaces itself by ``ssh HOST PYTHON -m pytest_folio.vm.gateway relay SOCKET ARGS`` with
the remote command quoted for the remote shell (ssh joins its arguments into one
command line, which would break execnet's bootstrap), so the relay runs on that machine
beside the guest's socket.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import shlex
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pytest_folio.vmabi import MARK

PORT_NAME = "org.pytest-folio.worker"   # the virtserialport's name in the guest
VIRTIO_PORTS = Path("/sys/class/virtio-ports")
CONNECT_TIMEOUT = 30.0                   # the relay waits this long for the socket
POLL = 0.2                               # the port reads 0 bytes until the host connects
GUEST_ENV = "PYTEST_FOLIO_GUEST"         # the guest's name, for its worker's reports


def find_port(name: str, ports: Path = VIRTIO_PORTS) -> Path:
    """The /dev node of the virtio-serial port called ``name`` (sysfs names it)."""
    for entry in sorted(ports.glob("vport*")):
        with contextlib.suppress(OSError):
            if (entry / "name").read_text().strip() == name:
                return Path("/dev") / entry.name
    raise SystemExit(f"{MARK} error no virtio-serial port {name} (needs "
                     "CONFIG_VIRTIO_CONSOLE)")


def _read_header(fd: int, wait: bool) -> bytes | None:
    """One line read a byte at a time (nothing after it may be taken from the worker's
    stream); None when the other end went away first. ``wait``: a virtio port reads 0
    bytes until the host connects, so an empty first read means "not yet"."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            if wait and not line:
                time.sleep(POLL)
                continue
            return None
        line += byte
    return line


def _become_worker(fd: int, header: bytes) -> None:
    """Replace this process by the worker xdist asked for, reading and writing ``fd``."""
    args = json.loads(header)["argv"]
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise SystemExit(f"{MARK} error bad worker header {header[:80]!r}")
    os.dup2(fd, 0)
    os.dup2(fd, 1)
    if fd > 1:
        os.close(fd)
    os.execv(sys.executable, [sys.executable, *args])


def serve(port: Path | None, listen: Path | None, name: str) -> None:
    """Wait for the host's relay on the guest's port (or a unix socket), then become the
    worker: one worker per guest, for the whole session."""
    os.environ[GUEST_ENV] = name
    if port is not None:
        socket.sethostname(name)    # the timing collector names the machine by it
        fd = os.open(port, os.O_RDWR)
        print(f"{MARK} listening {name} {port}", flush=True)
        while True:                 # the host end may connect, and drop, before xdist
            header = _read_header(fd, wait=True)
            if header is not None:
                _become_worker(fd, header)
    assert listen is not None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(listen))
        server.listen()
        print(f"{MARK} listening {name} {listen}", flush=True)
        conn, _ = server.accept()
    header = _read_header(conn.fileno(), wait=False)
    if header is None:
        raise SystemExit(f"{MARK} error the host hung up before naming the worker")
    _become_worker(os.dup(conn.fileno()), header)


def connect(path: Path, timeout: float = CONNECT_TIMEOUT,
            wanted: Callable[[], bool] = lambda: True) -> socket.socket | None:
    """Connect to the guest's socket, waiting while it is not there yet; None when
    ``wanted`` says nobody waits for it any more, or the run's directory is gone (the
    controller removed it on its way out: Ctrl-C or SIGTERM during start-up)."""
    deadline = time.monotonic() + timeout
    while True:
        if not path.parent.is_dir():
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if time.monotonic() >= deadline:
                raise
            if not wanted():
                return None
            time.sleep(POLL)


def relay(path: Path, argv: list[str]) -> int:
    """xdist's worker ``python``: forward ``argv`` and then stdin and stdout to the
    guest; ends when the guest's end closes (the worker exited, or the guest died)."""
    parent = os.getppid()
    try:
        # the controller (xdist) started us; when it is gone (Ctrl-C, SIGTERM while the
        # guests were still coming up), nobody waits for this worker
        sock = connect(path, wanted=lambda: os.getppid() == parent)
    except OSError as exc:
        print(f"pytest-folio relay: cannot reach the guest at {path}: {exc.strerror}",
              file=sys.stderr)
        return 1
    if sock is None:    # the controller has said why the session ended
        return 1
    stdin, stdout = sys.stdin.buffer.fileno(), sys.stdout.buffer.fileno()
    sock.sendall(json.dumps({"argv": argv}).encode() + b"\n")
    with selectors.DefaultSelector() as sel:
        sel.register(stdin, selectors.EVENT_READ)
        sel.register(sock, selectors.EVENT_READ)
        while True:
            for key, _ in sel.select():
                if key.fileobj == stdin:
                    data = os.read(stdin, 65536)
                    if not data:        # the controller closed the worker's stdin
                        sel.unregister(stdin)
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_WR)
                        continue
                    sock.sendall(data)
                else:
                    data = sock.recv(65536)
                    if not data:
                        return 0
                    os.write(stdout, data)


def ssh_command(host: str, ssh_config: str | None, remote: list[str]) -> list[str]:
    """``ssh`` running ``remote`` on ``host``, quoted for its shell; no tty, no prompt."""
    return ["ssh", "-T", "-o", "BatchMode=yes", *(["-F", ssh_config] if ssh_config else []),
            host, shlex.join(remote)]


def ssh_relay(host: str, ssh_config: str | None, python: str, path: Path,
              argv: list[str]) -> None:
    """xdist's worker ``python`` for a guest on ``host``: become ssh running the relay
    there (stdin and stdout, execnet's stream, pass through ssh)."""
    command = ssh_command(host, ssh_config, [*shlex.split(python), "-m",
                                             "pytest_folio.vm.gateway", "relay", str(path),
                                             *argv])
    os.execvp(command[0], command)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_folio.vm.gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="in the guest: wait for the host, become a worker")
    where = s.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", help="the virtio-serial port's name")
    where.add_argument("--listen", type=Path, help="a unix socket (a stand-in guest)")
    s.add_argument("--name", required=True, help="the guest's name (the worker's id)")
    r = sub.add_parser("relay", help="on the host: xdist's python for a guest's worker")
    r.add_argument("socket", type=Path)
    r.add_argument("args", nargs=argparse.REMAINDER)
    h = sub.add_parser("ssh-relay", help="on the host: xdist's python for a guest of "
                                         "another machine")
    h.add_argument("--ssh-config", help="ssh's -F")
    h.add_argument("--python", default="python3", help="that machine's python")
    h.add_argument("host")
    h.add_argument("socket", type=Path)
    h.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    if opts.command == "relay":
        return relay(opts.socket, opts.args)
    if opts.command == "ssh-relay":
        ssh_relay(opts.host, opts.ssh_config, opts.python, opts.socket, opts.args)
    serve(find_port(opts.port) if opts.port else None, opts.listen, opts.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
