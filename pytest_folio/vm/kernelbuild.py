"""``vm --build-kernel SRC_DIR``: a kernel tree built once for the VM, and cached.

For a kernel whose compiler this host lacks (Debian's newer kernels), or a user's own
tree, the runner builds the kernel itself: the tree's ``allnoconfig`` with
:data:`VM_CONFIG` forced on (virtio, 9p, brd, block2mtd, the mtd tests, ramfs, XFS), out
of tree (``O=``), so the source directory is only read. The result (bzImage, the
modules installed under ``mods/``, and the build directory itself, which is what
``make -C DIR M=...`` builds modules against) is cached under ``CACHE/built-kernels/KEY``,
KEY a hash of the configuration and of the tree: ``git rev-parse HEAD`` plus ``git diff``
for a git checkout, else every file's path, size and modification time. The kernel is
built in that directory, never moved (its build directory's Makefile names its own path,
which every later ``make -C DIR M=...`` follows), and ``done`` is written last: a build
that is stopped or fails keeps its objects, and the next run with the same tree and
configuration resumes it (make rebuilds only what is missing) instead of starting again.

``--patch`` files that change built-in code (anything but the ``.c`` files of a module
the configuration builds as one: ramfs, mm/, a header) go into the tree itself: the tree
is copied into the cache entry (hard links, the patched files copied), the patches
applied there, and the kernel built from that copy; the patches are part of the key. The
other patches stay with :mod:`.build`, which builds their modules against the result.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from pytest_folio.vm import Progress, VMError, last_error, run_tool
from pytest_folio.vm.apt import suite_apt
from pytest_folio.vm.build import (
    BuildError,
    first_error_line,
    module_of,
    obj_config,
    touched_files,
)
from pytest_folio.vm.kernel import Kernel, user_kernel
from pytest_folio.vm.source import KernelSource

BUILD_TOOLS = ("make", "gcc", "flex", "bison", "bc")     # what building a kernel runs

# What the guest needs and what the suites test; everything else stays off. brd, mtd,
# block2mtd and the mtd tests are modules so that --patch/--driver can replace them.
# TRANSPARENT_HUGEPAGE: without it a block device takes no logical block above PAGE_SIZE
# (BLK_MAX_BLOCK_SIZE), so there would be no 16K/64K folio devices; the tracers give the
# filemap tracepoint that confirms each device's folio sizes.
VM_CONFIG = """\
CONFIG_64BIT=y
CONFIG_SMP=y
CONFIG_NR_CPUS=8
CONFIG_PRINTK=y
CONFIG_PRINTK_TIME=y
CONFIG_BUG=y
CONFIG_MULTIUSER=y
CONFIG_FUTEX=y
CONFIG_EPOLL=y
CONFIG_SIGNALFD=y
CONFIG_TIMERFD=y
CONFIG_EVENTFD=y
CONFIG_SHMEM=y
CONFIG_AIO=y
CONFIG_ADVISE_SYSCALLS=y
CONFIG_FILE_LOCKING=y
CONFIG_POSIX_TIMERS=y
CONFIG_SYSVIPC=y
CONFIG_FHANDLE=y
CONFIG_MEMFD_CREATE=y
CONFIG_HIGH_RES_TIMERS=y
CONFIG_BINFMT_ELF=y
CONFIG_BINFMT_SCRIPT=y
CONFIG_BLK_DEV_INITRD=y
CONFIG_RD_GZIP=y
CONFIG_MODULES=y
CONFIG_MODULE_UNLOAD=y
CONFIG_PVH=y
CONFIG_HYPERVISOR_GUEST=y
CONFIG_PARAVIRT=y
CONFIG_KVM_GUEST=y
CONFIG_ACPI=y
CONFIG_PCI=y
CONFIG_TTY=y
CONFIG_UNIX98_PTYS=y
CONFIG_SERIAL_8250=y
CONFIG_SERIAL_8250_CONSOLE=y
CONFIG_RTC_CLASS=y
CONFIG_RTC_DRV_CMOS=y
CONFIG_PROC_FS=y
CONFIG_PROC_SYSCTL=y
CONFIG_SYSFS=y
CONFIG_DEVTMPFS=y
CONFIG_TMPFS=y
CONFIG_TMPFS_XATTR=y
CONFIG_INOTIFY_USER=y
CONFIG_NET=y
CONFIG_INET=y
CONFIG_UNIX=y
CONFIG_BLOCK=y
CONFIG_BLK_DEV=y
CONFIG_VIRTIO_MENU=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_BLK=y
CONFIG_NET_9P=y
CONFIG_NET_9P_VIRTIO=y
CONFIG_NETWORK_FILESYSTEMS=y
CONFIG_9P_FS=y
CONFIG_9P_FS_POSIX_ACL=y
CONFIG_BLK_DEV_RAM=m
CONFIG_MTD=m
CONFIG_MTD_BLOCK2MTD=m
CONFIG_MTD_TESTS=m
CONFIG_XFS_FS=m
CONFIG_MAGIC_SYSRQ=y
CONFIG_DEBUG_KERNEL=y
CONFIG_TRANSPARENT_HUGEPAGE=y
CONFIG_FTRACE=y
CONFIG_ENABLE_DEFAULT_TRACERS=y
"""

PROGRESS_EVERY = 30.0  # seconds between progress lines of a kernel build


def tree_hash(src: Path) -> str:
    """What identifies a tree's contents: git's HEAD and diff, else path/size/mtime."""
    h = hashlib.sha256()
    head = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=False) if (src / ".git").exists() else None
    if head is not None and head.returncode == 0:
        diff = subprocess.run(["git", "-C", str(src), "diff", "HEAD"], capture_output=True,
                              check=False)
        h.update(head.stdout.encode() + diff.stdout)
        return h.hexdigest()[:20]
    for dirpath, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            st = os.lstat(os.path.join(dirpath, name))
            h.update(f"{os.path.relpath(os.path.join(dirpath, name), src)}\0{st.st_size}\0"
                     f"{st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:20]


def build_key(src: Path, config: str = VM_CONFIG, patches: tuple[Path, ...] = ()) -> str:
    """The cache key: the tree, the configuration and the patches built into the tree."""
    h = hashlib.sha256(f"{tree_hash(src)}\0{config}".encode())
    for patch in patches:
        h.update(b"\0patch\0" + patch.name.encode() + b"\0" + patch.read_bytes())
    return h.hexdigest()[:20]


def module_options(config: str = VM_CONFIG) -> set[str]:
    """The options the configuration builds as modules (``CONFIG_X=m``)."""
    return {line.split("=", 1)[0] for line in config.splitlines() if line.endswith("=m")}


def changes_built_in_code(patch: Path, src: Path, config: str = VM_CONFIG) -> bool:
    """Whether ``patch`` changes anything but the ``.c`` files of modules the
    configuration builds as modules: such a patch must go into the kernel itself."""
    modules = module_options(config)
    for file in touched_files(patch.read_text(errors="replace")):
        directory = src / Path(file).parent
        makefile = next((directory / n for n in ("Kbuild", "Makefile")
                         if (directory / n).is_file()), None)
        if makefile is None or not file.endswith(".c"):
            return True
        found = module_of(makefile, Path(file).name)
        if found is None or obj_config(makefile, found[0]) not in modules:
            return True
    return False


def _patched_tree(src: Path, entry: Path, patches: tuple[Path, ...], log: Path,
                  progress: Progress) -> Path:
    """``entry/src``: the tree with ``patches`` applied, made once (``patched`` marks
    it). Files are hard links to the tree's where it can (a copy elsewhere); each file a
    patch changes is copied first, so the user's tree never changes."""
    tree = entry / "src"
    if (entry / "patched").is_file():
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    progress(f"applying {', '.join(p.name for p in patches)} to a copy of {src}")
    with log.open("a") as out:
        for cmd in (["cp", "-al", f"{src.resolve()}/.", str(tree)],
                    ["cp", "-a", f"{src.resolve()}/.", str(tree)]):
            out.write(f"$ {' '.join(cmd)}\n")
            out.flush()
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT,
                              check=False).returncode == 0:
                break
            shutil.rmtree(tree, ignore_errors=True)
        else:
            raise BuildError(f"cannot copy {src} into {tree} (log: {log})")
        for patch in patches:
            for file in touched_files(patch.read_text(errors="replace")):
                path = tree / file
                if path.is_file():  # break the hard link: patch then writes our copy
                    data = path.read_bytes()
                    path.unlink()
                    path.write_bytes(data)
            cmd = ["patch", "-p1", "--batch", "--forward", "-d", str(tree), "-i",
                   str(patch.resolve())]
            out.write(f"$ {' '.join(cmd)}\n")
            out.flush()
            if subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT,
                              check=False).returncode != 0:
                raise BuildError(f"{patch.name} does not apply to {src} (log: {log})")
    (entry / "patched").write_text("".join(f"{p.name}\n" for p in patches))
    return tree


def _make(args: list[str], log: Path, progress: Progress, what: str) -> None:
    """Run make into ``log``, saying every PROGRESS_EVERY s how far it got."""
    start = time.monotonic()
    with log.open("a") as out:
        out.write(f"$ make {' '.join(args)}\n")
        out.flush()
        offset = out.tell()
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
        proc = subprocess.Popen(["make", *args], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)
        try:
            last = start
            while proc.poll() is None:
                time.sleep(1)
                if time.monotonic() - last >= PROGRESS_EVERY:
                    last = time.monotonic()
                    progress(f"{what}: {last - start:.0f} s, at {_last_line(log)}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if proc.returncode != 0:
        raise BuildError(f"{what} failed: {first_error_line(log, offset)} (log: {log})")


def _last_line(log: Path) -> str:
    with log.open("rb") as f:
        f.seek(max(0, log.stat().st_size - 4096))
        lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines()
                 if ln.strip()]
    return lines[-1] if lines else "no output"


def _build(src: Path, entry: Path, progress: Progress, jobs: int,
           patches: tuple[Path, ...] = ()) -> None:
    """Configure, build and install the kernel in ``entry``; ``done`` marks it finished."""
    resumed = (entry / "configured").is_file()
    entry.mkdir(exist_ok=True)
    log = entry / "build.log"
    if patches:
        src = _patched_tree(src, entry, patches, log, progress)
    fragment = entry / "vm.config"
    fragment.write_text(VM_CONFIG)
    base = ["-C", str(src.resolve()), f"O={entry / 'build'}"]
    progress(f"{'resuming the stopped build of' if resumed else 'building'} kernel {src} "
             f"once for the VM (minimal configuration, -j{jobs}; log: {log})")
    if not resumed:
        _make([*base, f"KCONFIG_ALLCONFIG={fragment}", "allnoconfig"], log, progress,
              "configuring the kernel")
        (entry / "configured").write_text("")
    _make([*base, f"-j{jobs}", "bzImage", "modules"], log, progress, "building the kernel")
    shutil.rmtree(entry / "mods", ignore_errors=True)
    _make([*base, f"INSTALL_MOD_PATH={entry / 'mods'}", "modules_install"], log, progress,
          "installing its modules")
    (entry / "done").write_text("built\n")


def debian_source_tree(suite: str, cache_root: Path, progress: Progress,
                       fetch: bool = True) -> Path:
    """The newest ``linux-source-X.Y`` of Debian ``suite`` (what its ``linux-source``
    depends on), fetched through the suite's private apt configuration and unpacked once
    into ``CACHE/trees/linux-source-X.Y`` (its version beside it, in ``.version``); a
    newer version replaces it. Offline, the lists of the last refresh decide. Without
    ``fetch``, a tree not cached at that version is a VMError."""
    apt = suite_apt(cache_root, suite)
    names = [d for d in apt.depends("linux-source") if d.startswith("linux-source-")]
    if not names:
        raise VMError(f"Debian {suite} has no linux-source package (apt-cache depends "
                      "linux-source names no linux-source-X.Y)")
    name, version = names[0], apt.version(names[0])
    tree = cache_root / "trees" / name
    stamp = tree.with_name(f"{name}.version")
    if (tree / "Makefile").is_file() and stamp.is_file() and \
            stamp.read_text().strip() == version:
        progress(f"kernel source {name} {version} from Debian {suite} (cached, {tree})")
        return tree
    if not fetch:
        raise VMError(f"no cached {name} {version} of Debian {suite} in {tree.parent} "
                      "(--no-build fetches and builds nothing)")
    progress(f"fetching {name} {version} from Debian {suite} (apt-get download) and "
             f"unpacking it into {tree}")
    deb = apt.fetch(name, version)
    tree.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".unpack-", dir=tree.parent) as tmp:
        for cmd in (["dpkg-deb", "-x", str(deb), f"{tmp}/pkg"],
                    ["tar", "-xJf", f"{tmp}/pkg/usr/src/{name}.tar.xz", "-C", tmp]):
            proc = run_tool(cmd)
            if proc.returncode != 0:
                raise VMError(f"cannot unpack {deb.name}: {last_error(proc)}")
        shutil.rmtree(tree, ignore_errors=True)
        (Path(tmp) / name).rename(tree)
    stamp.write_text(f"{version}\n")
    return tree


@dataclasses.dataclass(frozen=True)
class BuiltKernel:
    """What :func:`build_kernel` gives: the kernel to boot, the source modules are built
    against, and which patches went into the kernel and which are left for modules."""

    kernel: Kernel
    source: KernelSource
    in_kernel: tuple[Path, ...]
    for_modules: tuple[Path, ...]


def build_kernel(src: Path, cache_root: Path, progress: Progress,
                 jobs: int | None = None, patches: tuple[Path, ...] = (),
                 build: bool = True) -> BuiltKernel:
    """The tree ``src`` built for the VM (cached), with the ``patches`` that change
    built-in code applied to (a copy of) the tree. Without ``build``, a build not in the
    cache is a VMError."""
    if not (src / "Makefile").is_file() or not (src / "Kconfig").is_file():
        raise VMError(f"--build-kernel {src}: not a kernel source tree (no Makefile and "
                      "Kconfig)")
    start = time.monotonic()
    in_kernel = tuple(p for p in patches if changes_built_in_code(p, src))
    for_modules = tuple(p for p in patches if p not in in_kernel)
    key = build_key(src, VM_CONFIG, in_kernel)
    entry = cache_root / "built-kernels" / key
    if not (entry / "done").is_file() and not build:
        raise VMError(f"no cached build of kernel {src}{_with(in_kernel)} in {entry.parent} "
                      "(--no-build builds nothing)")
    if not (entry / "done").is_file():
        for tool in BUILD_TOOLS:
            if shutil.which(tool) is None:
                raise VMError(f"--build-kernel needs {tool}: install it (apt-get install "
                              "build-essential flex bison bc libelf-dev libssl-dev)")
        entry.parent.mkdir(parents=True, exist_ok=True)
        with (entry.parent / f"{key}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one build of a tree at a time
            if not (entry / "done").is_file():
                _build(src, entry, progress, jobs or os.cpu_count() or 1, in_kernel)
        progress(f"built kernel {src}{_with(in_kernel)} in {time.monotonic() - start:.0f} s "
                 f"({entry})")
    else:
        progress(f"kernel {src}{_with(in_kernel)} built before ({entry}, tree, patches and "
                 "configuration unchanged)")
    out = entry / "build"
    kernel = user_kernel(out / "arch/x86/boot/bzImage", entry / "mods")
    tree = entry / "src" if in_kernel else src.resolve()
    source = KernelSource(kernel.release, f"tree {key}", entry, out, None, "gcc",
                          local_tree=tree)
    return BuiltKernel(kernel, source, in_kernel, for_modules)


def _with(patches: tuple[Path, ...]) -> str:
    return f" with {' + '.join(p.name for p in patches)}" if patches else ""
