"""``vm --host ssh=HOST``: guests of one matrix booted on another machine, over ssh.

Loopback: the test starts its own sshd on 127.0.0.1 (the fixture of the ssh gateway
test; skipped, saying so, where sshd, ssh or ssh-keygen is missing) and the "other
machine" is this one reached through it, its agent finding the stand-in qemu through a
python wrapper that sets its PATH (an ssh session does not inherit this process's).
One guest boots here, one through ssh; one session runs over both.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_folio.cli import main
from pytest_folio.vm.agent import RemoteHost, agent_request
from pytest_folio.vm.gateway import ssh_command
from pytest_folio.vm.matrix import (
    HostSpec,
    parse_guest_spec,
    parse_host_spec,
    spread_guests,
)
from tests.helpers.vm import alive
from tests.timing.test_timing_ssh import HOST, KEYGEN, SSH, SSHD, sshd  # noqa: F401
from tests.vm.test_vm_guests import in_directory
from tests.vm.test_vm_matrix import fake  # noqa: F401  (the fixture)

needs_sshd = pytest.mark.skipif(
    not (SSHD and SSH and KEYGEN),
    reason="the loopback host test needs sshd, ssh and ssh-keygen "
           "(Debian: apt-get install openssh-server openssh-client)")


def test_a_host_spec_is_xdists_gateway_syntax() -> None:
    assert parse_host_spec("ssh=lab1//python=/usr/bin/python3//cache=/var/cache/f") \
        == HostSpec("lab1", "/usr/bin/python3", None, "/var/cache/f")
    assert parse_host_spec("ssh=lab2") == HostSpec("lab2")


@pytest.mark.parametrize(("args", "message"), [
    (["--host", "python=/usr/bin/python3"], "--host python=/usr/bin/python3: needs ssh=HOST"),
    (["--host", "ssh=lab1//colour=red"], "--host ssh=lab1//colour=red: unknown key 'colour'"),
    (["--host", "ssh=-oProxyCommand=x"], "ssh=-oProxyCommand=x: not a host name"),
    (["--host", "ssh=lab1", "--host", "ssh=lab1//python=py"], "ssh=lab1 given twice"),
    (["--host", "ssh=lab1", "--guest", "fs=xfs"], "--host ssh=lab1 boots no guest: place "
                                                  "guests there with host=lab1"),
    (["--guests", "1", "--host", "ssh=lab1", "--host", "ssh=lab2"],
     "--guests 1 leaves --host ssh=lab2 without a guest: give at least one guest per --host"),
    (["--guests", "2", "--host", "ssh=lab1", "--build-kernel", "debian:sid"],
     "--guests with --host and --build-kernel do not go together yet"),
])
def test_a_bad_host_is_one_usage_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      args: list[str], message: str) -> None:
    status = main(["vm", "--cache-dir", str(tmp_path / "cache"), *args])
    err = capsys.readouterr().err
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_guests_over_hosts_go_to_the_hosts_first_then_here() -> None:
    hosts = (HostSpec("lab1"), HostSpec("lab2"))
    assert [g.host for g in spread_guests(5, hosts)] == ["lab1", "lab2", None, "lab1",
                                                         "lab2"]
    # what the agent gets: a SPEC it parses into the same guest
    assert [parse_guest_spec(g.text) for g in spread_guests(2, hosts)] \
        == list(spread_guests(2, hosts))


def test_the_remote_command_survives_the_remote_shell() -> None:
    """ssh joins its arguments into one shell line: execnet's bootstrap (quotes,
    semicolons, parentheses) must reach the relay as one argument."""
    boot = "import sys;exec(eval(sys.stdin.readline()))"
    cmd = ssh_command("lab1", None, ["/opt/py thon", "-m", "x", "-c", boot])
    assert cmd[:-1] == ["ssh", "-T", "-o", "BatchMode=yes", "lab1"]
    assert subprocess.run(["sh", "-c", f"printf '%s\\n' {cmd[-1]}"], capture_output=True,
                          text=True, check=True).stdout.splitlines() == \
        ["/opt/py thon", "-m", "x", "-c", boot]
    relay = RemoteHost.__new__(RemoteHost)
    relay.host = HostSpec("lab1", "/opt/py", "/etc/ssh cfg")
    assert relay.tx_spec("guest3", Path("/tmp/s/guest3.sock")) == (
        f"popen//id=guest3//python={sys.executable} -m pytest_folio.vm.gateway ssh-relay "
        "--ssh-config '/etc/ssh cfg' --python /opt/py lab1 /tmp/s/guest3.sock")


@needs_sshd
def test_one_session_over_a_guest_here_and_one_through_ssh(
        sshd: tuple[Path, Path], fake: Path,  # noqa: F811
        capfd: pytest.CaptureFixture[str]) -> None:
    config, _ = sshd
    python = fake / "remote-python"
    python.write_text(f"#!/bin/sh\nexport PATH={fake / 'bin'}:$PATH FAKE_DIR={fake} "
                      f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    status = main(["vm", "--kernel", str(fake / "bzImage"), "--cache-dir", str(fake / "cache"),
                   "--timeout", "120", "--accel", "tcg", "--guest", "block-sizes=4k",
                   "--guest", f"kernel={fake / 'bzImage2'},block-sizes=4k+16k,host={HOST}",
                   "--host", f"ssh={HOST}//python={python}//ssh_config={config}"
                             f"//cache={fake / 'remote-cache'}",
                   "--", "test_matrix.py", "-p", "no:randomly", "-v", "-k",
                   "not down and not kernel"])
    out, err = capfd.readouterr()
    assert status == 0, out + err
    # the remote guest was prepared with the other machine's cache, its lines naming it
    assert f"folio-vm: {HOST}: guest2: kernel 7.2.0-other, ramfs" in err
    assert (fake / "remote-cache" / "pycache").is_dir()
    assert "folio-vm: 2 guest(s) listening after" in err
    ran = {item: guest for guest, item in re.findall(
        r"^\[(guest\d)\] .*PASSED test_matrix.py::(test_fs\[[^\]]+\])", out, re.M)}
    assert ran == {"test_fs[4K-ramfs@6.1.0-test]": "guest1",
                   "test_fs[4K-ramfs@7.2.0-other]": "guest2",
                   "test_fs[16K-ramfs@7.2.0-other]": "guest2"}, out
    assert " 4 passed" in out.splitlines()[-1], out
    assert not any(alive(int(pid)) for pid in (fake / "qemu.pid").read_text().split())


SPREAD_TESTS = """
import os, time, pytest

@pytest.mark.parametrize("i", range(6))
def test_fs(filesystem, i):
    time.sleep(1)
    assert os.path.isdir(filesystem.root)
"""


@needs_sshd
def test_guests_spread_over_a_host_and_here_share_one_session(
        sshd: tuple[Path, Path], fake: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """--guests 3 --host: guests 1 and 3 boot through ssh, guest 2 here, all of one
    kernel: one group whose items they share. (The stand-in guests keep their ramfs at
    one path, as real guests do: a group's targets are one set of paths.)"""
    config, _ = sshd
    (fake / "test_spread.py").write_text(SPREAD_TESTS)
    monkeypatch.setenv("FAKE_SHARED_RAMFS", "1")
    python = fake / "remote-python"
    python.write_text(f"#!/bin/sh\nexport PATH={fake / 'bin'}:$PATH FAKE_DIR={fake} "
                      "FAKE_SHARED_RAMFS=1 "
                      f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    status = main(["vm", "--kernel", str(fake / "bzImage"), "--cache-dir", str(fake / "cache"),
                   "--timeout", "120", "--accel", "tcg", "--guests", "3",
                   "--host", f"ssh={HOST}//python={python}//ssh_config={config}"
                             f"//cache={fake / 'remote-cache'}",
                   "--", "test_spread.py", "-p", "no:randomly", "-v",
                   "--folio-block-sizes=4k"])
    out, err = capfd.readouterr()
    assert status == 0, out + err
    for guest in ("guest1", "guest3"):
        assert f"folio-vm: {HOST}: {guest}: kernel 6.1.0-test, ramfs" in err, err
    assert "folio-vm: guest2: kernel 6.1.0-test, ramfs" in err, err
    assert "folio-vm: 3 guest(s) listening after" in err, err
    assert re.search(r"^folio: guests guest\d,guest\d,guest\d: ramfs@6.1.0-test, ", out,
                     re.M), out
    ran = re.findall(r"^\[(guest[123])\] .*PASSED test_spread.py::(\S+)", out, re.M)
    assert sorted(item for _, item in ran) == [
        f"test_fs[4K-{i}-ramfs@6.1.0-test]" for i in range(6)], out
    assert {guest for guest, _ in ran} == {"guest1", "guest2", "guest3"}, out
    assert " 6 passed" in out.splitlines()[-1], out
    assert not any(alive(int(pid)) for pid in (fake / "qemu.pid").read_text().split())


@needs_sshd
def test_an_agent_that_cannot_boot_leaves_the_session_to_the_others(
        sshd: tuple[Path, Path], fake: Path,  # noqa: F811
        capfd: pytest.CaptureFixture[str]) -> None:
    """A host whose kernel= IMAGE is not there: its agent says why on stderr and ends;
    the guest here runs the session alone."""
    config, _ = sshd
    status = main(["vm", "--kernel", str(fake / "bzImage"), "--cache-dir", str(fake / "cache"),
                   "--timeout", "120", "--accel", "tcg", "--guest", "block-sizes=4k",
                   "--guest", f"kernel={fake / 'missing'},host={HOST}",
                   "--host", f"ssh={HOST}//python={sys.executable}//ssh_config={config}"
                             f"//cache={fake / 'remote-cache'}",
                   "--", "test_matrix.py", "-p", "no:randomly"])
    out, err = capfd.readouterr()
    assert status == 0, out + err
    assert f"folio-vm agent: error: --kernel {fake / 'missing'}: no such file" in err, err
    assert f"host {HOST}: its agent ended (status 125) before its guests were up" in err
    assert "folio-vm: 1 guest(s) listening after" in err


def test_the_agent_request_carries_the_guests_options(tmp_path: Path) -> None:
    opts = SimpleNamespace(kernel=tmp_path / "bz", suite=None, modules=None, mtd_size=1,
                           erasesize=2, fs="xfs", mem_mib=3, cpus=4, timeout=5.0,
                           accel="tcg", console=False, kernel_args="", mtd_tests=True,
                           pytest_args=["-x"])
    request = json.loads(agent_request(opts, "lab1", [("guest2", parse_guest_spec("fs=ext4"))]))
    assert request["host"] == "lab1"
    assert request["guests"] == [["guest2", "fs=ext4"]]
    assert request["options"]["kernel"] == str(tmp_path / "bz")
    # a remote guest builds the kernel's mtd tests from its own tree too
    assert request["options"]["mtd_tests"] is True
    assert request["pytest_args"] == ["-x"]


SLOW_TESTS = """
import os, time

def test_slow(filesystem):
    guest = os.environ["PYTEST_FOLIO_GUEST"]
    open(os.path.join(os.environ["FAKE_DIR"], "started-" + guest), "w").close()
    time.sleep(120)
"""


@needs_sshd
def test_sigterm_stops_the_guests_here_and_on_the_host(
        sshd: tuple[Path, Path], fake: Path) -> None:  # noqa: F811
    """SIGTERM mid-session: exit 143, and no guest, worker, agent or controller is
    left on either side (each had this test's directory as its working directory)."""
    config, _ = sshd
    (fake / "test_slow.py").write_text(SLOW_TESTS)
    python = fake / "remote-python"
    python.write_text(f"#!/bin/sh\nexport PATH={fake / 'bin'}:$PATH FAKE_DIR={fake} "
                      f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1\nexec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    script = f"""
import sys
from pytest_folio.cli import main
from pytest_folio.vm import runner
runner.find_busybox = lambda: runner.Path({str(fake / "busybox")!r})
runner.kvm_usable = lambda: False
runner.warm_bytecode = lambda argv, prefix, environ: 0.0
sys.exit(main(["vm", "--kernel", "bzImage", "--cache-dir", "cache", "--accel", "tcg",
               "--guest", "block-sizes=4k", "--guest", "kernel=bzImage2,host={HOST}",
               "--host", "ssh={HOST}//python={python}//ssh_config={config}//cache=rcache",
               "--", "test_slow.py"]))
"""
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=fake, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not all((fake / f"started-{g}").exists() for g in ("guest1", "guest2")):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(proc.communicate())
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 143, out + err
    assert err.strip().splitlines()[-1] == "python -m pytest_folio vm: terminated (qemu killed)"
    time.sleep(0.5)
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in in_directory(fake)}
    assert left == {}, "left behind"
    assert not any(alive(int(pid)) for pid in (fake / "qemu.pid").read_text().split())
