"""``vm --host ssh=HOST``: the guests of a matrix that another machine boots.

The controller's machine runs ``ssh HOST PYTHON -m pytest_folio.vm.agent REQUEST`` per
host, REQUEST being one JSON argument: the working directory, the ``vm`` options that
shape a guest, the pytest arguments (for the orders and block sizes) and the guests
placed there, by name and SPEC. The agent prepares and boots them as ``vm --guest``
would here, with that machine's kernel cache, and says on stdout, one line each, which
came up: ``@@folio-lab up NAME SOCKET GROUP-JSON``, then ``@@folio-lab ready``. Its
progress goes to stderr, which ssh passes through. The controller's workers reach each
guest with :func:`pytest_folio.vm.gateway.ssh_relay`; when the session ends the
controller closes the agent's stdin, and the agent lets its guests power off (or kills
them) and exits. The working directory, this package and the tests must be at the same
path on every machine, as for xdist's ssh gateways without rsync.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_folio.errors import CommandError
from pytest_folio.terminal.progress import step
from pytest_folio.vm import EXIT_VM_ERROR, VMError, cache_root
from pytest_folio.vm.gateway import ssh_command
from pytest_folio.vm.guests import EXIT_WAIT
from pytest_folio.vm.matrix import Group, GuestSpec, HostSpec, parse_guest_spec

UP = "@@folio-lab up"
READY = "@@folio-lab ready"
# the options of VMOptions an agent's guests are made with
FORWARDED = ("kernel", "suite", "modules", "mtd_size", "erasesize", "fs", "mem_mib",
             "cpus", "timeout", "accel", "console", "kernel_args", "mtd_tests")


def agent_request(opts: Any, host: str, named: list[tuple[str, GuestSpec]]) -> str:
    """The REQUEST for ``host`` booting ``named`` (``opts``: the run's VMOptions)."""
    options = {key: getattr(opts, key) for key in FORWARDED}
    options = {k: str(v) if isinstance(v, Path) else v for k, v in options.items()}
    return json.dumps({"cwd": os.getcwd(), "host": host, "options": options,
                       "pytest_args": opts.pytest_args,
                       "guests": [[name, spec.text] for name, spec in named]})


class RemoteHost:
    """One ``--host``'s agent, started at once so its guests boot beside ours."""

    def __init__(self, host: HostSpec, request: str) -> None:
        self.host = host
        remote = [*shlex.split(host.python), "-m", "pytest_folio.vm.agent", request]
        if host.cache is not None:
            remote.append(host.cache)
        self.proc = subprocess.Popen(ssh_command(host.ssh, host.ssh_config, remote),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def wait_ready(self, progress: Any) -> dict[str, tuple[Path, Group]]:
        """The guests that came up there: name -> (socket there, group). An agent that
        ends before it is ready is said in one line; its guests are left out."""
        assert self.proc.stdout is not None
        up: dict[str, tuple[Path, Group]] = {}
        for line in self.proc.stdout:
            if line.startswith(UP + " "):
                name, sock, group = line[len(UP) + 1:].rstrip("\n").split(" ", 2)
                up[name] = (Path(sock), Group.from_data(json.loads(group)))
            elif line.strip() == READY:
                return up
        status = self.proc.wait()
        progress(f"host {self.host.ssh}: its agent ended (status {status}) before its "
                 "guests were up; the session goes on without them")
        return {}

    def tx_spec(self, name: str, sock: Path) -> str:
        """xdist's gateway for guest ``name`` there: a popen worker whose python is
        the ssh relay."""
        relay = [sys.executable, "-m", "pytest_folio.vm.gateway", "ssh-relay",
                 *(["--ssh-config", self.host.ssh_config] if self.host.ssh_config else []),
                 "--python", self.host.python, self.host.ssh, str(sock)]
        text = " ".join(shlex.quote(a) for a in relay)
        if "//" in text:
            raise VMError(f"cannot name the relay to xdist: {text!r} contains '//'")
        return f"popen//id={name}//python={text}"

    def close(self) -> None:
        """The session is over (or interrupted): hang up, so the agent stops its
        guests; kill ssh when it does not end."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(EXIT_WAIT + 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def main(argv: list[str]) -> int:
    """``python -m pytest_folio.vm.agent REQUEST [CACHE_DIR]``: boot the guests asked
    for, report them, hold them until stdin ends."""
    from pytest_folio.vm.runner import VMRun
    from pytest_folio.vm.vmoptions import VMOptions, check_cache

    parser = argparse.ArgumentParser(
        prog="python -m pytest_folio.vm.agent",
        description="boot guests for a vm --host controller (it runs this over ssh)")
    parser.add_argument("request", help="the controller's JSON request")
    parser.add_argument("cache", nargs="?", type=Path, help="the kernel cache to use")
    args = parser.parse_args(argv)
    try:
        request = json.loads(args.request)
        options = {key: request["options"][key] for key in FORWARDED}
        host = str(request["host"])
        named = [(str(name), parse_guest_spec(text)) for name, text in request["guests"]]
        os.chdir(request["cwd"])
    except (ValueError, KeyError, TypeError, OSError) as exc:
        parser.error(f"not a request from vm --host: {exc}")
    for key in ("kernel", "modules"):
        if options[key] is not None:
            options[key] = Path(options[key])
    cache = args.cache or cache_root()

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, terminate)
    try:
        check_cache(cache)
        opts = VMOptions(**options, cache_dir=cache, dmesg=None,
                         pytest_args=list(request["pytest_args"]),
                         guest_specs=tuple(s for _, s in named))
        vm = VMRun(opts, out=sys.stderr)
        vm.where = host
        with vm.lab() as lab:
            lab.hold(named, sys.stdout, sys.stdin)
    except (VMError, CommandError) as exc:
        step(f"folio-vm agent: error: {exc}", sys.stderr)
        return EXIT_VM_ERROR
    except KeyboardInterrupt:
        step("folio-vm agent: terminated (qemu killed)", sys.stderr)
        return 128 + signal.SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
