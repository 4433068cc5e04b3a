"""``python -m pytest_folio vm [options] -- PYTEST-ARGS``: pytest against a real kernel.

Prepares a kernel (the distribution's, a Debian suite's, cached, or ``--kernel``), one
disk per folio order of the run (logical block size PAGE_SIZE << order, block2mtd on it)
and, with ``--fs xfs|ext4``, one scratch file system per block size, builds the
initramfs, boots it under qemu (KVM when it works, else TCG) and runs pytest inside with
``--folio-mtd=4K=/dev/mtd0,16K=/dev/mtd1,... --folio-fs=<ramfs or 4K=DIR,...>
--folio-allow-destructive`` plus the user's arguments. pytest's output streams through,
its exit status is returned, and a ``--folio-save`` file written in the guest is copied
to where the user asked for it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from pytest_folio import progress
from pytest_folio.cli import CommandError
from pytest_folio.constants import PAGE_SIZE
from pytest_folio.model.ramfs import parse_block_size
from pytest_folio.options import check_mtd_geometry, option_default, parse_order
from pytest_folio.sizes import format_size, parse_list, parse_size
from pytest_folio.vm import EXIT_VM_ERROR, VMError
from pytest_folio.vm.build import build_for_kernel, loaded_lines, substitute
from pytest_folio.vm.initramfs import (
    GUEST_OUT,
    GUEST_PYCACHE,
    GUEST_RAMFS,
    GUEST_RUN,
    GUEST_TMP,
    MARK,
    GuestDisk,
    GuestJob,
    build_initramfs,
    find_busybox,
)
from pytest_folio.vm.kernel import (
    DEBIAN_PREFIX,
    FS_MODULES,
    REQUIRED_MODULES,
    Kernel,
    KernelCache,
    ModuleTree,
    bootable_image,
    cache_root,
    check_suite,
    fetch_distro_kernel,
    fetch_suite_kernel,
    user_kernel,
)
from pytest_folio.vm.kernelbuild import build_kernel
from pytest_folio.vm.mtdtests import MODULES_ENV
from pytest_folio.vm.qemu import (
    BASE_CMDLINE,
    Disk,
    Machine,
    find_qemu,
    kvm_usable,
    qemu_command,
    run_guest,
)
from pytest_folio.vm.source import KernelSource

WARMUP_TIMEOUT = 120.0
KVM_BOOT_TIMEOUT = 15.0  # TCG reaches init in about 2 s here; a KVM guest that has not is hung
GUEST_SAVE = f"{GUEST_OUT}/timings.json"
MIN_GUEST_MEM = 384 << 20  # kernel, Python and pytest, besides the devices' page cache

# A block device's page cache holds folios of its logical block size from Linux 6.15 on
# (before, a logical block size above PAGE_SIZE is refused), and block devices take
# logical blocks up to BLK_MAX_BLOCK_SIZE, 64K.
LARGE_BDEV_FOLIOS = (6, 15)
MAX_BDEV_ORDER = 4


@dataclasses.dataclass(frozen=True)
class FsKind:
    """A scratch file system the host makes on a disk image for ``--fs``."""

    large_blocks: tuple[int, int]  # the first kernel mounting blocks > PAGE_SIZE
    max_block: int
    mkfs: tuple[str, ...]          # {bs} is the block size
    package: str                   # where the mkfs tool comes from (named when missing)


FILE_SYSTEMS = {
    "xfs": FsKind((6, 12), 64 << 10, ("mkfs.xfs", "-q", "-f", "-b", "size={bs}"),
                  "xfsprogs"),
    "ext4": FsKind((6, 19), 64 << 10, ("mkfs.ext4", "-q", "-F", "-b", "{bs}"),
                   "e2fsprogs"),
}
FS_DISK_SIZE = 512 << 20  # sparse; mkfs.xfs wants at least 300M

# Host variables the guest's pytest should see; everything else is set fresh.
PASSED_ENV = ("PATH", "PYTHONPATH", "PYTHONHASHSEED", "VIRTUAL_ENV", "LANG", "LC_ALL",
              "PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PY_COLORS", "NO_COLOR",
              "COLUMNS")


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value
    return parse


def register(subparsers: Any) -> None:
    """Add the ``vm`` subcommand (the cli's one-line registration calls this)."""
    parser = subparsers.add_parser(
        "vm", help="run pytest inside a Linux kernel booted under qemu",
        description="Boot a Linux kernel under qemu with the host's root shared read-only, "
                    "a RAM disk under block2mtd as /dev/mtd0 and a kernel ramfs, and run "
                    "pytest inside against them. Arguments after -- go to pytest.")
    parser.add_argument("--kernel", metavar="IMAGE|debian:SUITE",
                        help="boot this bzImage or vmlinux, or the current kernel of a "
                             "Debian suite (debian:sid, debian:trixie; fetched through a "
                             "private apt configuration and cached) (default: the "
                             "distribution's current kernel package, fetched and cached)")
    parser.add_argument("--modules", type=Path, metavar="DIR",
                        help="the module tree of --kernel (lib/modules/RELEASE, or an "
                             "INSTALL_MOD_PATH); without it the kernel must have virtio, "
                             "9p, virtio_blk and block2mtd built in")
    parser.add_argument("--mtd-size", type=_size, default=16 << 20, metavar="SIZE",
                        help="size of each disk under block2mtd, one per folio order of "
                             "--folio-orders (default: 16M)")
    parser.add_argument("--fs", choices=("ramfs", *FILE_SYSTEMS), default="ramfs",
                        help="the file system --folio-fs points at: the kernel's ramfs, or "
                             "one scratch xfs/ext4 per --folio-block-sizes size "
                             "(default: ramfs)")
    parser.add_argument("--erasesize", type=_size, default=128 << 10, metavar="SIZE",
                        help="block2mtd eraseblock size (default: 128K)")
    parser.add_argument("--mem", type=_positive(int), default=1024, metavar="MIB",
                        help="guest memory in MiB (default: 1024)")
    parser.add_argument("--cpus", type=_positive(int), default=min(os.cpu_count() or 1, 4),
                        help="guest CPUs (default: the host's, at most 4)")
    parser.add_argument("--timeout", type=_positive(float), default=3600.0, metavar="S",
                        help="kill the guest after S seconds (default: 3600; the whole "
                             "ready-made suites at three folio and block sizes take tens of "
                             "minutes under TCG on a loaded host)")
    parser.add_argument("--accel", choices=("auto", "kvm", "tcg"), default="auto",
                        help="auto: KVM when /dev/kvm works, falling back to TCG when a KVM "
                             "guest fails or hangs before init (default: auto)")
    parser.add_argument("--cache-dir", type=Path, metavar="DIR",
                        help="kernel cache (default: $PYTEST_FOLIO_CACHE or "
                             "~/.cache/pytest-folio)")
    parser.add_argument("--console", action="store_true",
                        help="show the guest's whole boot console")
    parser.add_argument("--dmesg", type=Path, metavar="FILE",
                        help="save the guest kernel's log here after the run")
    parser.add_argument("--patch", type=Path, action="append", default=[], metavar="FILE",
                        help="apply this patch (repeatable, in order) to the booted kernel's "
                             "own source and load the modules it changes, built out of tree, "
                             "instead of the stock ones")
    parser.add_argument("--driver", type=Path, metavar="PATH",
                        help="build this module (a .c file, or a directory with a Kbuild or "
                             "Makefile) against the booted kernel and load it")
    parser.add_argument("--build-kernel", type=Path, metavar="SRC_DIR",
                        help="build this kernel tree once with a minimal configuration for "
                             "the VM (cached by tree and configuration) and boot it")
    parser.add_argument("--mtd-tests", action="store_true",
                        help="build the kernel's drivers/mtd/tests from the same source for "
                             "the test_kernel_mtd_* items")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="-- PYTEST-ARGS")
    parser.set_defaults(run=run)


@dataclasses.dataclass(frozen=True)
class VMOptions:
    """The subcommand's options, checked."""

    kernel: Path | None
    suite: str | None  # --kernel debian:SUITE
    modules: Path | None
    mtd_size: int
    erasesize: int
    fs: str
    mem_mib: int
    cpus: int
    timeout: float
    accel: str
    cache_dir: Path
    console: bool
    dmesg: Path | None
    pytest_args: list[str]
    patches: tuple[Path, ...] = ()
    driver: Path | None = None
    mtd_tests: bool = False
    build_kernel: Path | None = None


def check_options(args: argparse.Namespace) -> VMOptions:
    """Turn parsed arguments into :class:`VMOptions`; a mistake raises CommandError."""
    kernel, suite = (None if args.kernel is None else Path(args.kernel)), None
    if args.kernel is not None and args.kernel.startswith(DEBIAN_PREFIX):
        try:
            kernel, suite = None, check_suite(args.kernel[len(DEBIAN_PREFIX):])
        except ValueError as exc:
            raise CommandError(f"--kernel {args.kernel}: {exc}") from None
    if args.modules is not None and kernel is None:
        raise CommandError("--modules needs --kernel IMAGE (a distribution kernel brings "
                           "its own)")
    try:
        check_mtd_geometry(args.mtd_size, args.erasesize)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if (args.mem << 20) < args.mtd_size + MIN_GUEST_MEM:
        raise CommandError(
            f"--mem {args.mem} is too small for a {format_size(args.mtd_size)} MTD device "
            f"(needs at least {(args.mtd_size + MIN_GUEST_MEM) >> 20} MiB)")
    for patch in getattr(args, "patch", []):
        if not patch.is_file():
            raise CommandError(f"--patch {patch}: no such file")
    driver = getattr(args, "driver", None)
    if driver is not None and not driver.exists():
        raise CommandError(f"--driver {driver}: no such file or directory")
    build = getattr(args, "build_kernel", None)
    if build is not None and (args.kernel is not None or args.modules is not None):
        raise CommandError("--build-kernel boots the kernel it builds: leave out --kernel "
                           "and --modules")
    if build is not None and not build.is_dir():
        raise CommandError(f"--build-kernel {build}: no such directory")
    pytest_args = list(args.pytest_args)
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    return VMOptions(
        kernel=kernel, suite=suite, modules=args.modules, mtd_size=args.mtd_size,
        erasesize=args.erasesize, fs=args.fs, mem_mib=args.mem, cpus=args.cpus,
        timeout=args.timeout,
        accel=args.accel, cache_dir=args.cache_dir or cache_root(), console=args.console,
        dmesg=args.dmesg, pytest_args=pytest_args,
        patches=tuple(getattr(args, "patch", [])), driver=driver,
        mtd_tests=bool(getattr(args, "mtd_tests", False)), build_kernel=build)


def split_save(pytest_args: list[str]) -> tuple[list[str], Path | None]:
    """Point ``--folio-save`` at the results share; return the user's path for the copy.

    The guest's root is read-only, so the file is written to the share and copied to the
    user's path (relative to the current directory, as pytest would take it) afterwards.
    """
    out: list[str] = []
    save: Path | None = None
    args = iter(pytest_args)
    for arg in args:
        if arg == "--":  # pytest's own end of options: leave the rest alone
            out.append(arg)
            out.extend(args)
            break
        if arg == "--folio-save":
            value = next(args, None)
            if value is None:
                raise CommandError("--folio-save needs a path")
            save = Path(value)
            out.append(f"--folio-save={GUEST_SAVE}")
        elif arg.startswith("--folio-save="):
            save = Path(arg.split("=", 1)[1])
            out.append(f"--folio-save={GUEST_SAVE}")
        else:
            out.append(arg)
    return out, save


def run_option(pytest_args: list[str], option: str) -> str | None:
    """The value the user gave a pytest option (the last one wins, as in pytest)."""
    value = None
    args = iter(pytest_args)
    for arg in args:
        if arg == "--":
            break
        if arg == option:
            value = next(args, value)
        elif arg.startswith(option + "="):
            value = arg.split("=", 1)[1]
    return value


def run_list(pytest_args: list[str], option: str, parse: Any) -> tuple[list[int], bool]:
    """The run's ``--folio-orders`` / ``--folio-block-sizes`` (parsed), and whether the
    user gave them."""
    given = run_option(pytest_args, option)
    text = given if given is not None else option_default(option)
    try:
        values = [parse(v) for v in parse_list(str(text))]
    except ValueError as exc:
        raise CommandError(f"{option}: {exc}") from None
    if not values:
        raise CommandError(f"{option} needs at least one value")
    return list(dict.fromkeys(values)), given is not None


def kernel_version(release: str) -> tuple[int, int] | None:
    """(major, minor) from a release string such as 7.2.13+deb14-amd64."""
    match = re.match(r"(\d+)\.(\d+)", release)
    return (int(match.group(1)), int(match.group(2))) if match else None


def size_map(paths: dict[int, str]) -> str:
    """``4K=/dev/mtd0,16K=/dev/mtd1``: the per-size spec --folio-mtd/--folio-fs take."""
    return ",".join(f"{format_size(size)}={path}" for size, path in sorted(paths.items()))


def guest_pytest_argv(python: str, pytest_args: list[str], mtd_size: int,
                      erasesize: int, mtd: str = "/dev/mtd0", fs: str = GUEST_RAMFS,
                      extra: list[str] | None = None) -> list[str]:
    """pytest's command line in the guest: the kernel targets (``mtd``, ``fs``) and the
    orders and block sizes they were made for (``extra``) first, so the user's own
    options (later on the line) still win.

    The reference device gets the kernel device's geometry, so differential tests compare
    like with like. ``-p pytest_folio`` keeps the plugin when the user turned plugin
    autoloading off (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1: the fastest start under TCG).
    """
    # --opt=value: pytest takes a bare argument naming an existing path into its rootdir
    # guess, and /dev/mtd0 would make the rootdir "/".
    return [python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_folio",
            f"--folio-mtd={mtd}", f"--folio-fs={fs}", *(extra or []),
            f"--folio-mtd-size={mtd_size}", f"--folio-erasesize={erasesize}",
            "--folio-allow-destructive", *pytest_args]


def guest_env(environ: dict[str, str], colors: bool) -> dict[str, str]:
    env = {k: environ[k] for k in PASSED_ENV if k in environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(HOME=f"{GUEST_RUN}/home", TMPDIR=GUEST_TMP, PYTHONPYCACHEPREFIX=GUEST_PYCACHE,
               PYTHONUNBUFFERED="1", PYTEST_FOLIO_VM="1",
               HYPOTHESIS_STORAGE_DIRECTORY=f"{GUEST_TMP}/hypothesis")
    # the guest's console is a tty, so pytest would colour even into a host pipe
    if "NO_COLOR" not in env:
        env.setdefault("PY_COLORS", "1" if colors else "0")
    return env


def warmup_argv(python: str, pytest_args: list[str], cwd: Path) -> list[str]:
    """A host-side ``pytest --co`` over the user's test paths, run to fill the bytecode
    cache natively. Options are left out (they may name guest paths), and so is anything
    that is neither a path here nor, with --pyargs, an importable module: one unknown
    argument would stop the whole collection."""
    pyargs = "--pyargs" in pytest_args
    keep = []
    for arg in pytest_args:
        if arg.startswith("-"):
            continue
        if (cwd / arg.split("::", 1)[0]).exists() or (pyargs and _importable(arg)):
            keep.append(arg)
    return [python, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "-p",
            "pytest_folio", *(["--pyargs"] if pyargs else []), *keep]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def warm_bytecode(argv: list[str], prefix: Path, environ: dict[str, str]) -> float:
    """Compile on the host what the guest's pytest will import, into the bytecode share.

    Compiling (and pytest's assertion rewriting) under TCG costs tens of seconds; on the
    host it takes one or two, and the guest finds the results by the same paths (its root
    is the host's). The guest ignores __pycache__ beside the sources once
    PYTHONPYCACHEPREFIX is set, so this also covers the standard library. A collection
    that fails here only leaves more for the guest to compile.
    """
    start = time.monotonic()
    env = {k: v for k, v in environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=WARMUP_TIMEOUT, check=False)
    return time.monotonic() - start


def device_lines(key: str, value: str) -> list[str]:
    """What the guest's ``mtd``/``fs`` MARK lines say, as the lines the user reads.

    mtd: ``/dev/mtdN /dev/vdX LBS [COUNTxORDER ...|none]``, the folio orders the page
    cache used (filemap:mm_filemap_add_to_page_cache) while the guest read the disk.
    fs: ``MOUNTPOINT TYPE DEVICE BLOCKSIZE``.
    """
    words = value.split()
    if key == "fs":
        where, fstype, device, bs = (words + ["?"] * 4)[:4]
        on = f" on {device}" if device != "-" else ""
        size = f" ({format_size(int(bs))})" if bs.isdigit() else ""
        return [f"{where}: {fstype}{on}, block size {bs}{size}"]
    mtd, device, lbs, *folios = (words + ["?"] * 3) if len(words) < 3 else words
    size = format_size(int(lbs)) if lbs.isdigit() else "?"
    lines = [f"{mtd}: block2mtd on {device}, logical block size {lbs} ({size} folios)"]
    if folios == ["none"] or not folios:
        lines.append(f"{device}: no filemap:mm_filemap_add_to_page_cache tracepoint to "
                     "confirm the folio sizes")
    else:
        counts = [f.split("x") for f in folios if "x" in f]
        seen = ", ".join(f"{n} of order {o} ({format_size(PAGE_SIZE << int(o))})"
                         for n, o in counts if o.isdigit())
        lines.append(f"{device}: the page cache added folios {seen} "
                     "(filemap:mm_filemap_add_to_page_cache)")
    return lines


class Console:
    """Reads the guest's console: MARK lines drive progress, pytest's lines pass through."""

    def __init__(self, out: TextIO, err: TextIO, show_boot: bool) -> None:
        self.out, self.err, self.show_boot = out, err, show_boot
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self.on_start: list[str] = []  # progress lines once the guest loaded its modules
        self.marks: dict[str, str] = {}
        self.mark_times: dict[str, float] = {}
        self.started = time.monotonic()

    def __call__(self, line: str) -> None:
        if line.startswith(MARK + " "):
            key, _, value = line[len(MARK) + 1:].partition(" ")
            self.marks[key] = value
            self.mark_times[key] = time.monotonic() - self.started
            if key == "kernel":
                self.err.write(f"folio-vm: {value.strip()}\n")
            elif key in ("mtd", "fs"):
                for shown in device_lines(key, value):
                    self.err.write(f"folio-vm: {shown}\n")
            if key == "start":
                self.err.writelines(f"folio-vm: {line}\n" for line in self.on_start)
            self.err.flush()
        elif "start" in self.marks and "exit" not in self.marks:
            self.tail.append(line)
            self.out.write(line + "\n")
            self.out.flush()
        else:
            self.tail.append(line)
            if self.show_boot:
                self.err.write(line + "\n")
                self.err.flush()

    def ready(self) -> bool:
        return "init" in self.marks

    def done(self) -> bool:
        return "exit" in self.marks or "error" in self.marks

    def last_line(self) -> str:
        lines = [ln.strip() for ln in self.tail if ln.strip()]
        return lines[-1] if lines else "(no console output)"


class VMRun:
    """One run of the subcommand: prepare, boot (with the KVM fallback), collect."""

    def __init__(self, opts: VMOptions, out: TextIO | None = None, err: TextIO | None = None,
                 environ: dict[str, str] | None = None) -> None:
        self.opts = opts
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self.environ = dict(os.environ) if environ is None else environ
        self.cache = KernelCache(opts.cache_dir)
        self.clock = time.monotonic()
        self.loaded: list[str] = []  # "loaded block2mtd built with ...", said at start
        self.source: KernelSource | None = None  # --build-kernel's tree, for module builds

    def progress(self, message: str) -> None:
        progress.step(f"folio-vm: {message}", self.err)

    def kernel(self) -> Kernel:
        if self.opts.build_kernel is not None:
            kernel, self.source = build_kernel(self.opts.build_kernel, self.cache.root,
                                               self.progress)
            return kernel
        if self.opts.kernel is not None:
            return user_kernel(self.opts.kernel, self.opts.modules)
        if self.opts.suite is not None:
            return fetch_suite_kernel(self.cache, self.opts.suite, self.progress)
        return fetch_distro_kernel(self.cache, self.progress)

    def accelerators(self) -> list[str]:
        if self.opts.accel != "auto":
            return [self.opts.accel]
        if not kvm_usable():
            return ["tcg"]
        if self.kvm_marker().exists():
            self.progress(f"using TCG: KVM failed on this host before "
                          f"(delete {self.kvm_marker()} to try it again)")
            return ["tcg"]
        return ["kvm", "tcg"]

    def kvm_marker(self) -> Path:
        return self.cache.root / f"kvm-failed-{os.uname().release}"

    def mtd_orders(self, release: str) -> list[int]:
        """The folio orders to make MTD devices at: the run's, checked against what the
        booted kernel can give a block device; a default list is cut to those."""
        orders, given = run_list(self.opts.pytest_args, "--folio-orders", parse_order)
        version = kernel_version(release)
        large = version is None or version >= LARGE_BDEV_FOLIOS
        cannot = [o for o in orders if o > MAX_BDEV_ORDER or (o > 0 and not large)]
        if not cannot:
            return orders
        sizes = ", ".join(format_size(PAGE_SIZE << o) for o in cannot)
        why = (f"block devices take logical blocks up to {format_size(PAGE_SIZE << MAX_BDEV_ORDER)}"
               if large else "folios above PAGE_SIZE in a block device's page cache need "
               f"Linux {'.'.join(map(str, LARGE_BDEV_FOLIOS))} or later")
        if given:
            raise VMError(f"kernel {release} cannot give block2mtd {sizes} folios ({why}); "
                          "pass --folio-orders the kernel can give")
        kept = [o for o in orders if o not in cannot] or [0]
        self.progress(f"kernel {release}: no {sizes} folio devices ({why}); MTD devices "
                      f"at {', '.join(format_size(PAGE_SIZE << o) for o in kept)} folios")
        return kept

    def fs_block_sizes(self, release: str) -> list[int]:
        """The block sizes to make ``--fs`` file systems at; the others skipped, said why."""
        sizes, _ = run_list(self.opts.pytest_args, "--folio-block-sizes", parse_block_size)
        kind = FILE_SYSTEMS[self.opts.fs]
        version = kernel_version(release)
        kept = []
        for bs in sizes:
            if bs > kind.max_block:
                why = f"{self.opts.fs} blocks are at most {format_size(kind.max_block)}"
            elif bs > PAGE_SIZE and version is not None and version < kind.large_blocks:
                why = (f"{self.opts.fs} blocks above PAGE_SIZE need Linux "
                       f"{'.'.join(map(str, kind.large_blocks))} or later, not {release}")
            else:
                kept.append(bs)
                continue
            self.progress(f"{self.opts.fs} at {format_size(bs)} blocks: skipped ({why})")
        if not kept:
            raise VMError(f"no --folio-block-sizes size {self.opts.fs} can have on kernel "
                          f"{release}")
        return kept

    def mtd_disks(self, work: Path, orders: list[int]) -> list[tuple[Disk, GuestDisk]]:
        """One sparse image per folio order, its logical block size the folio size."""
        disks = []
        for index, order in enumerate(orders):
            lbs = PAGE_SIZE << order
            if self.opts.mtd_size % lbs:
                raise VMError(f"--mtd-size {format_size(self.opts.mtd_size)} is not a "
                              f"multiple of the {format_size(lbs)} logical block size")
            image = work / f"mtd-{format_size(lbs)}.img"
            with image.open("wb") as f:
                f.truncate(self.opts.mtd_size)
            serial = f"folio-mtd-{format_size(lbs)}"
            disks.append((Disk(image, serial, lbs),
                          GuestDisk(serial, lbs, mtd=f"/dev/mtd{index}",
                                    erasesize=self.opts.erasesize)))
        return disks

    def fs_disks(self, work: Path, sizes: list[int]) -> list[tuple[Disk, GuestDisk]]:
        """One sparse image per block size, the file system made on the host."""
        if not sizes:
            return []
        kind = FILE_SYSTEMS[self.opts.fs]
        tool = shutil.which(kind.mkfs[0], path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
        if tool is None:
            raise VMError(f"{kind.mkfs[0]} not found: install {kind.package} "
                          f"(apt-get install {kind.package})")
        disks = []
        for bs in sizes:
            image = work / f"{self.opts.fs}-{format_size(bs)}.img"
            with image.open("wb") as f:
                f.truncate(FS_DISK_SIZE)
            cmd = [tool, *(a.format(bs=bs) for a in kind.mkfs[1:]), str(image)]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                reason = _last(proc.stderr + proc.stdout) or f"exit status {proc.returncode}"
                raise VMError(f"{shlex.join(cmd)} failed: {reason}")
            serial = f"folio-{self.opts.fs}-{format_size(bs)}"
            mountpoint = f"{GUEST_RUN}/{self.opts.fs}-{format_size(bs)}"
            disks.append((Disk(image, serial, 512),
                          GuestDisk(serial, 512, fstype=self.opts.fs, mountpoint=mountpoint)))
        return disks

    def execute(self) -> int:
        qemu = find_qemu()
        busybox = find_busybox()
        kernel = self.kernel()
        image = bootable_image(kernel, self.cache, self.progress)
        orders = self.mtd_orders(kernel.release)
        sizes = self.fs_block_sizes(kernel.release) if self.opts.fs != "ramfs" else []
        wanted = {**REQUIRED_MODULES}
        if self.opts.fs in FS_MODULES:
            wanted[self.opts.fs] = FS_MODULES[self.opts.fs]
        modules = []
        if kernel.modules is not None:
            modules = ModuleTree(kernel.modules, kernel.release).load_order(wanted, wanted)
        env = guest_env(self.environ, self.out.isatty())
        if self.opts.patches or self.opts.driver or self.opts.mtd_tests:
            modules, self.loaded = self.built_modules(kernel, modules, env)
        pytest_args, save = split_save(self.opts.pytest_args)
        with tempfile.TemporaryDirectory(prefix="pytest-folio-vm-") as tmp:
            work = Path(tmp)
            (work / "out").mkdir()
            disks = self.mtd_disks(work, orders) + self.fs_disks(work, sizes)
            guest = [g for _, g in disks]
            mtd = size_map({g.logical_block_size: g.mtd for g in guest if g.mtd})
            extra = [f"--folio-orders={','.join(map(str, orders))}"]
            fs = GUEST_RAMFS
            if sizes:
                fs = size_map(dict(zip(sizes, (g.mountpoint for g in guest if g.fstype),
                                       strict=True)))
                extra.append(f"--folio-block-sizes={','.join(format_size(b) for b in sizes)}")
            job = GuestJob(
                modules=[name for name, _ in modules], module_params={}, cwd=os.getcwd(),
                argv=guest_pytest_argv(sys.executable, pytest_args, self.opts.mtd_size,
                                       self.opts.erasesize, mtd, fs, extra),
                env=env, disks=guest)
            initrd = work / "initramfs.cpio"
            initrd.write_bytes(build_initramfs(busybox, modules, job))
            pycache = self.cache.root / "pycache"
            pycache.mkdir(parents=True, exist_ok=True)
            spent = warm_bytecode(warmup_argv(sys.executable, pytest_args, Path.cwd()),
                                  pycache, self.environ)
            self.progress(f"bytecode for the guest compiled on the host in {spent:.1f} s")
            machine = Machine(image=image, initrd=initrd, cmdline=BASE_CMDLINE,
                              out=work / "out", mem_mib=self.opts.mem_mib,
                              cpus=self.opts.cpus, pycache=pycache,
                              disks=tuple(d for d, _ in disks))
            self.progress(f"prepared kernel {kernel.release} ({image.name}, {len(modules)} "
                          f"modules, {len(disks)} disks) in "
                          f"{time.monotonic() - self.clock:.1f} s")
            status = self.boot(qemu, machine)
            self.collect(work / "out", save)
        return status

    def built_modules(self, kernel: Kernel, modules: list[tuple[str, bytes]],
                      env: dict[str, str]) -> tuple[list[tuple[str, bytes]], list[str]]:
        """``--patch``/``--driver``/``--mtd-tests``: build against ``kernel``, put the
        built modules into the load order, tell the guest where the mtd tests are."""
        if kernel.modules is None:
            raise VMError(f"kernel {kernel.release} has no module tree, so a built module "
                          "cannot replace its own (give --modules)")
        built = build_for_kernel(kernel, list(self.opts.patches), self.opts.driver,
                                 self.opts.mtd_tests, self.cache.root, self.progress,
                                 self.source)
        if built.mtd_tests is not None:
            env[MODULES_ENV] = str(built.mtd_tests)
        order = substitute(modules, built.modules, ModuleTree(kernel.modules, kernel.release),
                           kernel.release)
        return order, loaded_lines(built, [name for name, _ in order])

    def boot(self, qemu: str, machine: Machine) -> int:
        accels = self.accelerators()
        for accel in accels:
            console = Console(self.out, self.err, self.opts.console)
            console.on_start = self.loaded
            fallback = accel != accels[-1]
            self.progress(f"booting under {accel.upper()} ({machine.cpus} CPUs, "
                          f"{machine.mem_mib} MiB)")
            result = run_guest(
                qemu_command(qemu, dataclasses.replace(machine, accel=accel)), console,
                timeout=self.opts.timeout, ready=console.ready,
                boot_timeout=KVM_BOOT_TIMEOUT if fallback else None, done=console.done)
            if fallback and not console.ready():
                why = ("hung" if result.ended == "boot-timeout" else
                       f"failed ({_last(result.stderr) or console.last_line()})")
                self.progress(f"KVM guest {why} before init; falling back to TCG")
                self.kvm_marker().parent.mkdir(parents=True, exist_ok=True)
                self.kvm_marker().write_text(f"{why}\n")
                continue
            return self.outcome(console, result.ended, result.stderr)
        raise AssertionError("unreachable: the last accelerator returns")

    def outcome(self, console: Console, ended: str, stderr: str) -> int:
        if "error" in console.marks:
            raise VMError(f"guest: {console.marks['error'].strip()}")
        if "exit" not in console.marks:
            if ended == "timeout":
                raise VMError(f"the guest did not finish within {self.opts.timeout:g} s "
                              f"(qemu killed; last console line: {console.last_line()})")
            reason = _last(stderr) or console.last_line()
            raise VMError(f"qemu exited before the tests finished: {reason}")
        times = console.mark_times
        self.progress(f"guest ready {times.get('start', 0):.1f} s after qemu started; "
                      f"pytest ran {times['exit'] - times.get('start', 0):.1f} s")
        try:
            return int(console.marks["exit"])
        except ValueError:
            raise VMError(f"guest reported a bad exit status: {console.marks['exit']!r}") \
                from None

    def collect(self, out: Path, save: Path | None) -> None:
        """Copy the timing JSON and the kernel log back; note kernel warnings."""
        if save is not None:
            written = out / Path(GUEST_SAVE).name
            if written.is_file():
                save.parent.mkdir(parents=True, exist_ok=True)
                tmp = save.with_name(f".{save.name}.{os.getpid()}.tmp")
                shutil.copyfile(written, tmp)
                tmp.replace(save)  # atomically: a saved run is never half-written
                self.progress(f"timings saved to {save}")
            else:
                self.progress(f"pytest wrote no timings, so {save} was not written")
        dmesg = out / "dmesg.txt"
        if dmesg.is_file():
            text = dmesg.read_text(errors="replace")
            problems = [ln for ln in text.splitlines()
                        if any(w in ln for w in ("WARNING:", "BUG:", "Oops", "Call Trace"))]
            if problems:
                self.progress(f"guest kernel log has {len(problems)} warning line(s); "
                              f"first: {problems[0].strip()}")
            if self.opts.dmesg is not None:
                shutil.copyfile(dmesg, self.opts.dmesg)


def _last(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def run(args: argparse.Namespace) -> int:
    """The subcommand: pytest's exit status, or 125 with one line when the VM cannot run."""
    opts = check_options(args)
    try:
        return VMRun(opts).execute()
    except VMError as exc:
        print(f"python -m pytest_folio vm: error: {exc}", file=sys.stderr)
        return EXIT_VM_ERROR
    except KeyboardInterrupt:
        print("python -m pytest_folio vm: interrupted (qemu killed)", file=sys.stderr)
        return 130
