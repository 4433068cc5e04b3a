"""``vm --guests N``: the guests as xdist workers of one session on the host.

Without qemu: the worker server (:mod:`pytest_folio.vm.gateway`) runs as a local
subprocess on a unix socket, standing in for a guest, and one controller pytest runs over
two of them; and a stand-in qemu plays each guest for the whole subcommand.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_folio.cli import main
from pytest_folio.vm import guests
from pytest_folio.vm.gateway import PORT_NAME, find_port
from pytest_folio.vm.guests import PLUGIN, controller_argv, ramfs_args, server_argv, tx_spec
from pytest_folio.vm.initramfs import GuestJob, init_script
from pytest_folio.vm.qemu import Machine, qemu_command
from tests.helpers.vm import FAKE_GUEST_START, alive, fake_machine
from tests.vm.test_vm_boot import MISSING, leftover_qemus

PY = sys.executable

TESTS = """
import os, time, pytest

@pytest.mark.parametrize("i", range(8))
def test_item(i):
    time.sleep(0.3)
    assert os.environ["PYTEST_FOLIO_GUEST"] in ("guest1", "guest2")

def test_crash():
    os._exit(3)          # the worker dies, as it does when its guest goes down
"""


@pytest.fixture
def standins(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """Two worker servers on unix sockets, as two guests would run them."""
    procs, sockets = [], {}
    for name in ("guest1", "guest2"):
        sock = tmp_path / f"{name}.sock"
        procs.append(subprocess.Popen(
            [PY, "-m", "pytest_folio.vm.gateway", "serve", "--listen", str(sock), "--name",
             name], stdout=subprocess.PIPE, cwd=tmp_path))
        sockets[name] = sock
    for proc, (name, sock) in zip(procs, sockets.items(), strict=True):
        assert proc.stdout is not None
        assert proc.stdout.readline().decode() == f"@@folio-vm listening {name} {sock}\n"
    yield sockets
    for proc in procs:
        proc.kill()
        proc.wait()


def controller(tmp_path: Path, sockets: dict[str, Path], *args: str
               ) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_split.py").write_text(TESTS)
    argv = controller_argv([PY, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                            "pytest_folio"], sockets, ["test_split.py", *args])
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def per_guest(out: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^    (guest\d) \(kernel [^)]+\): ran "
                                                 r"(\d+) test", out, re.M)}


def test_one_session_splits_its_items_over_two_standin_guests(
        tmp_path: Path, standins: dict[str, Path]) -> None:
    proc = controller(tmp_path, standins, "-k", "item", "-v", "-rP")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    # one summary for the whole session, each item reported once
    assert len(re.findall(r"^=+ 8 passed", out, re.M)) == 1, out
    ran = per_guest(out)
    assert set(ran) == {"guest1", "guest2"} and all(ran.values()), out
    assert sum(ran.values()) == 8
    # each guest's busy time covers its items' sleeps; the session line adds them up
    busy = {m[1]: float(m[2]) for m in re.finditer(
        r"^    (guest\d) \(kernel [^)]+\): ran \d+ test\(s\), busy ([\d.]+) s$", out, re.M)}
    assert all(busy[g] >= 0.3 * ran[g] for g in ran), out
    [(session, serial, ratio)] = re.findall(
        r"^folio: session ([\d.]+) s, guests busy ([\d.]+) s in all \(one guest, one item "
        r"after another: ([\d.]+) times the session's time\)$", out, re.M)
    assert abs(float(serial) - sum(busy.values())) <= 0.15, out
    assert float(serial) >= 2.4 and float(session) > 0, out
    assert abs(float(ratio) - float(serial) / float(session)) <= 0.01 + float(ratio) * 0.05, out
    # which guest ran each item: xdist's worker id is the guest's name, and each
    # report carries a section naming it and its kernel
    assert len(re.findall(r"^\[guest[12]\] .*PASSED test_split.py::test_item", out,
                          re.M)) == 8
    assert re.search(rf"- folio guest -+\nguest[12]: kernel {re.escape(os.uname().release)}",
                     out), out


def test_a_worker_that_dies_is_reported_and_the_session_goes_on(
        tmp_path: Path, standins: dict[str, Path]) -> None:
    proc = controller(tmp_path, standins, "-p", "no:randomly")
    out = proc.stdout
    # the item that killed a worker fails as crashed; the other guest runs the rest
    assert proc.returncode == 1, out + proc.stderr
    assert re.search(r"worker 'guest[12]' crashed while running "
                     r"'test_split.py::test_crash'", out), out
    summary = out.splitlines()[-1]
    assert re.search(r"\b1 failed\b", summary) and "8 passed" in summary, out
    assert len(re.findall(r"^    guest[12] .*went down", out, re.M)) == 1, out


def test_controller_argv_puts_xdist_between_the_targets_and_the_users_args() -> None:
    argv = controller_argv(["pytest", "--folio-mtd=4K=/dev/mtd0"],
                           {"guest1": Path("/t/g1.sock"), "guest2": Path("/t/g 2.sock")},
                           ["-k", "read", "--dist=loadfile"], python="/venv/bin/python")
    assert argv == [
        "pytest", "--folio-mtd=4K=/dev/mtd0", "-p", "xdist", "-p", PLUGIN, "--dist=load",
        "--max-worker-restart=0",
        "--tx=popen//id=guest1//python=/venv/bin/python -m pytest_folio.vm.gateway relay "
        "/t/g1.sock",
        "--tx=popen//id=guest2//python=/venv/bin/python -m pytest_folio.vm.gateway relay "
        "'/t/g 2.sock'",
        "-k", "read", "--dist=loadfile"]


def test_a_relay_whose_controller_is_gone_stops_waiting_for_its_guest(
        tmp_path: Path) -> None:
    """SIGTERM while the guests come up: the controller's relays, still waiting for a
    socket that will never be there, end with it (not 30 s later, saying so)."""
    err = tmp_path / "relay.err"
    started = subprocess.run(
        ["sh", "-c", f'{PY} -m pytest_folio.vm.gateway relay {tmp_path / "none.sock"} '
                     f'-u -c x 2>{err} </dev/null & echo $!; sleep 2'],
        capture_output=True, text=True, check=True, timeout=60)
    pid = int(started.stdout)      # its parent, the shell, has exited since
    deadline = time.monotonic() + 15
    while alive(pid):
        assert time.monotonic() < deadline, "the relay outlived its parent"
        time.sleep(0.1)
    assert err.read_text() == ""


def test_an_interrupt_while_the_controller_starts_waits_for_the_start() -> None:
    """Ctrl-C inside Popen would leave a controller nobody terminates: it is held back
    until the block is done, then raised as it would have been."""
    handler = signal.getsignal(signal.SIGINT)
    done = []
    with pytest.raises(KeyboardInterrupt), guests.deferred_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        done.append("started")
    assert done == ["started"]
    assert signal.getsignal(signal.SIGINT) is handler


def test_a_relay_path_xdist_would_split_is_refused() -> None:
    from pytest_folio.vm import VMError
    with pytest.raises(VMError, match="contains '//'"):
        tx_spec("/venv//bin/python", "guest1", Path("/t/g1.sock"))


def relay_process(sock: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pytest_folio.vm.gateway", "relay",
                             str(sock), "-c", "pass"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_relay_whose_session_ended_while_it_waited_leaves_quietly(tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM while xdist starts its workers: the controller removes the run's
    directory and says why it stopped; a relay still waiting for its guest's socket ends
    at once and says nothing after that (not 30 s later, not "cannot reach the guest")."""
    run = tmp_path / "run"
    run.mkdir()
    proc = relay_process(run / "guest1.sock")
    time.sleep(1.0)                 # waiting for a socket that is not there yet
    assert proc.poll() is None
    run.rmdir()
    started = time.monotonic()
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1 and err == "" and out == ""
    assert time.monotonic() - started < 10


def test_ramfs_args_name_the_mounts_the_guest_kept() -> None:
    marks = [("kernel", "Linux version 7.2"), ("ramfs", "/run/folio/ramfs-4K 4096 64x0"),
             ("ramfs-skip", "16384 mount -o blocksize=16k failed"),
             ("ramfs", "/run/folio/ramfs-2048K 2097152 1x9")]
    assert ramfs_args(marks) == ["--folio-fs=4K=/run/folio/ramfs-4K,2M=/run/folio/ramfs-2048K",
                                 "--folio-block-sizes=4k,2048k"]


def test_the_guest_runs_the_worker_server_with_a_heartbeat() -> None:
    job = GuestJob(modules=[], module_params={}, cwd="/src", argv=server_argv(PY, "guest2"),
                   env={}, heartbeat=True)
    script = init_script(job)
    assert f"{PY} -m pytest_folio.vm.gateway serve --port {PORT_NAME} --name guest2" in script
    assert script.index("@@folio-vm alive") < script.index("@@folio-vm start")
    assert "alive" not in init_script(GuestJob([], {}, "/src", ["x"], {}))


def test_guests_share_the_bytecode_cache_uncached() -> None:
    """Several guests write the bytecode share: a guest's page cache must not hold a .pyc
    back from the host while another guest reads it (cache=loose is for one guest)."""
    def pycache_mount(job: GuestJob) -> str:
        return next(ln for ln in init_script(job).splitlines() if "foliopyc" in ln)
    one = GuestJob([], {}, "/src", ["x"], {})
    assert "cache=loose" in pycache_mount(one)
    shared = GuestJob([], {}, "/src", ["x"], {}, pycache_shared=True)
    assert "cache=" not in pycache_mount(shared)


def test_qemu_gives_the_guest_a_worker_port_on_a_unix_socket(tmp_path: Path) -> None:
    m = Machine(image=tmp_path / "vmlinux", initrd=tmp_path / "i", cmdline="", out=tmp_path,
                worker_socket=tmp_path / "guest1.sock")
    cmd = qemu_command("qemu", m)
    assert f"socket,id=worker,path={tmp_path}/guest1.sock,server=on,wait=off" in cmd
    assert f"virtserialport,chardev=worker,name={PORT_NAME}" in cmd
    assert "virtserialport" not in " ".join(qemu_command("qemu", Machine(
        image=tmp_path / "v", initrd=tmp_path / "i", cmdline="", out=tmp_path)))


def test_find_port_reads_the_ports_name_from_sysfs(tmp_path: Path) -> None:
    for port, name in (("vport1p1", "org.qemu.guest_agent.0"), ("vport2p1", PORT_NAME)):
        (tmp_path / port).mkdir()
        (tmp_path / port / "name").write_text(name + "\n")
    assert find_port(PORT_NAME, tmp_path) == Path("/dev/vport2p1")
    with pytest.raises(SystemExit, match="no virtio-serial port other"):
        find_port("other", tmp_path)


@pytest.mark.parametrize(("args", "message"), [
    (["--guests", "0"], "argument --guests: must be positive: '0'"),
    (["--guests", "two"], "argument --guests: not a number: 'two'"),
    (["--guests", "2", "--power-cut"], "--guests and --power-cut do not go together"),
])
def test_bad_guests_options_are_one_usage_line(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               args: list[str], message: str) -> None:
    try:        # argparse's refusals exit; check_options' are returned
        status: object = main(["vm", "--cache-dir", str(tmp_path / "cache"), *args])
    except SystemExit as exc:
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2 and message in err and len(err.strip().splitlines()) <= 3, err


FAKE_QEMU = FAKE_GUEST_START + r'''
if os.environ["FAKE_QEMU"] == "no-guest2" and name == "guest2":
    say("@@folio-vm error cannot mount the host root over 9p (needs CONFIG_9P_FS)")
    sys.exit(0)
say("@@folio-vm kernel [    0.000000] Linux version 6.1.0-fake (gcc) #1 SMP")
say("@@folio-vm mtd /dev/mtd0 /dev/vda 4096 64x0 ")
say("@@folio-vm ramfs /run/folio/ramfs-4K 4096 64x0")
server = start_worker()
while server.poll() is None:
    if os.path.exists(os.path.join(fake, f"panic-{name}")):
        say("[   12.000000] Kernel panic - not syncing: fake panic in " + name)
        say("[   12.000001] CPU: 1 PID: 1 Comm: python Not tainted 6.1.0-fake")
        say("[   12.000002] Call Trace:")
        os.killpg(0, signal.SIGKILL)     # qemu exits, and the guest with it
    if not os.path.exists(os.path.join(fake, f"hang-{name}")):
        say("@@folio-vm alive")
    time.sleep(0.2)
say(f"@@folio-vm exit {server.returncode}")
'''

GUEST_TESTS = """
import os, time, pytest

@pytest.mark.parametrize("i", range(6))
def test_item(i, folio_timer):
    with folio_timer("sleep", params={"i": i}):
        time.sleep(0.5)

@pytest.mark.parametrize("how", ["panic", "hang"])
def test_guest_goes_down(how):
    if os.environ["FAKE_FAULT"] == how:
        open(os.path.join(os.environ["FAKE_DIR"], f"{how}-{os.environ['PYTEST_FOLIO_GUEST']}"),
             "w").close()
        time.sleep(60)
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A qemu-system-x86_64 on PATH that plays each guest: the worker server on the
    worker channel's socket, a heartbeat, and a panic or hang on request."""
    monkeypatch.setenv("FAKE_FAULT", "none")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    (tmp_path / "test_guests.py").write_text(GUEST_TESTS)
    return fake_machine(tmp_path, monkeypatch, FAKE_QEMU)


def vm_guests(fake: Path, *args: str) -> int:
    return main(["vm", "--kernel", str(fake / "bzImage"), "--cache-dir", str(fake / "cache"),
                 "--timeout", "120", "--guests", "2", "--", "test_guests.py", "-p",
                 "no:randomly", "--folio-failures", "fails", *args])


def test_vm_guests_runs_one_session_over_two_guests(fake: Path,
                                                    capfd: pytest.CaptureFixture[str]
                                                    ) -> None:
    status = vm_guests(fake, "-k", "item", "--folio-save", "two.json")
    out, err = capfd.readouterr()
    assert status == 0, out + err
    assert "folio-vm: booting guest1 under TCG" in err and "booting guest2" in err
    assert "folio-vm: guest2: /dev/mtd0: block2mtd on /dev/vda" in err
    assert "folio-vm: 2 guest(s) listening after" in err
    assert out.splitlines()[-1].startswith("=") and " 6 passed" in out.splitlines()[-1]
    ran = per_guest(out)
    assert set(ran) == {"guest1", "guest2"} and sum(ran.values()) == 6, out
    # the controller on the host saved the run, one file for both guests
    assert (fake / "two.json").is_file()
    assert not any(alive(pid) for pid in qemu_pids(fake))


@pytest.mark.parametrize(("how", "says"), [
    ("panic", r"guest[12] panicked: \[   12.000000\] Kernel panic - not syncing: fake "
              r"panic in guest[12]"),
    ("hang", r"guest[12] hung: no console output for 3 s \(qemu killed\)"),
])
def test_a_guest_that_goes_down_is_reported_and_the_session_goes_on(
        fake: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
        how: str, says: str) -> None:
    monkeypatch.setattr(guests, "HANG_AFTER", 3.0)
    monkeypatch.setenv("FAKE_FAULT", how)
    status = vm_guests(fake, "-k", f"item or {how}")
    out, err = capfd.readouterr()
    assert status == 1, out + err
    found = re.search(says + r" \(its console's last \d+ lines: (\S+)\)", err)
    assert found, err
    console = Path(found[1]).read_text()
    assert Path(found[1]).is_relative_to(fake / "fails")
    if how == "panic":
        assert "Kernel panic - not syncing" in console and "Call Trace:" in console
    # the item it was running is reported as crashed, every other item ran elsewhere
    assert re.search(rf"worker 'guest[12]' crashed while running "
                     rf"'test_guests.py::test_guest_goes_down\[{how}\]'", out), out
    assert re.search(r"\b1 failed, 6 passed\b", out.splitlines()[-1]), out
    assert not any(alive(pid) for pid in qemu_pids(fake))


def test_a_guest_that_never_comes_up_leaves_the_session_to_the_others(
        fake: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
        ) -> None:
    monkeypatch.setenv("FAKE_QEMU", "no-guest2")
    status = vm_guests(fake, "-k", "item")
    out, err = capfd.readouterr()
    assert status == 0, out + err
    assert re.search(r"folio-vm: guest2 failed: cannot mount the host root over 9p "
                     r"\(needs CONFIG_9P_FS\) \(its console's last", err), err
    assert "folio-vm: 1 guest(s) listening after" in err
    assert per_guest(out) == {"guest1": 6}


def qemu_pids(fake: Path) -> list[int]:
    return [int(p) for p in (fake / "qemu.pid").read_text().split()]


def test_sigterm_stops_every_guest_and_the_controller(fake: Path) -> None:
    """``timeout`` or a CI runner stops ``vm --guests`` with SIGTERM: exit 143, and no
    guest, worker or controller is left (each had this test's directory as its cwd)."""
    (fake / "test_guests.py").write_text("import time\n\ndef test_slow():\n"
                                         "    time.sleep(120)\n")
    script = f"""
import sys
from pytest_folio.cli import main
from pytest_folio.vm import runner
runner.find_busybox = lambda: runner.Path({str(fake / "busybox")!r})
runner.kvm_usable = lambda: False
runner.warm_bytecode = lambda argv, prefix, environ: 0.0
sys.exit(main(["vm", "--kernel", "bzImage", "--cache-dir", "cache", "--guests", "2",
               "--", "test_guests.py"]))
"""
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=fake, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "listening after" in line:
            break
    # two guests (qemu), their workers and the controller
    deadline = time.monotonic() + 60
    while len(in_directory(fake)) < 5 and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "python -m pytest_folio vm: terminated (qemu killed)"
    time.sleep(0.5)
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in in_directory(fake)}
    assert left == {}, "left behind"
    assert not any(alive(pid) for pid in qemu_pids(fake))


def in_directory(where: Path) -> list[int]:
    """The processes whose current directory is ``where`` (but this one)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            with contextlib.suppress(OSError):
                if Path(os.readlink(proc / "cwd")) == where:
                    found.append(int(proc.name))
    return found


REAL_TESTS = '''
import os, pytest

@pytest.mark.parametrize("i", range(4))
def test_kernel_device_in_this_guest(i, folio_timer):
    with folio_timer("read /proc/mtd", params={"i": i}):
        mtd = open("/proc/mtd").read()
    assert "block2mtd: /dev/vda" in mtd
    assert os.environ["PYTEST_FOLIO_GUEST"] == os.uname().nodename
'''


@pytest.mark.slow
@pytest.mark.vm_boot
@pytest.mark.skipif(MISSING is not None, reason=str(MISSING))
def test_real_guests_run_one_session(tmp_path: Path) -> None:
    """Two real guests of the distribution kernel: one session, one summary, one saved
    run; each guest runs items against its own kernel's block2mtd."""
    (tmp_path / "test_in_guests.py").write_text(REAL_TESTS)
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run(
        [PY, "-m", "pytest_folio", "vm", "--guests", "2", "--mtd-size", "4M", "--timeout",
         "600", "--", "-v", "test_in_guests.py", "--folio-save", "run.json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(re.findall(r"^=+ 4 passed", proc.stdout, re.M)) == 1, proc.stdout
    ran = per_guest(proc.stdout)
    assert set(ran) == {"guest1", "guest2"} and sum(ran.values()) == 4, proc.stdout
    version = re.search(r"folio-vm: guest1: \[ *[\d.]+\] Linux version (\S+)", proc.stderr)
    assert version, proc.stderr
    saved = json.loads((tmp_path / "run.json").read_text())
    # the guests' measurements name the guest that ran them; its machine, its kernel
    assert {m["worker"] for m in saved["measurements"]} == {"guest1", "guest2"}
    for m in saved["measurements"]:
        assert m["host"] == m["worker"]
        assert version[1] in saved["hosts"][m["host"]]["kernel"]
    assert leftover_qemus() == []


@pytest.mark.parametrize(("args", "message"), [
    (["-n", "2"], "ERROR: -n/--numprocesses replaces the guests' workers with local ones"),
    (["--dist", "no"], "ERROR: --dist no runs the tests here, not in the guests"),
])
def test_options_that_would_leave_the_guests_out_are_refused(
        tmp_path: Path, standins: dict[str, Path], args: list[str], message: str) -> None:
    proc = controller(tmp_path, standins, *args)
    assert proc.returncode == 4 and message in proc.stderr, proc.stdout + proc.stderr
