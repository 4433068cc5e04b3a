"""The suites over pytest-xdist's ssh gateway, as examples/xdist runs them on other hosts.

The test starts its own sshd on 127.0.0.1 (a free port, a host key and an authorized key
made in a temporary directory, stopped afterwards), runs the speed suite on two workers
reached through it (``--tx ssh=...//python=THIS_PYTHON``: this machine's interpreter,
with pytest-folio installed, as a remote host needs) and checks that the one saved run
holds every worker's rows. It skips, saying so, where sshd, ssh or ssh-keygen is missing
(Debian: openssh-server, openssh-client).
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_folio.timing.storage import load_run
from tests.helpers import subprocess_env

SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
SSHD, SSH, KEYGEN = (shutil.which(tool, path=SBIN) for tool in ("sshd", "ssh", "ssh-keygen"))
HOST = "folio-loopback"     # the ssh_config alias the gateways name
TIMEOUT = 300               # seconds for the whole distributed run

pytestmark = pytest.mark.skipif(
    not (SSHD and SSH and KEYGEN),
    reason="the ssh gateway test needs sshd, ssh and ssh-keygen "
           "(Debian: apt-get install openssh-server openssh-client)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> str:
    """A new passphrase-less ed25519 key at ``path``; its public half."""
    assert KEYGEN is not None
    subprocess.run([KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", "pytest-folio",
                    "-f", str(path)], check=True, timeout=60)
    return path.with_suffix(".pub").read_text()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """An sshd on 127.0.0.1 that lets this user in with a key of its own:
    (the ssh_config naming it ``folio-loopback``, sshd's log)."""
    assert SSHD is not None
    d = tmp_path / "ssh"
    d.mkdir(mode=0o700)
    host_pub = _keygen(d / "host_key")
    (d / "authorized_keys").write_text(_keygen(d / "client_key"))
    if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
        # sshd's privilege-separation directory, which the ssh service would create
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    port = _free_port()
    (d / "sshd_config").write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {d / "host_key"}
PidFile {d / "sshd.pid"}
AuthorizedKeysFile {d / "authorized_keys"}
# the keys live under /tmp, which is world-writable
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
LogLevel VERBOSE
""")
    (d / "known_hosts").write_text(f"{HOST} {host_pub}")
    (d / "ssh_config").write_text(f"""\
Host {HOST}
    HostName 127.0.0.1
    Port {port}
    User {getpass.getuser()}
    IdentityFile {d / "client_key"}
    IdentitiesOnly yes
    HostKeyAlias {HOST}
    UserKnownHostsFile {d / "known_hosts"}
    StrictHostKeyChecking yes
    BatchMode yes
    ConnectTimeout 20
""")
    log = d / "sshd.log"
    check = subprocess.run([SSHD, "-t", "-f", str(d / "sshd_config")],
                           capture_output=True, text=True, timeout=60)
    if check.returncode != 0:
        pytest.skip(f"sshd cannot run here: {check.stderr.strip() or check.stdout.strip()}")
    daemon = subprocess.Popen([SSHD, "-D", "-f", str(d / "sshd_config"), "-E", str(log)])
    try:
        deadline = time.monotonic() + 30
        while not _listening(port):
            assert daemon.poll() is None, f"sshd exited: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "sshd did not listen within 30 s"
            time.sleep(0.1)
        yield d / "ssh_config", log
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


def test_two_ssh_gateways_save_their_timings_into_one_run(
        sshd: tuple[Path, Path], tmp_path: Path) -> None:
    config, log = sshd
    controller, remote = tmp_path / "controller", tmp_path / "remote"
    controller.mkdir()
    remote.mkdir()
    gateway = f"ssh={HOST}//ssh_config={config}//python={sys.executable}//chdir={remote}"
    # Two items on two workers: xdist hands out fewer than two per worker round robin,
    # so each worker measures one folio size. Run from a directory of its own: xdist
    # refuses a bare argument naming a path there (a pytest_folio/ beside -p pytest_folio).
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_folio", "-p", "no:cacheprovider",
         "--pyargs", "pytest_folio.suites.test_mtd_speed",
         "--tx", gateway, "--tx", gateway, "--dist", "load", "--folio-orders=0,2",
         "--folio-mtd-size=1M", "--folio-erasesize=64K", "--folio-save=run.json",
         "-q", "-rfE"],
        cwd=controller, env=subprocess_env(), capture_output=True, text=True, timeout=TIMEOUT)
    output = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, output
    assert "2 passed" in proc.stdout, output
    assert log.read_text().count("Accepted publickey for") == 2, log.read_text()[-2000:]

    run = load_run(controller / "run.json")
    assert run.machine["xdist_workers"] == 2
    by_worker: dict[str, set[str]] = {}
    for record in run.records:
        by_worker.setdefault(record.worker, set()).add(record.params["folio"])
    # each worker's 14 speed rows, at the folio size it ran, in the one file
    assert by_worker.keys() == {"gw0", "gw1"}, output
    assert sorted(by_worker["gw0"] | by_worker["gw1"]) == ["16K", "4K"]
    assert len(run.records) == 2 * 14
    assert {r.host for r in run.records} == {socket.gethostname()}
