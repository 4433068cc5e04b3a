"""The ``vm`` subcommand's options: the table argparse reads, and their checks.

:func:`add_arguments` declares them; :func:`check_options` turns what argparse parsed into
a :class:`VMOptions` or one :class:`~pytest_folio.errors.CommandError` line (exit 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import pwd
import re
import stat
from pathlib import Path
from typing import Any

from pytest_folio.errors import CommandError
from pytest_folio.inputs import describe_file_type, read_limited, regular_file
from pytest_folio.options import check_reference_geometry
from pytest_folio.sizes import format_size, parse_size
from pytest_folio.vm import cache_root
from pytest_folio.vm.apt import DEBIAN_PREFIX, check_suite
from pytest_folio.vm.disks import FILE_SYSTEMS
from pytest_folio.vm.matrix import (
    GuestSpec,
    HostSpec,
    check_guest_specs,
    check_host_specs,
    spread_guests,
)
from pytest_folio.vm.powercut import default_args
from pytest_folio.vm.selftests import parse_ktap_tests

MAX_GUEST_CPUS = 288        # qemu's q35 machine's limit
MIN_GUEST_MEM = 384 << 20  # kernel, Python and pytest, besides the devices' page cache


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
        if not math.isfinite(value):        # nan passes "> 0"; an inf deadline never fires
            raise argparse.ArgumentTypeError(f"must be a finite number: {text!r}")
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value
    return parse



def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's options (everything after ``--`` goes to pytest)."""
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
    parser.add_argument("--kernel-args", default="", metavar="ARGS",
                        help="append these to the guest kernel's command line, e.g. "
                             "init_on_alloc=0: Debian's kernels zero every page they "
                             "allocate, which hides a page cache that leaves stale bytes")
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
    parser.add_argument("--build-kernel", type=Path, metavar="SRC_DIR|debian:SUITE",
                        help="build this kernel tree (or that Debian suite's newest "
                             "linux-source, fetched and cached) once with a minimal "
                             "configuration for the VM (cached by tree, patches and "
                             "configuration) and boot it")
    parser.add_argument("--no-build", action="store_true",
                        help="with --build-kernel: boot its cached build only; without one "
                             "(or without the tree, for debian:SUITE) exit 125 saying so "
                             "instead of building (a kernel build takes tens of minutes)")
    parser.add_argument("--mtd-tests", action="store_true",
                        help="build the kernel's drivers/mtd/tests from the same source for "
                             "the test_kernel_mtd_* items")
    parser.add_argument("--interleave", action="store_true",
                        help="with --patch/--driver: boot the stock modules and swap the "
                             "stock and the built ones in turn in the one guest, so "
                             "test_kernel_mtd_speedtest_interleaved (with --mtd-tests) times "
                             "base and patched alternately (a busy host slows both alike) "
                             "and test_block2mtd_invalidate_race_interleaved races both")
    parser.add_argument("--power-cut", action="store_true",
                        help="two boots on the same disks: the first writes to every "
                             "block2mtd device (with --fs xfs|ext4: to every scratch file "
                             "system) and is killed (a power cut), the second checks every "
                             "byte against what the cut may leave (pytest arguments default "
                             "to pytest_folio.suites.test_kernel_powercut, with --fs to "
                             "test_kernel_fs_powercut)")
    parser.add_argument("--ktap", metavar="SET|NAMES",
                        help="also run the kernel's own selftests in the guest and report "
                        "their KTAP results as items of the session: 'mm' (the large-folio "
                        "mm selftests) or selftest names, comma-separated; built from the "
                        "kernel's Debian source; split_huge_page_test's page-cache cases "
                        "run once per --fs scratch file system and on a huge=always tmpfs")
    parser.add_argument("--guests", type=_positive(int), default=0, metavar="N",
                        help="boot N guests and run one pytest session on the host whose "
                             "xdist workers are the guests (one worker each): one "
                             "collection, seed, summary and --folio-save for all of them")
    parser.add_argument("--guest", action="append", default=[], metavar="SPEC",
                        help="boot one guest of a matrix (repeatable; one session over "
                             "all, like --guests): SPEC is key=value pairs joined by "
                             "commas, kernel=IMAGE|debian:SUITE, modules=DIR, "
                             "fs=ramfs|xfs|ext4, block-sizes=4k+64k, orders=0+2, "
                             "name=LABEL, host=HOST (a --host); unset keys take the run's. "
                             "Items that use a kernel target run once per kind of guest, "
                             "their ids ending in its label (xfs@RELEASE)")
    parser.add_argument("--host", action="append", default=[],
                        metavar="ssh=HOST//python=PY",
                        help="another machine that boots the --guest SPECs saying "
                             "host=HOST (with --guests N: its share of the N guests), "
                             "with its own kernel cache (//cache=DIR: another "
                             "than its default) and its own copy of this package and the "
                             "tests at the same path (repeatable; //ssh_config=FILE: ssh's "
                             "-F)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="-- PYTEST-ARGS")


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
    build_suite: str | None = None  # --build-kernel debian:SUITE
    no_build: bool = False
    interleave: bool = False
    power_cut: bool = False
    kernel_args: str = ""
    ktap: tuple[str, ...] = ()
    guests: int = 0  # vm --guests N: that many guests as the xdist workers of one session
    guest_specs: tuple[GuestSpec, ...] = ()  # vm --guest SPEC...: a matrix of guests
    hosts: tuple[HostSpec, ...] = ()  # vm --host ssh=HOST...: machines booting some of them


def check_cache(cache: Path) -> None:
    """The host imports byte code and boots kernels and modules from the cache: one that
    another user owns or may write, anywhere inside (``kernels/``, ``builds/``, an entry,
    where a symlink in it leads), is refused (CommandError) before anything is read.
    Every directory is checked, not only the top: a writable ``kernels/`` lets anyone
    swap an entry however the top directory is kept."""
    try:
        info = cache.stat()
    except FileNotFoundError:
        return          # made by this user, with this user's umask
    except OSError as exc:
        raise CommandError(f"cache {cache}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise CommandError(f"cache {cache}: is {describe_file_type(info.st_mode)}, not a "
                           "directory (--cache-dir or PYTEST_FOLIO_CACHE names a directory)")
    _check_trusted(cache, cache, info)
    for top, dirs, _ in os.walk(cache):     # symlinks are listed, not descended into
        for name in dirs:
            path = Path(top, name)
            try:
                info = path.stat()          # where a symlink leads is what is used
            except OSError:
                continue                    # a dangling link: nothing is read from it
            _check_trusted(cache, path, info)


def _apt_download_area(cache: Path, path: Path, info: os.stat_result) -> bool:
    """apt's own directories in the cache's apt state (``apt/SUITE/.../partial``,
    ``auxfiles``): apt makes them for its system user ``_apt``, downloads into them as
    that user and checks every file's hash before it moves it out, so that owner is
    apt's, not another user's (still: none of them writable by others)."""
    if not path.is_relative_to(cache / "apt") or info.st_mode & 0o022:
        return False
    try:
        return info.st_uid == pwd.getpwnam("_apt").pw_uid
    except KeyError:
        return False


def _check_trusted(cache: Path, path: Path, info: os.stat_result) -> None:
    where = "" if path == cache else f"{path}: "
    if info.st_uid != os.geteuid() and not _apt_download_area(cache, path, info):
        raise CommandError(f"cache {cache}: {where}owned by uid {info.st_uid}, not this "
                           f"user ({os.geteuid()}); what it holds would run as you: use a "
                           "cache of your own (--cache-dir or PYTEST_FOLIO_CACHE)")
    if info.st_mode & 0o022:
        raise CommandError(f"cache {cache}: {where}writable by other users (mode "
                           f"{info.st_mode & 0o777:o}); what it holds would run as you: "
                           f"chmod {'' if path == cache else '-R '}go-w {cache}")


# A patch is read whole by patch(1) and kept in the build cache's key: a larger "patch"
# is not one a kernel module build takes.
MAX_PATCH_BYTES = 64 << 20
_HUNK = re.compile(rb"^@@ -\d+(,\d+)? \+\d+(,\d+)? @@", re.MULTILINE)


def check_patch(patch: Path) -> None:
    """A ``--patch`` is a regular file holding a unified diff (a ``@@ -a,b +c,d @@``
    hunk, or git's ``diff --git`` header): CommandError of one line saying what it is
    otherwise (missing, a directory, a device, another kind of text)."""
    why = regular_file(patch, "a patch file")
    if why is None:
        try:
            text = read_limited(patch, CommandError, MAX_PATCH_BYTES, "patch")
        except CommandError as exc:
            raise CommandError(f"--patch {exc}") from None
        if not (_HUNK.search(text) or text.startswith(b"diff --git ")
                or b"\ndiff --git " in text):
            why = "not a unified diff (no '@@ -N,N +N,N @@' hunk, no 'diff --git' line)"
    if why is not None:
        raise CommandError(f"--patch {patch}: {why}")


def check_output_file(path: Path, option: str) -> None:
    """A file the run writes: not a directory or other non-regular file already there,
    in a directory that exists."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise CommandError(f"{option} {path}: {path.parent} is not a directory") \
                from None
        return
    except OSError as exc:
        raise CommandError(f"{option} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise CommandError(f"{option} {path}: is {describe_file_type(mode)}, not a file "
                           "to write the log to")


def host_memory() -> int | None:
    """This host's memory and swap in bytes, the most a qemu guest's memory can be
    (Linux's default overcommit refuses one allocation larger); None where the
    platform does not say."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            swap = next((int(line.split()[1]) << 10 for line in f
                         if line.startswith("SwapTotal:")), 0)
    except (OSError, ValueError, IndexError):
        swap = 0
    return physical + swap


def check_matrix_options(args: argparse.Namespace, guests: int, power_cut: bool,
                         ktap: tuple[str, ...], interleave: bool,
                         build: Path | None, what: str = "--guest") -> None:
    """``--guest`` is the matrix's form of ``--guests``; what one guest's boot does with
    a built kernel or module, a power cut or the selftests does not apply to it yet."""
    if guests:
        raise CommandError("--guests N and --guest SPEC do not go together: give one "
                           "--guest per guest (repeat a SPEC for several guests of it)")
    others = [name for name, given in (
        ("--power-cut", power_cut), ("--ktap", bool(ktap)), ("--interleave", interleave),
        ("--patch", bool(getattr(args, "patch", []))),
        ("--driver", getattr(args, "driver", None) is not None),
        ("--build-kernel", build is not None or getattr(args, "build_kernel", None)
         is not None)) if given]
    if others:
        raise CommandError(f"{what} and {others[0]} do not go together yet: a matrix "
                           "boots each kernel as it is, or with the modules its SPEC's "
                           "patch=FILE[+FILE] changes (or give kernel= an IMAGE you built)")


def check_options(args: argparse.Namespace) -> VMOptions:
    """Turn parsed arguments into :class:`VMOptions`; a mistake raises CommandError."""
    check_cache(args.cache_dir or cache_root())
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
        check_reference_geometry(args.mtd_size, args.erasesize)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    host = host_memory()
    if host is not None and (args.mem << 20) > host:
        raise CommandError(f"--mem {args.mem} MiB is more than this host's memory and "
                           f"swap ({host >> 20} MiB)")
    if (args.mem << 20) < args.mtd_size + MIN_GUEST_MEM:
        raise CommandError(
            f"--mem {args.mem} is too small for a {format_size(args.mtd_size)} MTD device "
            f"(needs at least {(args.mtd_size + MIN_GUEST_MEM) >> 20} MiB)")
    for patch in getattr(args, "patch", []):
        check_patch(patch)
    dmesg = getattr(args, "dmesg", None)
    if dmesg is not None:
        check_output_file(dmesg, "--dmesg")
    driver = getattr(args, "driver", None)
    if driver is not None and not driver.exists():
        raise CommandError(f"--driver {driver}: no such file or directory")
    build = getattr(args, "build_kernel", None)
    if build is not None and (args.kernel is not None or args.modules is not None):
        raise CommandError("--build-kernel boots the kernel it builds: leave out --kernel "
                           "and --modules")
    build_suite = None
    if build is not None and str(build).startswith(DEBIAN_PREFIX):
        try:
            build, build_suite = None, check_suite(str(build)[len(DEBIAN_PREFIX):])
        except ValueError as exc:
            raise CommandError(f"--build-kernel {build}: {exc}") from None
    elif build is not None and not build.is_dir():
        raise CommandError(f"--build-kernel {build}: no such directory")
    if getattr(args, "no_build", False) and build is None and build_suite is None:
        raise CommandError("--no-build goes with --build-kernel: it boots that build only "
                           "when it is cached")
    interleave = bool(getattr(args, "interleave", False))
    if interleave and not (getattr(args, "patch", []) or driver is not None):
        raise CommandError("--interleave swaps the stock and the built modules in one "
                           "boot: give --patch or --driver")
    kernel_args = str(getattr(args, "kernel_args", "") or "")
    if any(c in kernel_args for c in "\n\r\0"):
        raise CommandError("--kernel-args: one line of kernel parameters, e.g. "
                           "init_on_alloc=0")
    ktap: tuple[str, ...] = ()
    if getattr(args, "ktap", None) is not None:
        try:
            ktap = parse_ktap_tests(args.ktap)
        except ValueError as exc:
            raise CommandError(f"--ktap {args.ktap}: {exc}") from None
    pytest_args = list(args.pytest_args)
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    power_cut = bool(getattr(args, "power_cut", False))
    guests = int(getattr(args, "guests", 0) or 0)
    if guests and power_cut:
        raise CommandError("--guests and --power-cut do not go together: a power cut is "
                           "two boots of one guest on the same disks")
    if guests and ktap:
        raise CommandError("--guests and --ktap do not go together yet: the selftests run "
                           "before pytest in one guest (leave out --guests)")
    if ktap and (build is not None or build_suite is not None):
        raise CommandError("--build-kernel and --ktap do not go together: the VM's minimal "
                           "kernel configuration has no CONFIG_DEBUG_FS (nor KUnit), which "
                           "the mm selftests use; --ktap runs with Debian's kernels")
    hosts = check_host_specs(getattr(args, "host", []) or [])
    specs = check_guest_specs(getattr(args, "guest", []) or [], [h.ssh for h in hosts])
    spread = bool(guests and hosts and not specs)
    if spread:          # --guests N over the --host machines and this one
        if guests < len(hosts):
            raise CommandError(f"--guests {guests} leaves --host ssh={hosts[guests].ssh} "
                               "without a guest: give at least one guest per --host")
        specs = spread_guests(guests, hosts)
    idle = [h.ssh for h in hosts if not any(s.host == h.ssh for s in specs)]
    if idle:
        raise CommandError(f"--host ssh={idle[0]} boots no guest: place guests there "
                           f"with host={idle[0]} in their --guest SPEC")
    if specs:
        check_matrix_options(args, 0 if spread else guests, power_cut, ktap, interleave,
                             build, "--guests with --host" if spread else "--guest")
    for spec in specs:      # a --host's guests' patches are files on that machine
        for patch in spec.patches if spec.host is None else ():
            try:
                check_patch(patch)
            except CommandError as exc:
                raise CommandError(f"--guest {spec.text}: {exc}".replace(
                    "--patch ", "patch=", 1)) from None
    here = sum(1 for spec in specs if spec.host is None) if specs else guests
    if host is not None and here > 1 and here * (args.mem << 20) > host:
        raise CommandError(f"{here} guests of --mem {args.mem} MiB need more than this "
                           f"host's memory and swap ({host >> 20} MiB): fewer guests, a "
                           "smaller --mem, or some on other machines with --host")
    if args.cpus > MAX_GUEST_CPUS:
        raise CommandError(f"--cpus {args.cpus}: qemu's q35 machine takes at most "
                           f"{MAX_GUEST_CPUS}")
    if power_cut and not pytest_args:
        pytest_args = default_args(args.fs)
    return VMOptions(
        kernel=kernel, suite=suite, modules=args.modules, mtd_size=args.mtd_size,
        erasesize=args.erasesize, fs=args.fs, mem_mib=args.mem, cpus=args.cpus,
        timeout=args.timeout,
        accel=args.accel, cache_dir=args.cache_dir or cache_root(), console=args.console,
        dmesg=args.dmesg, pytest_args=pytest_args,
        patches=tuple(getattr(args, "patch", [])), driver=driver,
        mtd_tests=bool(getattr(args, "mtd_tests", False)), build_kernel=build,
        build_suite=build_suite, no_build=bool(getattr(args, "no_build", False)),
        interleave=interleave, power_cut=power_cut, kernel_args=kernel_args.strip(),
        ktap=ktap, guests=guests, guest_specs=specs, hosts=hosts)
