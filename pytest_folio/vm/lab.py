"""``vm --guest SPEC ...``: a matrix of guests, each prepared from its own SPEC (kernel,
file system, orders, block sizes), booted side by side and run as the xdist workers of
one session (:mod:`pytest_folio.vm.guests`), whose items the matrix parametrizes
(:mod:`pytest_folio.vm.matrix`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from pytest_folio.mtdtests.kernel_modules import MODULES_ENV
from pytest_folio.sizes import format_size, parse_size
from pytest_folio.vm import VMError
from pytest_folio.vm.agent import READY, UP, RemoteHost, agent_request
from pytest_folio.vm.bootimage import bootable_image
from pytest_folio.vm.build import (
    RAMFS_MODULE,
    Built,
    build_for_kernel,
    loaded_lines,
    module_tree,
    substitute,
)
from pytest_folio.vm.disks import fs_block_sizes, fs_disks, mtd_disks, mtd_orders
from pytest_folio.vm.guest import guest_env, guest_pytest_argv, size_map
from pytest_folio.vm.guests import (
    ControllerPlan,
    Guest,
    GuestConsole,
    GuestSession,
    ramfs_kept,
    serving_guest,
)
from pytest_folio.vm.initramfs import GUEST_RAMFS, GuestDisk, GuestJob
from pytest_folio.vm.kernel import (
    FS_MODULES,
    REQUIRED_MODULES,
    WORKER_MODULES,
    Kernel,
    fetch_suite_kernel,
    user_kernel,
)
from pytest_folio.vm.matrix import (
    MATRIX_ENV,
    Group,
    GuestSpec,
    HostSpec,
    Matrix,
    default_label,
)
from pytest_folio.vm.modules import ModuleTree
from pytest_folio.vm.qemu import BASE_CMDLINE, Machine
from pytest_folio.vm.runsettings import RunSettings

if TYPE_CHECKING:
    from pytest_folio.vm.runner import VMRun


def guest_modules(kernel: Kernel, fs: str, worker: bool) -> list[tuple[str, bytes]]:
    """The modules a guest loads, in order: the root's and the devices', ``fs``'s, and
    the worker channel's for a guest of a session (none: everything built in)."""
    wanted = {**REQUIRED_MODULES}
    if fs in FS_MODULES:
        wanted[fs] = FS_MODULES[fs]
    if worker:
        wanted.update(WORKER_MODULES)
    if kernel.modules is None:
        return []
    return ModuleTree(kernel.modules, kernel.release).load_order(wanted, wanted)


@dataclasses.dataclass
class Prepared:
    """One guest of the matrix, ready to boot; its group is known once it is up (a
    ramfs's block sizes are the ones its kernel kept)."""

    guest: Guest
    kernel: Kernel
    fs: str
    orders: list[int]
    block_sizes: list[int]
    disks: list[GuestDisk]
    name: str | None
    patches: tuple[Path, ...] = ()
    origin: str = ""            # what its modules were built with ("": stock)

    def group(self) -> Group:
        """Its group: at least one size each (fs_block_sizes refuses a kernel that takes
        none; a guest's init fails, so never listens, when it keeps no ramfs)."""
        mtd = {d.logical_block_size: d.mtd for d in self.disks if d.mtd}
        if self.fs == "ramfs":
            fs = ramfs_kept(self.guest.console.marks)
        else:
            fs = dict(zip(self.block_sizes, (d.mountpoint for d in self.disks if d.fstype),
                          strict=True))
        return Group(label=self.name or default_label(self.kernel.release, self.fs,
                                                      self.patches),
                     kernel=self.kernel.release, fs=self.fs, orders=tuple(self.orders),
                     block_sizes=tuple(sorted(fs)), mtd=size_map(mtd), fs_map=size_map(fs),
                     patch=self.origin)


class Lab:
    """Prepare every ``--guest``, boot them, run the controller over them."""

    def __init__(self, vm: VMRun, qemu: str, busybox: Path, run: RunSettings,
                 work: Path) -> None:
        self.vm, self.qemu, self.busybox, self.run, self.work = vm, qemu, busybox, run, work
        self.kernels: dict[tuple[Path | None, str | None, Path | None], Kernel] = {}
        self.builds: dict[tuple[Kernel, tuple[Path, ...]], Built] = {}

    def kernel(self, spec: GuestSpec) -> Kernel:
        """The SPEC's kernel (the run's without one), fetched once per run."""
        key = (spec.kernel, spec.suite, spec.modules)
        if key not in self.kernels:
            if spec.kernel is not None:
                self.kernels[key] = user_kernel(spec.kernel, spec.modules)
            elif spec.suite is not None:
                self.kernels[key] = fetch_suite_kernel(self.vm.cache, spec.suite,
                                                       self.vm.progress)
            else:
                self.kernels[key] = self.vm.kernel()
        return self.kernels[key]

    def modules(self, name: str, spec: GuestSpec, kernel: Kernel, fs: str,
                env: dict[str, str]) -> tuple[list[tuple[str, bytes]], Built | None]:
        """The load order of guest ``name``: its kernel's stock modules, with the ones
        its SPEC's ``patch=`` changes (built once per kernel and patches) in their
        place; ``--mtd-tests``: the kernel's mtd tests from the same tree, named in
        ``env``."""
        modules = guest_modules(kernel, fs, worker=True)
        if not spec.patches and not self.vm.opts.mtd_tests:
            return modules, None
        tree = module_tree(kernel)      # before building: a kernel without one takes none
        key = (kernel, spec.patches)
        if key not in self.builds:
            self.builds[key] = build_for_kernel(
                kernel, list(spec.patches), None, self.vm.opts.mtd_tests,
                self.vm.cache.root, lambda m: self.vm.progress(f"{name}: {m}"),
                suite=spec.suite or (self.vm.opts.suite if spec.kernel is None else None))
        built = self.builds[key]
        if built.mtd_tests is not None:
            env[MODULES_ENV] = str(built.mtd_tests)
        return substitute(modules, built.modules, tree, kernel.release), built

    def prepare(self, name: str, spec: GuestSpec, accel: str) -> Prepared:
        """Disks, initramfs and machine of guest ``name``, as ``vm`` makes them for one."""
        opts = self.vm.opts
        kernel = self.kernel(spec)
        fs = spec.fs or opts.fs
        run = dataclasses.replace(
            self.run, orders=list(spec.orders or self.run.orders),
            orders_given=spec.orders is not None or self.run.orders_given,
            block_sizes=list(spec.block_sizes or self.run.block_sizes))
        say = self.vm.progress
        orders = mtd_orders(run, kernel.release, lambda m: say(f"{name}: {m}"))
        sizes = (fs_block_sizes(fs, run, kernel.release, lambda m: say(f"{name}: {m}"))
                 if fs != "ramfs" else list(run.block_sizes))  # a ramfs: the kernel decides
        env = guest_env(self.vm.environ, False)
        modules, built = self.modules(name, spec, kernel, fs, env)
        where = self.work / name
        (where / "out").mkdir(parents=True)
        disks = (mtd_disks(where, orders, opts.mtd_size, opts.erasesize)
                 + fs_disks(where, fs, sizes if fs != "ramfs" else []))
        job = GuestJob(modules=[m for m, _ in modules], module_params={}, cwd=os.getcwd(),
                       argv=[], env=env,
                       ramfs_sizes=tuple(sizes) if fs == "ramfs" else (),
                       ramfs_type=(RAMFS_MODULE if built is not None
                                   and RAMFS_MODULE in built.modules else "ramfs"))
        machine = Machine(image=bootable_image(kernel.image, self.vm.cache.root / "vmlinux",
                                               say),
                          initrd=where / "initramfs.cpio",
                          cmdline=" ".join(filter(None, (BASE_CMDLINE, opts.kernel_args))),
                          out=where / "out", mem_mib=opts.mem_mib, cpus=opts.cpus,
                          accel=accel, pycache=self.vm.cache.root / "pycache")
        say(f"{name}: kernel {kernel.release}, {fs}, folio orders "
            f"{','.join(map(str, orders))}, block sizes "
            f"{','.join(format_size(b) for b in sizes)}")
        console = GuestConsole(name, self.vm.err, opts.console)
        if built is not None and spec.patches:
            console.on_start = loaded_lines(built, [m for m, _ in modules])
        guest = serving_guest(name, self.work, self.busybox, modules, job, machine, disks,
                              console)
        return Prepared(guest, kernel, fs, orders, sizes, [g for _, g in disks], spec.name,
                        spec.patches, built.origin if built is not None and spec.patches
                        else "")

    def session(self, named: list[tuple[str, GuestSpec]]
                ) -> tuple[GuestSession, dict[str, Prepared]]:
        accel = self.vm.accelerators()[0]
        prepared = {name: self.prepare(name, spec, accel) for name, spec in named}
        return (GuestSession(self.vm, self.qemu, [p.guest for p in prepared.values()],
                             self.run.failures), prepared)

    def execute(self, specs: tuple[GuestSpec, ...], hosts: tuple[HostSpec, ...]) -> int:
        """The controller's side: boot the guests placed here, start each ``--host``'s
        agent for its own, run one session over every guest that came up."""
        named = [(f"guest{i}", spec) for i, spec in enumerate(specs, start=1)]
        remotes = [RemoteHost(host, agent_request(
            self.vm.opts, host.ssh, [(n, s) for n, s in named if s.host == host.ssh]))
                   for host in hosts]
        try:
            session, prepared = self.session([(n, s) for n, s in named if s.host is None])

            def after(up: list[Guest]) -> ControllerPlan:
                """The matrix of the guests that came up, here and on the hosts; the
                controller's targets name one guest's path per size (the workers
                take their own)."""
                groups = {g.name: prepared[g.name].group() for g in up}
                remote = {}
                for host in remotes:
                    for name, (sock, group) in host.wait_ready(self.vm.progress).items():
                        groups[name] = group
                        remote[name] = host.tx_spec(name, sock)
                try:
                    matrix = Matrix.of(groups)
                except ValueError as exc:
                    raise VMError(str(exc)) from None
                for group in matrix.groups:
                    members = [n for n, label in matrix.guests.items()
                               if label == group.label]
                    self.vm.progress(f"{group.label}: {', '.join(members)}")
                return ControllerPlan(controller_targets(matrix),
                                      {MATRIX_ENV: matrix.to_json()}, remote)
            head = guest_pytest_argv(sys.executable, [], self.vm.opts.mtd_size,
                                     self.vm.opts.erasesize, "/dev/mtd0", GUEST_RAMFS)
            status = session.execute(head, self.vm.opts.pytest_args, after)
        finally:
            for host in remotes:
                host.close()
        for p in prepared.values():
            self.vm.collect(p.guest.machine.out, None, p.guest.name)
        return status

    def hold(self, named: list[tuple[str, GuestSpec]], out: TextIO, until: TextIO) -> None:
        """An agent's side: boot ``named``, say on ``out`` which came up (their sockets
        and groups, :data:`UP`) and keep them up until ``until`` ends (the controller
        hung up)."""
        session, prepared = self.session(named)

        def serve(up: list[Guest]) -> None:
            for guest in up:
                group = json.dumps(dataclasses.asdict(prepared[guest.name].group()))
                out.write(f"{UP} {guest.name} {guest.socket} {group}\n")
            out.write(f"{READY}\n")
            out.flush()
            until.read()
        session.hold(serve)
        for p in prepared.values():
            self.vm.collect(p.guest.machine.out, None, p.guest.name)


def controller_targets(matrix: Matrix) -> list[str]:
    """The controller's ``--folio-mtd``/``--folio-fs`` and the orders and block sizes of
    the whole matrix (after the user's arguments: what the guests were made at wins)."""
    mtd: dict[int, str] = {}
    fs: dict[int, str] = {}
    for group in matrix.groups:
        for part in filter(None, group.mtd.split(",")):
            size, _, path = part.partition("=")
            mtd.setdefault(parse_size(size), path)
        for part in group.fs_map.split(","):
            size, _, path = part.partition("=")
            fs.setdefault(parse_size(size), path)
    orders = sorted({o for g in matrix.groups for o in g.orders})
    return [f"--folio-mtd={size_map(mtd)}", f"--folio-fs={size_map(fs)}",
            f"--folio-orders={','.join(map(str, orders))}",
            f"--folio-block-sizes={','.join(format_size(b) for b in sorted(fs))}"]

