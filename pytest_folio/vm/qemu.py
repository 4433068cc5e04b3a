"""qemu's command line, the accelerator choice, and running a guest under a deadline.

qemu runs in its own process group, so a timeout or an interrupt kills it and anything it
started with one signal and leaves nothing behind. The serial console is the only channel
out of the guest while it runs: the host reads it line by line, and the init script's
:data:`~pytest_folio.vm.initramfs.MARK` lines say how far the guest got.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pytest_folio.vm import VMError
from pytest_folio.vm.gateway import PORT_NAME as WORKER_PORT
from pytest_folio.vm.initramfs import OUT_TAG, PYCACHE_TAG, ROOT_TAG

QEMU = "qemu-system-x86_64"

# quiet console (errors only) because every byte through the emulated UART costs an exit;
# panic=-1 plus -no-reboot turns a guest panic into qemu exiting instead of hanging.
BASE_CMDLINE = ("console=ttyS0 loglevel=4 panic=-1 rdinit=/init "
                "i8042.noaux i8042.nomux i8042.nopnp")


def find_qemu() -> str:
    qemu = shutil.which(QEMU)
    if qemu is None:
        raise VMError(f"{QEMU} not found: install qemu (apt-get install qemu-system-x86)")
    return qemu


def kvm_usable(device: str = "/dev/kvm") -> bool:
    """Whether this process may open /dev/kvm; a usable device can still hang a guest."""
    try:
        fd = os.open(device, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    os.close(fd)
    return True


@dataclasses.dataclass(frozen=True)
class Disk:
    """A raw image file as a virtio-blk disk of one logical (= physical) block size; the
    guest finds it by its serial."""

    path: Path
    serial: str
    logical_block_size: int = 512


@dataclasses.dataclass(frozen=True)
class Machine:
    """Everything qemu's command line is made of."""

    image: Path
    initrd: Path
    cmdline: str
    out: Path             # host directory shared writable as the results share
    mem_mib: int = 1024
    cpus: int = 2
    accel: str = "tcg"    # "kvm" or "tcg"
    root: str = "/"       # host directory shared read-only as the guest's root
    pycache: Path | None = None  # host directory shared writable for the guest's bytecode
    disks: tuple[Disk, ...] = ()
    worker_socket: Path | None = None  # vm --guests: the host end of the worker channel


# TCG emulates each iteration of a rep-prefixed string instruction on its own. On a CPU
# with ERMS/FSRM the kernel's memset/memcpy/copy_*_user and glibc's pick byte-granular
# "rep stosb"/"rep movsb", eight times the iterations of the word-granular forms, and a
# fill or copy then costs more than the code under test (a patched block2mtd erase that
# memsets a run-time length was 3.5x slower than the stock one's inlined rep stosq). With
# the two flags off both pick unrolled loops that TCG turns into plain moves.
TCG_CPU = "max,-erms,-fsrm"


def qemu_command(qemu: str, m: Machine) -> list[str]:
    if m.accel == "kvm":
        accel = ["-accel", "kvm", "-cpu", "host"]
    elif m.accel == "tcg":
        accel = ["-accel", "tcg,thread=multi", "-cpu", TCG_CPU]
    else:
        raise ValueError(f"unknown accelerator {m.accel!r}")
    shares: list[str] = []
    if m.worker_socket is not None:  # a virtio-serial port the guest's worker talks over
        shares += ["-device", "virtio-serial-pci",
                   "-chardev", f"socket,id=worker,path={m.worker_socket},server=on,wait=off",
                   "-device", f"virtserialport,chardev=worker,name={WORKER_PORT}"]
    if m.pycache is not None:
        shares += ["-fsdev", f"local,id=pyc,path={m.pycache},security_model=none",
                  "-device", f"virtio-9p-pci,fsdev=pyc,mount_tag={PYCACHE_TAG}"]
    return [
        qemu, "-machine", "q35", *accel,
        "-smp", str(m.cpus), "-m", str(m.mem_mib),
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-serial", "stdio",
        "-kernel", str(m.image), "-initrd", str(m.initrd), "-append", m.cmdline,
        "-fsdev", f"local,id=root,path={m.root},security_model=none,readonly=on,"
                  "multidevs=remap",
        "-device", f"virtio-9p-pci,fsdev=root,mount_tag={ROOT_TAG}",
        "-fsdev", f"local,id=out,path={m.out},security_model=none",
        "-device", f"virtio-9p-pci,fsdev=out,mount_tag={OUT_TAG}",
        *shares,
        *(arg for i, d in enumerate(m.disks) for arg in (
            "-drive", f"file={d.path},if=none,id=disk{i},format=raw,cache=unsafe",
            "-device", f"virtio-blk-pci,drive=disk{i},serial={d.serial},"
                       f"logical_block_size={d.logical_block_size},"
                       f"physical_block_size={d.logical_block_size}")),
    ]


@dataclasses.dataclass
class GuestRun:
    """How a guest run ended.

    ``ended``: "exit" (qemu exited by itself), "timeout" (the whole run took too long),
    "boot-timeout" (``ready`` never showed up in time), "stopped" (``stop`` said so).
    ``stderr`` is qemu's own.
    """

    ended: str
    returncode: int | None
    elapsed: float
    stderr: str


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL qemu's whole process group and reap qemu."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


EXIT_GRACE = 10.0  # seconds qemu gets to exit after the guest said it is done


def run_guest(cmd: list[str], on_line: Callable[[str], None], timeout: float,
              ready: Callable[[], bool] | None = None, boot_timeout: float | None = None,
              done: Callable[[], bool] | None = None,
              stop: Callable[[], bool] | None = None) -> GuestRun:
    """Run ``cmd`` in a new process group, feeding each console line to ``on_line``.

    Kills the group when ``timeout`` seconds pass, when ``ready()`` is still false after
    ``boot_timeout`` seconds (how a hung KVM guest is told from a slow one), or
    :data:`EXIT_GRACE` seconds after ``done()`` became true (a guest stuck powering off),
    and at once when ``stop()`` becomes true (ended "stopped": a power cut).
    """
    start = time.monotonic()
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=err, start_new_session=True)
        except OSError as exc:
            raise VMError(f"cannot start {cmd[0]}: {exc.strerror}") from None
        ended = "exit"
        try:
            assert proc.stdout is not None
            fd = proc.stdout.fileno()
            os.set_blocking(fd, False)
            buffer = b""
            done_at: float | None = None
            with selectors.DefaultSelector() as sel:
                sel.register(fd, selectors.EVENT_READ)
                while True:
                    now = time.monotonic() - start
                    if now >= timeout:
                        ended = "timeout"
                        break
                    if (boot_timeout is not None and ready is not None and not ready()
                            and now >= boot_timeout):
                        ended = "boot-timeout"
                        break
                    if stop is not None and stop():
                        ended = "stopped"
                        break
                    if done is not None and done_at is None and done():
                        done_at = now
                    if done_at is not None and now >= done_at + EXIT_GRACE:
                        break
                    wait = min(timeout - now, 1.0)  # re-check ready()/done() each second
                    if not sel.select(max(wait, 0.01)):
                        continue
                    chunk = os.read(fd, 65536)
                    if not chunk:  # qemu closed the console: it is exiting
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            proc.wait(EXIT_GRACE)
                        break
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        on_line(line.rstrip(b"\r").decode("utf-8", "replace"))
                if buffer and ended == "exit":
                    on_line(buffer.rstrip(b"\r").decode("utf-8", "replace"))
        finally:
            kill_group(proc)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    return GuestRun(ended, proc.returncode, time.monotonic() - start, stderr)
