"""The kernel the guest boots, and the modules it needs.

Default: the distribution's current kernel package (on Debian, what ``linux-image-amd64``
depends on), fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x`` into a
cache directory, never installed, and reused while the package version stays the same.
``--kernel debian:SUITE`` fetches the current kernel of another Debian suite (sid,
trixie, ...) the same way, through a private apt configuration kept in the cache
(:class:`~pytest_folio.vm.apt.SuiteApt`), so the host's apt sources and lists are never
touched. ``--kernel IMAGE`` takes the user's own image and module tree.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

from pytest_folio.inputs import printable, regular_file
from pytest_folio.vm import Progress, Run, VMError, entry_name, last_error, publish, run_tool
from pytest_folio.vm.apt import (
    DEFAULT_META_PACKAGE,
    Archive,
    SuiteApt,
    download_package,
    resolve_kernel_package,
)
from pytest_folio.vm.bootimage import ELF_MAGIC, bzimage_release

# What the guest needs, and the option that builds it (named in the error when missing).
ROOT_MODULES = {
    "virtio_pci": "CONFIG_VIRTIO_PCI",
    "9pnet_virtio": "CONFIG_NET_9P_VIRTIO",
    "9p": "CONFIG_9P_FS",
}
DEVICE_MODULES = {
    "virtio_blk": "CONFIG_VIRTIO_BLK",
    "block2mtd": "CONFIG_MTD_BLOCK2MTD",
}
FS_MODULES = {"xfs": "CONFIG_XFS_FS", "ext4": "CONFIG_EXT4_FS"}
REQUIRED_MODULES = {**ROOT_MODULES, **DEVICE_MODULES}
WORKER_MODULES = {"virtio_console": "CONFIG_VIRTIO_CONSOLE"}  # vm --guests' worker channel


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A bootable image, its release string and its module tree (None: all built in)."""

    image: Path
    release: str
    modules: Path | None


class KernelCache:
    """Unpacked kernel packages under ``ROOT/kernels/PACKAGE_VERSION``, one per version.

    An entry appears by one rename of a fully unpacked directory, so an interrupted or
    concurrent fetch never leaves a half-unpacked kernel that a later run would trust.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def entry(self, package: str, version: str) -> Path:
        return self.root / "kernels" / entry_name(package, version)

    def lookup(self, package: str, version: str) -> Kernel | None:
        entry = self.entry(package, version)
        return kernel_from_tree(entry) if entry.is_dir() else None

    def newest(self) -> Kernel | None:
        """The most recently unpacked entry: used when apt cannot be asked."""
        kernels = self.root / "kernels"
        entries = [p for p in kernels.iterdir() if p.is_dir() and not p.name.startswith(".")] \
            if kernels.is_dir() else []
        if not entries:
            return None
        return kernel_from_tree(max(entries, key=lambda p: p.stat().st_mtime))

    def add(self, package: str, version: str, deb: Path | list[Path],
            run: Run = run_tool) -> Kernel:
        """Unpack ``deb`` (dpkg-deb -x, never installed; several: one tree, as a kernel
        split into image, modules and base packages) and publish it as an entry. A module
        tree shipped without modules.dep gets one from ``depmod -b``."""
        entry = self.entry(package, version)
        with publish(entry) as staging:
            for one in deb if isinstance(deb, list) else [deb]:
                proc = run(["dpkg-deb", "-x", str(one), str(staging)])
                if proc.returncode != 0:
                    raise VMError(f"cannot unpack {one.name}: {last_error(proc)}")
            # refuse a package without a kernel before publishing
            _add_modules_dep(kernel_from_tree(staging), staging, run)
        return kernel_from_tree(entry)


def fetch_suite_kernel(cache: KernelCache, suite: str, progress: Progress,
                       meta: str = DEFAULT_META_PACKAGE, run: Run = run_tool,
                       archive: Archive | None = None) -> Kernel:
    """The current kernel of Debian ``suite``: resolved at run time (so a suite that moved
    on gives its new kernel), cached per version. Without the archive, the last kernel
    this suite gave is used; with nothing cached that is one VMError line."""
    apt = SuiteApt(cache.root, suite, archive, run)
    last = apt.dir / "last-kernel"
    try:
        apt.refresh()
        package, version = resolve_kernel_package(meta, apt.run)
    except VMError as exc:
        entry = Path(last.read_text().strip()) if last.is_file() else None
        if entry is None or not entry.is_dir():
            raise
        kernel = kernel_from_tree(entry)
        progress(f"{exc}; using the cached debian:{suite} kernel {kernel.release}")
        return kernel
    cached = cache.lookup(package, version)
    if cached is not None:
        progress(f"kernel debian:{suite} {package} {version} (cached)")
        kernel = cached
    else:
        # Debian's 7.x image package is a small meta package: the kernel, its modules and
        # its base files come in packages of the same ABI name that it depends on.
        abi = package[len("linux-image-"):]
        parts = [package, *(d for d in apt.depends(package)
                            if d.startswith("linux-") and d.endswith(abi) and d != package)]
        progress(f"fetching debian:{suite} {' '.join(parts)} {version} (apt-get download)")
        cache.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".download-", dir=cache.root) as tmp:
            debs = []
            for part in parts:
                into = Path(tmp) / part
                into.mkdir()
                debs.append(download_package(part, apt.version(part), into, apt.run))
            progress(f"unpacking {len(debs)} package(s) into {cache.entry(package, version)}")
            kernel = cache.add(package, version, debs, run)
    last.write_text(f"{cache.entry(package, version)}\n")
    return kernel


def fetch_distro_kernel(cache: KernelCache, progress: Progress,
                        meta: str = DEFAULT_META_PACKAGE, run: Run = run_tool) -> Kernel:
    """The distribution's current kernel: from the cache when this version is there."""
    try:
        package, version = resolve_kernel_package(meta, run)
    except VMError as exc:
        cached = cache.newest()
        if cached is None:
            raise
        progress(f"{exc}; using the cached kernel {cached.release}")
        return cached
    kernel = cache.lookup(package, version)
    if kernel is not None:
        progress(f"kernel {package} {version} (cached)")
        return kernel
    progress(f"fetching {package} {version} (apt-get download)")
    cache.root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=cache.root) as tmp:
        deb = download_package(package, version, Path(tmp), run)
        progress(f"unpacking {deb.name} into {cache.entry(package, version)}")
        return cache.add(package, version, deb, run)


def kernel_from_tree(tree: Path) -> Kernel:
    """The kernel inside an unpacked package: boot/vmlinuz-RELEASE (or, as Debian's 7.x
    packages ship it, usr/lib/modules/RELEASE/vmlinuz) and its modules."""
    images = sorted((tree / "boot").glob("vmlinuz-*"))
    if images:
        image = images[-1]
        release = image.name[len("vmlinuz-"):]
    else:
        inside = sorted((tree / "usr/lib/modules").glob("*/vmlinuz")) + sorted(
            (tree / "lib/modules").glob("*/vmlinuz"))
        if not inside:
            raise VMError(f"{tree}: no boot/vmlinuz-* in the kernel package")
        image, release = inside[-1], inside[-1].parent.name
    for base in ("lib/modules", "usr/lib/modules"):
        if (tree / base / release).is_dir():
            return Kernel(image, release, tree / base / release)
    return Kernel(image, release, None)


def _add_modules_dep(kernel: Kernel, tree: Path, run: Run) -> None:
    """``depmod -b`` for a module tree without modules.dep (Debian's 7.x packages leave
    it to the installer), so tools that read it (modprobe, a module build) work."""
    if kernel.modules is None or (kernel.modules / "modules.dep").exists():
        return
    depmod = shutil.which("depmod", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if depmod is None:
        return  # our own loader reads each module's .modinfo and needs no modules.dep
    base = kernel.modules.parent.parent.parent  # BASE/lib/modules/RELEASE
    proc = run([depmod, "-b", str(base), kernel.release])
    if proc.returncode != 0:
        raise VMError(f"depmod -b {base} {kernel.release} failed: {last_error(proc)}")


def user_kernel(image: Path, modules: Path | None) -> Kernel:
    """``--kernel IMAGE [--modules DIR]``: check both and find the release string."""
    why = regular_file(image, "a kernel image")
    if why is not None:
        raise VMError(f"--kernel {printable(str(image), keep='')}: {why}")
    with image.open("rb") as f:     # the header only: an image is megabytes
        head = f.read(0x10000)
    release = bzimage_release(head)
    if modules is not None:
        modules = _module_dir(modules, release)
        release = release or modules.name
    if release is None and head[:4] != ELF_MAGIC:
        raise VMError(f"--kernel {image}: neither a bzImage nor an ELF vmlinux")
    return Kernel(image, release or "unknown", modules)


def _module_dir(path: Path, release: str | None) -> Path:
    """Accept lib/modules/RELEASE itself or an INSTALL_MOD_PATH holding it."""
    if (path / "kernel").is_dir() or (path / "modules.builtin").is_file():
        return path
    candidates = sorted(p for p in (path / "lib" / "modules").glob("*") if p.is_dir())
    if release is not None:
        candidates = [p for p in candidates if p.name == release] or candidates
    if len(candidates) == 1:
        return candidates[0]
    raise VMError(f"--modules {path}: not a module tree (no kernel/ or modules.builtin)")
