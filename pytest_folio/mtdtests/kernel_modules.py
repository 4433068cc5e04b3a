"""The kernel's own MTD test modules (drivers/mtd/tests) and block2mtd's module swap,
run inside the VM guest (below the suites that call them; the runner names only the
variables that tell the guest where they are).

``vm --mtd-tests`` builds them from the booted kernel's source
(:mod:`pytest_folio.vm.build`) and tells the guest where they are (:data:`MODULES_ENV`).
In the guest each test module is loaded with ``dev=N`` (and the module's other
parameters): its init function runs the whole test and returns 0 or the error, and
everything it says goes to the kernel log, read here from ``/dev/kmsg``. The module is
unloaded again afterwards, so the next test can load it. mtd_speedtest's
``... speed is N KiB/s`` lines become rows named as our speed suite's
(:func:`pytest_folio.mtdtests.speed.row_names`).
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
import re
from pathlib import Path

from pytest_folio.mtdtests.common import NOT_NAND_PAGE_SIZE
from pytest_folio.sizes import blocksize_order, format_kib

MODULES_ENV = "PYTEST_FOLIO_KERNEL_MTD_TESTS"
INTERLEAVE_ENV = "PYTEST_FOLIO_INTERLEAVE"  # vm --interleave: base/ and patched/ modules
HELPER_MODULE = "mtd_test"  # mtd_test.c: the helpers every test module links against

# x86-64 system call numbers (the VM is x86-64 only: docs/vm.md, Limits)
SYS_FINIT_MODULE = 313
SYS_DELETE_MODULE = 176


@dataclasses.dataclass(frozen=True)
class KernelTest:
    """One module of drivers/mtd/tests and the parameters it runs with here."""

    name: str                                   # "speedtest": the item's name part
    finished: str                               # the module's last line when it passed
    params: tuple[tuple[str, str], ...] = ()    # besides dev=N

    @property
    def module(self) -> str:
        return f"mtd_{self.name}"


# torturetest's cycles_count defaults to "forever"; the others end by themselves.
KERNEL_TESTS = {t.name: t for t in (
    KernelTest("speedtest", r"finished$"),
    KernelTest("readtest", r"finished$"),
    KernelTest("stresstest", r"finished, \d+ operations done", (("count", "2000"),)),
    KernelTest("torturetest", r"finished after \d+ erase cycles", (("cycles_count", "4"),)),
    KernelTest("oobtest", r"finished with 0 errors"),
    KernelTest("pagetest", r"finished with 0 errors"),
    KernelTest("subpagetest", r"finished with 0 errors"),
    KernelTest("nandbiterrs", r"finished successfully"),
)}


@dataclasses.dataclass(frozen=True)
class KernelDevice:
    """An MTD device of the booted kernel, with the folio order of its page cache."""

    number: int
    name: str
    size: int
    erasesize: int
    writesize: int
    folio_order: int | None     # None: not block2mtd on a block device we can read

    @property
    def path(self) -> str:
        return f"/dev/mtd{self.number}"


def _block_device_lbs(devname: str, sys: Path) -> int | None:
    try:
        rdev = os.stat(devname).st_rdev
    except OSError:
        return None
    base = sys / "dev/block" / f"{os.major(rdev)}:{os.minor(rdev)}"
    for queue in (base / "queue", base / ".." / "queue"):  # a partition: its disk's
        try:
            return int((queue / "logical_block_size").read_text())
        except (OSError, ValueError):
            continue
    return None


def block2mtd_blockdev(name: str) -> str | None:
    """The block device of an MTD device block2mtd named ``block2mtd: /dev/...``."""
    match = re.match(r"block2mtd: (/\S+)", name)
    return match.group(1) if match else None


def kernel_mtd_devices(sys: Path = Path("/sys")) -> list[KernelDevice]:
    """The kernel's MTD devices (``/sys/class/mtd/mtdN``), in number order. block2mtd
    names its device ``block2mtd: /dev/...``; that block device's logical block size
    gives the folio order."""
    devices = []
    for entry in sorted((sys / "class/mtd").glob("mtd[0-9]*"),
                        key=lambda p: int(re.sub(r"\D", "", p.name) or 0)):
        if not entry.name[3:].isdigit():  # mtdNro
            continue

        def value(attr: str, entry: Path = entry) -> str:
            return (entry / attr).read_text().strip()

        name = value("name")
        blockdev = block2mtd_blockdev(name)
        lbs = None if blockdev is None else _block_device_lbs(blockdev, sys)
        devices.append(KernelDevice(int(entry.name[3:]), name, int(value("size")),
                                    int(value("erasesize")), int(value("writesize")),
                                    None if lbs is None else blocksize_order(lbs)))
    return devices


class KernelLog:
    """The kernel log from now on: ``/dev/kmsg`` opened and moved to its end."""

    def __init__(self, path: str = "/dev/kmsg") -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)

    def read(self) -> list[str]:
        """The messages logged since the last read (``PRI,SEQ,TS,FLAGS;TEXT`` records,
        continuation lines left out)."""
        lines = []
        while True:
            try:
                record = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten while we read: go on
                    continue
                raise
            if not record:
                break
            _, _, text = record.decode("utf-8", "replace").partition(";")
            lines.append(text.split("\n", 1)[0])
        return lines

    def close(self) -> None:
        os.close(self.fd)


def _syscall(number: int, *args: object) -> int:
    """0, or the errno the system call failed with."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, *args) == 0:
        return 0
    return ctypes.get_errno()


def load_module(path: Path, params: str) -> int:
    """finit_module(): 0, or the errno (the module's init's return value when it ran)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return _syscall(SYS_FINIT_MODULE, ctypes.c_int(fd), params.encode(), ctypes.c_int(0))
    finally:
        os.close(fd)


def unload_module(name: str) -> int:
    return _syscall(SYS_DELETE_MODULE, name.encode(), ctypes.c_uint(os.O_NONBLOCK))


def swap_block2mtd(module: Path, devices: list[KernelDevice],
                   sys: Path = Path("/sys")) -> list[KernelDevice]:
    """Unload block2mtd, load ``module`` in its place and attach it again to the block
    devices of ``devices``, in their order (so each gets its number back); the devices
    it made, checked against those."""
    err = unload_module("block2mtd")
    if err not in (0, errno.ENOENT):
        raise OSError(err, f"cannot unload block2mtd: {os.strerror(err)}")
    err = load_module(module, "")
    if err != 0:
        raise OSError(err, f"cannot load {module}: {os.strerror(err)}")
    param = sys / "module/block2mtd/parameters/block2mtd"
    for device in devices:
        blockdev = block2mtd_blockdev(device.name)
        if blockdev is None:
            raise OSError(errno.EINVAL, f"{device.path} ({device.name}) is not block2mtd's")
        param.write_text(f"{blockdev},{device.erasesize}\n")
    again = [d for d in kernel_mtd_devices(sys) if block2mtd_blockdev(d.name) is not None]
    if [(d.number, d.name, d.size) for d in again] != [
            (d.number, d.name, d.size) for d in devices]:
        raise OSError(errno.EIO, f"{module} made {[d.name for d in again]}, not "
                                 f"{[d.name for d in devices]}")
    return again


@dataclasses.dataclass
class KernelTestRun:
    """What one load of a test module did: its return value and what it logged."""

    test: KernelTest
    device: KernelDevice
    errno: int
    log: list[str]

    @property
    def own_lines(self) -> list[str]:
        """The module's own lines, without its ``mtd_speedtest: `` prefix."""
        prefix = f"{self.test.module}: "
        return [ln[len(prefix):] for ln in self.log if ln.startswith(prefix)]

    def nand_only_reason(self) -> str | None:
        """The kernel's words when the test refuses a device that is not NAND (some
        modules then return -ENODEV, some 0)."""
        reasons = [ln for ln in self.own_lines if "requires NAND" in ln]
        return f"{self.test.module}: {reasons[-1]}" if reasons else None

    def passed(self) -> bool:
        """Returned 0 and ended with the line the module prints when all went well."""
        return self.errno == 0 and any(re.match(self.test.finished, ln)
                                       for ln in self.own_lines)

    def problems(self) -> list[str]:
        """Lines that say the test failed, besides a non-zero return value."""
        return [ln for ln in self.log if re.search(r"\b[Ee]rror\b|verify failed|wrong data",
                                                   ln) or re.search(r"BUG:|WARNING:|Oops", ln)]


def run_kernel_test(modules: Path, test: KernelTest, device: KernelDevice,
                    extra: dict[str, str] | None = None) -> KernelTestRun:
    """Load ``test``'s module against ``device`` (after mtd_test, once) and unload it."""
    helper = modules / f"{HELPER_MODULE}.ko"
    if helper.is_file():
        err = load_module(helper, "")
        if err not in (0, errno.EEXIST):
            raise OSError(err, f"cannot load {helper}: {os.strerror(err)}")
    params = {"dev": str(device.number), **dict(test.params), **(extra or {})}
    log = KernelLog()
    try:
        err = load_module(modules / f"{test.module}.ko",
                          " ".join(f"{k}={v}" for k, v in params.items()))
        lines = log.read()
    finally:
        log.close()
    if err == 0:
        unload_module(test.module)
    return KernelTestRun(test, device, err, lines)


def torture_params(device: KernelDevice) -> dict[str, str]:
    """torturetest's eraseblock range (8..39 by default) fitted into a small device."""
    ebcnt = device.size // device.erasesize
    eb = min(8, max(ebcnt // 4, 0))
    return {"eb": str(eb), "ebcnt": str(min(32, ebcnt - eb))}


SPEED_LINE = re.compile(r"^(eraseblock|page|2 page|(\d+)x multi-block) (write |read )?"
                        r"(?:erase )?speed is (\d+) KiB/s$")
ERASE_LINE = re.compile(r"^erase speed is (\d+) KiB/s$")
GEOMETRY_LINE = re.compile(r"^MTD device size \d+, .*count of eraseblocks (\d+)")
SCAN_LINE = re.compile(r"^scanned (\d+) eraseblocks, (\d+) are bad")
PREFIX = re.compile(r"^mtd_\w+: ")


def speed_rows(lines: list[str], erasesize: int, writesize: int) -> dict[str, float]:
    """mtd_speedtest's figures as ms per pass, by our speed suite's row names.

    The module prints KiB/s computed from whole milliseconds over its good eraseblocks
    (its geometry line's count, less the bad ones of ``scanned N eraseblocks, M are bad``,
    which only a device that can have bad blocks prints); the time is recovered from
    those two.
    """
    pgsize = NOT_NAND_PAGE_SIZE if writesize == 1 else writesize
    eb, pg, two = format_kib(erasesize), format_kib(pgsize), format_kib(2 * pgsize)
    names = {"eraseblock write ": f"Eraseblock write ({eb})",
             "eraseblock read ": f"Eraseblock read ({eb})",
             "page write ": f"Page write ({pg})", "page read ": f"Page read ({pg})",
             "2 page write ": f"2-page write ({two})", "2 page read ": f"2-page read ({two})"}
    good = None
    rows: dict[str, float] = {}
    for line in (PREFIX.sub("", ln) for ln in lines):
        geometry, scan = GEOMETRY_LINE.match(line), SCAN_LINE.match(line)
        if geometry:
            good = int(geometry.group(1))
        if scan:
            good = int(scan.group(1)) - int(scan.group(2))
        if geometry or scan:
            continue
        if good is None:
            continue
        kib = good * erasesize / 1024
        erase = ERASE_LINE.match(line)
        match = SPEED_LINE.match(line)
        if erase:
            name, speed = "Erase, blocks hold data", int(erase.group(1))
        elif match and match.group(2):
            name, speed = f"Multi-block erase ({match.group(2)} blocks)", int(match.group(4))
        elif match and match.group(3):
            name, speed = names[f"{match.group(1)} {match.group(3)}"], int(match.group(4))
        else:
            continue
        if speed > 0:  # 0: the pass took under a millisecond, no figure
            rows[name] = kib / speed * 1000.0
    return rows
