"""``python -m pytest_folio vm [options] -- PYTEST-ARGS``: pytest against a real kernel.

Prepares a kernel (the distribution's, a Debian suite's, cached, ``--kernel`` or
``--build-kernel``), one disk per folio order of the run (:mod:`.disks`: logical block
size PAGE_SIZE << order, block2mtd on it) and, with ``--fs xfs|ext4``, one scratch file
system per block size, builds the initramfs, boots it under qemu (KVM when it works, else
TCG) and runs pytest inside (:mod:`.guest`) with ``--folio-mtd=4K=/dev/mtd0,...
--folio-fs=<ramfs or 4K=DIR,...> --folio-allow-destructive`` plus the user's arguments.
pytest's output streams through, its exit status is returned, and a ``--folio-save`` file
written in the guest is copied to where the user asked for it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from pytest_folio.files import write_file
from pytest_folio.mtdtests.kernel_modules import INTERLEAVE_ENV, MODULES_ENV
from pytest_folio.sizes import format_size
from pytest_folio.terminal import progress
from pytest_folio.vm import EXIT_VM_ERROR, VMError
from pytest_folio.vm.bootimage import bootable_image
from pytest_folio.vm.build import (
    RAMFS_MODULE,
    Built,
    build_for_kernel,
    loaded_lines,
    module_forms,
    module_tree,
    stage_interleave,
    substitute,
)
from pytest_folio.vm.disks import fs_block_sizes, fs_disks, last_line, mtd_disks, mtd_orders
from pytest_folio.vm.guest import (
    GUEST_SAVE,
    Console,
    guest_env,
    guest_pytest_argv,
    size_map,
    split_save,
    warm_bytecode,
    warmup_argv,
)
from pytest_folio.vm.guests import (
    ControllerPlan,
    Guest,
    GuestConsole,
    GuestSession,
    guest_names,
    ramfs_args,
    serving_guest,
)
from pytest_folio.vm.initramfs import (
    GUEST_RAMFS,
    RAMFS_ARGS,
    GuestDisk,
    GuestJob,
    build_initramfs,
    find_busybox,
)
from pytest_folio.vm.kernel import (
    Kernel,
    KernelCache,
    fetch_distro_kernel,
    fetch_suite_kernel,
    user_kernel,
)
from pytest_folio.vm.kernelbuild import build_kernel, debian_source_tree
from pytest_folio.vm.lab import Lab, guest_modules
from pytest_folio.vm.nowrunning import describe
from pytest_folio.vm.powercut import cut_and_check
from pytest_folio.vm.qemu import (
    BASE_CMDLINE,
    Disk,
    Machine,
    find_qemu,
    kvm_usable,
    qemu_command,
    run_guest,
)
from pytest_folio.vm.runsettings import read_run_settings
from pytest_folio.vm.selftests import Place, build_selftests, pagecache_places, selftests_dir
from pytest_folio.vm.selftests import guest_argv as selftests_guest_argv
from pytest_folio.vm.source import KernelSource, SourceCache
from pytest_folio.vm.vmoptions import VMOptions, add_arguments, check_options
from pytest_folio.vmabi import GUEST_OUT

GUEST_KTAP = f"{GUEST_OUT}/ktap.log"

KVM_BOOT_TIMEOUT = 15.0  # TCG reaches init in about 2 s here; a KVM guest that has not is hung


def register(subparsers: Any) -> None:
    """Add the ``vm`` subcommand (the cli's one-line registration calls this)."""
    parser = subparsers.add_parser(
        "vm", help="run pytest inside a Linux kernel booted under qemu",
        description="Boot a Linux kernel under qemu with the host's root shared read-only, "
                    "one disk under block2mtd per folio order and a kernel ramfs (or "
                    "scratch file systems), and run pytest inside against them. Arguments "
                    "after -- go to pytest.")
    add_arguments(parser)
    parser.set_defaults(run=run)


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
        self.carries: list[str] = []  # "kernel R carries ramfs-blocksize.patch", too
        self.source: KernelSource | None = None  # --build-kernel's tree, for module builds
        self.ktap_log: Path | None = None        # --ktap: where the guest's log is kept
        self.patches = opts.patches  # what is left for modules once a kernel took its own
        self.where = ""              # a --host's agent: that machine, named in each line

    def progress(self, message: str) -> None:
        where = f"{self.where}: " if self.where else ""
        progress.step(f"folio-vm: {where}{message}", self.err)

    def kernel(self) -> Kernel:
        if self.opts.build_kernel is not None or self.opts.build_suite is not None:
            src = self.opts.build_kernel or debian_source_tree(
                self.opts.build_suite or "sid", self.cache.root, self.progress,
                fetch=not self.opts.no_build)
            built = build_kernel(src, self.cache.root, self.progress,
                                 patches=self.opts.patches, build=not self.opts.no_build)
            self.source, self.patches = built.source, built.for_modules
            if built.in_kernel:
                self.carries = [f"kernel {built.kernel.release} carries "
                                f"{' + '.join(p.name for p in built.in_kernel)} (built in)"]
            return built.kernel
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

    @contextlib.contextmanager
    def lab(self) -> Iterator[Lab]:
        """``--guest``: the matrix's preparations, in a private directory for the run."""
        qemu, busybox = find_qemu(), find_busybox()
        run = read_run_settings(self.opts.pytest_args, self.environ)
        self.warm(self.opts.pytest_args)
        with tempfile.TemporaryDirectory(prefix="pytest-folio-vm-") as tmp:
            yield Lab(self, qemu, busybox, run, Path(tmp))

    def execute(self) -> int:
        if self.opts.guest_specs:
            with self.lab() as lab:
                return lab.execute(self.opts.guest_specs, self.opts.hosts)
        qemu = find_qemu()
        busybox = find_busybox()
        run = read_run_settings(self.opts.pytest_args, self.environ)
        kernel = self.kernel()
        image = bootable_image(kernel.image, self.cache.root / "vmlinux", self.progress)
        orders = mtd_orders(run, kernel.release, self.progress)
        sizes = (fs_block_sizes(self.opts.fs, run, kernel.release, self.progress)
                 if self.opts.fs != "ramfs" else [])
        modules = guest_modules(kernel, self.opts.fs, bool(self.opts.guests))
        env = guest_env(self.environ, self.out.isatty())
        built = None
        ramfs_type = "ramfs"
        if self.patches or self.opts.driver or self.opts.mtd_tests:
            modules, built = self.built_modules(kernel, modules, env)
            forms = module_forms(built)
            part, unpatched = (" in part", "".join(
                f"; {f.split()[0]} is built in and runs unpatched" for f in built.left_out)
            ) if built.left_out else ("", "")
            self.carries += [f"kernel {kernel.release} carries {built.origin}{part} (module "
                             f"form: the patched {d} is module {f.name}, mounted as -t "
                             f"{f.name}; its built-in one is stock{unpatched})"
                             for d, f in forms.items()]
            if RAMFS_MODULE in built.modules:
                ramfs_type = RAMFS_MODULE
        pytest_args, save = split_save(self.opts.pytest_args)
        with tempfile.TemporaryDirectory(prefix="pytest-folio-vm-") as tmp:
            work = Path(tmp)
            (work / "out").mkdir()
            if built is not None and self.opts.interleave:
                env[INTERLEAVE_ENV] = str(stage_interleave(work / "interleave", modules,
                                                           built))
                self.loaded = [f"interleaving the stock {', '.join(built.modules)} and the "
                               f"one built with {built.origin} in this boot"]
            elif built is not None:
                self.loaded = loaded_lines(built, [name for name, _ in modules])
            disks = (mtd_disks(work, orders, self.opts.mtd_size, self.opts.erasesize)
                     + fs_disks(work, self.opts.fs, sizes))
            guest = [g for _, g in disks]
            mtd = size_map({g.logical_block_size: g.mtd for g in guest if g.mtd})
            extra = [f"--folio-orders={','.join(map(str, orders))}"]
            fs = GUEST_RAMFS
            ramfs_sizes: tuple[int, ...] = ()
            last: list[str] = []
            if self.opts.fs == "ramfs":  # the guest mounts them and names them for pytest
                ramfs_sizes = tuple(run.block_sizes)
                # after the user's options: the sizes the kernel could mount win over
                # the asked ones (the others were skipped, each with its reason)
                last.append(RAMFS_ARGS)
            if sizes:
                fs = size_map(dict(zip(sizes, (g.mountpoint for g in guest if g.fstype),
                                       strict=True)))
                extra.append(f"--folio-block-sizes={','.join(format_size(b) for b in sizes)}")
            argv = guest_pytest_argv(sys.executable, pytest_args, self.opts.mtd_size,
                                     self.opts.erasesize, mtd, fs, extra,
                                     now_running=True) + last
            if self.opts.ktap:
                mounted = dict(zip(sizes, (g.mountpoint for g in guest if g.fstype),
                                   strict=True))
                argv = self.selftests_argv(kernel, argv, pagecache_places(
                    self.opts.fs, list(run.block_sizes), mounted, kernel.release))
            job = GuestJob(
                modules=[name for name, _ in modules], module_params={}, cwd=os.getcwd(),
                argv=argv,
                env=env, disks=guest, ramfs_sizes=ramfs_sizes, ramfs_type=ramfs_type)
            initrd = work / "initramfs.cpio"
            initrd.write_bytes(build_initramfs(busybox, modules, job))
            pycache = self.warm(pytest_args)
            cmdline = " ".join(filter(None, (BASE_CMDLINE, self.opts.kernel_args)))
            machine = Machine(image=image, initrd=initrd, cmdline=cmdline,
                              out=work / "out", mem_mib=self.opts.mem_mib,
                              cpus=self.opts.cpus, pycache=pycache,
                              disks=tuple(d for d, _ in disks))
            self.progress(f"prepared kernel {kernel.release} ({image.name}, {len(modules)} "
                          f"modules, {len(disks)} disks) in "
                          f"{time.monotonic() - self.clock:.1f} s")
            if self.opts.guests:
                head = guest_pytest_argv(sys.executable, [], self.opts.mtd_size,
                                         self.opts.erasesize, mtd, fs, extra)
                return self.boot_guests(qemu, busybox, modules, job, machine, run.failures,
                                        lambda where: (mtd_disks(where, orders,
                                                                 self.opts.mtd_size,
                                                                 self.opts.erasesize)
                                                       + fs_disks(where, self.opts.fs,
                                                                  sizes)),
                                        head)
            status = (cut_and_check(self, qemu, machine, busybox, modules, job)
                      if self.opts.power_cut else self.boot(qemu, machine))
            self.collect(work / "out", save)
        return status

    def warm(self, pytest_args: list[str]) -> Path:
        """Compile the guest's bytecode on the host, into the cache's share for it."""
        pycache = self.cache.root / "pycache"
        pycache.mkdir(parents=True, exist_ok=True)
        spent = warm_bytecode(warmup_argv(sys.executable, pytest_args, Path.cwd()),
                              pycache, self.environ)
        self.progress(f"bytecode for the guest compiled on the host in {spent:.1f} s")
        return pycache

    def selftests_argv(self, kernel: Kernel, argv: list[str],
                       places: list[Place]) -> list[str]:
        """``--ktap``: the selftests built for ``kernel``, run in the guest before pytest
        (the page-cache cases once per place), whose session then reads their log as
        items."""
        source = self.source or SourceCache(self.cache.root).fetch(kernel, self.progress,
                                                                   self.opts.suite)
        tests = build_selftests(source, self.opts.ktap, self.cache.root, self.progress)
        self.ktap_log = selftests_dir(self.cache.root, source) / "last.ktap"
        return selftests_guest_argv(sys.executable, tests, GUEST_KTAP, argv, places,
                                    kernel.release)

    def boot_guests(self, qemu: str, busybox: Path, modules: list[tuple[str, bytes]],
                    job: GuestJob, machine: Machine, failures: Path | None,
                    make_disks: Callable[[Path], list[tuple[Disk, GuestDisk]]],
                    head: list[str]) -> int:
        """``--guests N``: each guest gets disks, a results share, an initramfs running
        the worker server and a worker channel of its own; the controller runs here."""
        machine = dataclasses.replace(machine, accel=self.accelerators()[0])
        guests = []
        for name in guest_names(self.opts.guests):
            where = machine.out.parent / name
            (where / "out").mkdir(parents=True)
            guests.append(serving_guest(name, machine.out.parent, busybox, modules, job,
                                        machine, make_disks(where),
                                        GuestConsole(name, self.err, self.opts.console)))
        session = GuestSession(self, qemu, guests, failures)

        def after(up: list[Guest]) -> ControllerPlan:
            """What the first guest's init made of the ramfs sizes (as in one guest:
            after the user's options, so the sizes the kernel could mount win)."""
            return ControllerPlan(ramfs_args(up[0].console.marks)
                                  if job.ramfs_sizes and up else [])
        status = session.execute(head, self.opts.pytest_args, after)
        for guest in guests:
            self.collect(guest.machine.out, None, guest.name)
        return status

    def built_modules(self, kernel: Kernel, modules: list[tuple[str, bytes]],
                      env: dict[str, str]) -> tuple[list[tuple[str, bytes]], Built]:
        """``--patch``/``--driver``/``--mtd-tests``: build against ``kernel`` and tell the
        guest where the mtd tests are; the load order (the built modules in place of
        the stock ones, unless ``--interleave``) and what was built."""
        tree = module_tree(kernel)
        built = build_for_kernel(kernel, list(self.patches), self.opts.driver,
                                 self.opts.mtd_tests, self.cache.root, self.progress,
                                 self.source, self.opts.suite)
        if built.mtd_tests is not None:
            env[MODULES_ENV] = str(built.mtd_tests)
        if self.opts.interleave:  # the stock modules boot; the guest swaps them
            return modules, built
        return substitute(modules, built.modules, tree, kernel.release), built

    def boot(self, qemu: str, machine: Machine) -> int:
        accels = self.accelerators()
        for accel in accels:
            console = Console(self.out, self.err, self.opts.console)
            console.on_start = self.carries + self.loaded
            fallback = accel != accels[-1]
            self.progress(f"booting under {accel.upper()} ({machine.cpus} CPUs, "
                          f"{machine.mem_mib} MiB)")
            result = run_guest(
                qemu_command(qemu, dataclasses.replace(machine, accel=accel)), console,
                timeout=self.opts.timeout, ready=console.ready,
                boot_timeout=KVM_BOOT_TIMEOUT if fallback else None, done=console.done)
            if fallback and not console.ready():
                why = ("hung" if result.ended == "boot-timeout" else
                       f"failed ({last_line(result.stderr) or console.last_line()})")
                self.progress(f"KVM guest {why} before init; falling back to TCG")
                self.kvm_marker().parent.mkdir(parents=True, exist_ok=True)
                self.kvm_marker().write_text(f"{why}\n")
                continue
            return self.outcome(console, result.ended, result.stderr, machine.out)
        raise AssertionError("unreachable: the last accelerator returns")

    def outcome(self, console: Console, ended: str, stderr: str, share: Path) -> int:
        if "error" in console.marks:
            raise VMError(f"guest: {console.marks['error'].strip()}")
        if "exit" not in console.marks:
            if ended == "timeout":
                running = describe(share, time.time())
                raise VMError(f"the guest did not finish within {self.opts.timeout:g} s "
                              f"(qemu killed; {running or 'no test had started'}; last "
                              f"console line: {console.last_line()})")
            reason = last_line(stderr) or console.last_line()
            raise VMError(f"qemu exited before the tests finished: {reason}")
        times = console.mark_times
        self.progress(f"guest ready {times.get('start', 0):.1f} s after qemu started; "
                      f"pytest ran {times['exit'] - times.get('start', 0):.1f} s")
        try:
            return int(console.marks["exit"])
        except ValueError:
            raise VMError(f"guest reported a bad exit status: {console.marks['exit']!r}") \
                from None

    def collect(self, out: Path, save: Path | None, name: str = "") -> None:
        """Copy the timing JSON and the kernel log back; note kernel warnings (``name``:
        of that guest of a ``--guests`` run, whose log goes to ``--dmesg``'s name with
        the guest's added)."""
        if save is not None:
            written = out / Path(GUEST_SAVE).name
            if written.is_file():
                save.parent.mkdir(parents=True, exist_ok=True)
                # atomically, through an exclusive temporary: never half written, and
                # never through a symlink planted in a directory others may write
                write_file(save, written.read_bytes())
                self.progress(f"timings saved to {save}")
            else:
                self.progress(f"pytest wrote no timings, so {save} was not written")
        dmesg = out / "dmesg.txt"
        if dmesg.is_file():
            text = dmesg.read_text(errors="replace")
            problems = [ln for ln in text.splitlines()
                        if any(w in ln for w in ("WARNING:", "BUG:", "Oops", "Call Trace"))]
            if problems:
                self.progress(f"{name or 'guest'} kernel log has {len(problems)} warning "
                              f"line(s); first: {problems[0].strip()}")
            target = self.opts.dmesg
            if target is not None and name:
                target = target.with_name(f"{target.stem}-{name}{target.suffix}")
            if target is not None:
                write_file(target, dmesg.read_bytes())
        ktap = out / Path(GUEST_KTAP).name
        if self.ktap_log is not None and ktap.is_file():
            write_file(self.ktap_log, ktap.read_bytes())
            self.progress(f"the selftests' KTAP log: {self.ktap_log} (--folio-ktap reads "
                          "it again)")


def run(args: argparse.Namespace) -> int:
    """The subcommand: pytest's exit status, or 125 with one line when the VM cannot run."""
    opts = check_options(args)
    terminated = []

    def terminate(signum: int, frame: object) -> None:
        """SIGTERM (``timeout``, a CI runner) unwinds as Ctrl-C does: qemu's process
        group is killed and the temporary directories removed on the way out."""
        terminated.append(signum)
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        return VMRun(opts).execute()
    except VMError as exc:
        print(f"python -m pytest_folio vm: error: {exc}", file=sys.stderr)
        return EXIT_VM_ERROR
    except KeyboardInterrupt:
        how = "terminated" if terminated else "interrupted"
        print(f"python -m pytest_folio vm: {how} (qemu killed)", file=sys.stderr)
        return 128 + (signal.SIGTERM if terminated else signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, previous)
