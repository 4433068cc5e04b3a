"""The kernel the guest boots, and the modules it needs.

Default: the distribution's current kernel package (on Debian, what ``linux-image-amd64``
depends on), fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x`` into a
cache directory, never installed, and reused while the package version stays the same.
``--kernel`` takes the user's own image and module tree instead.

Under TCG an uncompressed vmlinux boots seconds faster than a bzImage (no decompression
in emulated code), so a bzImage is unpacked once, as scripts/extract-vmlinux does, and the
vmlinux is booted through its PVH entry point when it has one.
"""

from __future__ import annotations

import bz2
import dataclasses
import hashlib
import lzma
import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

from pytest_folio.vm import VMError

DEFAULT_META_PACKAGE = "linux-image-amd64"

# What the guest needs, and the option that builds it (named in the error when missing).
ROOT_MODULES = {
    "virtio_pci": "CONFIG_VIRTIO_PCI",
    "9pnet_virtio": "CONFIG_NET_9P_VIRTIO",
    "9p": "CONFIG_9P_FS",
}
DEVICE_MODULES = {
    "brd": "CONFIG_BLK_DEV_RAM",
    "block2mtd": "CONFIG_MTD_BLOCK2MTD",
}
REQUIRED_MODULES = {**ROOT_MODULES, **DEVICE_MODULES}

Progress = Callable[[str], None]
Run = Callable[..., "subprocess.CompletedProcess[str]"]

ELF_MAGIC = b"\x7fELF"


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A bootable image, its release string and its module tree (None: all built in)."""

    image: Path
    release: str
    modules: Path | None


def cache_root(env: dict[str, str] | None = None) -> Path:
    """``$PYTEST_FOLIO_CACHE``, else ``$XDG_CACHE_HOME/pytest-folio``, else ~/.cache/..."""
    env = dict(os.environ) if env is None else env
    if env.get("PYTEST_FOLIO_CACHE"):
        return Path(env["PYTEST_FOLIO_CACHE"])
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", "/root")) / ".cache")
    return Path(base) / "pytest-folio"


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise VMError(f"no kernel package reachable: {cmd[0]} not found (fetching the "
                      "distribution kernel needs apt and dpkg-deb; or give your own with "
                      "--kernel)") from None


def _last_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("E:")]
    return (errors or lines or [f"exit status {proc.returncode}"])[-1]


def resolve_kernel_package(meta: str = DEFAULT_META_PACKAGE, run: Run = _run) -> tuple[str, str]:
    """The (package, version) the meta package points at now, from apt's package lists."""
    proc = run(["apt-cache", "depends", meta])
    package = None
    if proc.returncode == 0:
        for line in proc.stdout.splitlines():
            key, _, value = line.strip().partition(":")
            if key == "Depends" and value.strip().startswith("linux-image-"):
                package = value.strip()
                break
    if package is None:
        raise VMError(f"no kernel package reachable: apt knows no {meta} "
                      f"({_last_error(proc)}; run apt-get update?)")
    proc = run(["apt-cache", "show", "--no-all-versions", package])
    for line in proc.stdout.splitlines():
        if line.startswith("Version:"):
            return package, line.split(":", 1)[1].strip()
    raise VMError(f"no kernel package reachable: apt has no version of {package} "
                  f"({_last_error(proc)})")


class KernelCache:
    """Unpacked kernel packages under ``ROOT/kernels/PACKAGE_VERSION``, one per version.

    An entry appears by one rename of a fully unpacked directory, so an interrupted or
    concurrent fetch never leaves a half-unpacked kernel that a later run would trust.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def entry(self, package: str, version: str) -> Path:
        return self.root / "kernels" / f"{package}_{version.replace(':', '%3a')}"

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

    def add(self, package: str, version: str, deb: Path, run: Run = _run) -> Kernel:
        """Unpack ``deb`` (dpkg-deb -x, never installed) and publish it as an entry."""
        entry = self.entry(package, version)
        entry.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=entry.parent))
        try:
            proc = run(["dpkg-deb", "-x", str(deb), str(staging)])
            if proc.returncode != 0:
                raise VMError(f"cannot unpack {deb.name}: {_last_error(proc)}")
            kernel_from_tree(staging)  # refuse a package without a kernel before publishing
            try:
                staging.rename(entry)
            except OSError:
                if not entry.is_dir():  # not a concurrent run that won the race
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return kernel_from_tree(entry)


def download_package(package: str, version: str, into: Path, run: Run = _run) -> Path:
    """``apt-get download PACKAGE=VERSION`` into a directory; the .deb it wrote."""
    os.chmod(into, 0o755)  # lets apt's sandbox user write there instead of warning
    proc = run(["apt-get", "download", f"{package}={version}"], cwd=into)
    debs = sorted(into.glob("*.deb"))
    if proc.returncode != 0 or not debs:
        raise VMError(f"no kernel package reachable: apt-get download {package}={version} "
                      f"failed ({_last_error(proc)})")
    return debs[0]


def fetch_distro_kernel(cache: KernelCache, progress: Progress,
                        meta: str = DEFAULT_META_PACKAGE, run: Run = _run) -> Kernel:
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
    """The kernel inside an unpacked package: boot/vmlinuz-RELEASE and its modules."""
    images = sorted((tree / "boot").glob("vmlinuz-*"))
    if not images:
        raise VMError(f"{tree}: no boot/vmlinuz-* in the kernel package")
    image = images[-1]
    release = image.name[len("vmlinuz-"):]
    for base in ("lib/modules", "usr/lib/modules"):
        if (tree / base / release).is_dir():
            return Kernel(image, release, tree / base / release)
    return Kernel(image, release, None)


def bzimage_release(image: bytes) -> str | None:
    """The release string a bzImage carries in its setup header (kernel_version field)."""
    if len(image) < 0x210 or image[0x202:0x206] != b"HdrS":
        return None
    (pointer,) = struct.unpack_from("<H", image, 0x20E)
    start = pointer + 0x200
    if not pointer or start >= len(image):
        return None
    text = image[start:start + 256].split(b"\0", 1)[0].decode("ascii", "replace")
    return text.split()[0] if text.strip() else None


def user_kernel(image: Path, modules: Path | None) -> Kernel:
    """``--kernel IMAGE [--modules DIR]``: check both and find the release string."""
    if not image.is_file():
        raise VMError(f"--kernel {image}: no such file")
    head = image.read_bytes()[:0x10000]
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


# --- vmlinux from a bzImage (the logic of scripts/extract-vmlinux) ---------------------

def _decompress(kind: str, data: bytes) -> bytes:
    if kind == "gzip":
        return zlib.decompressobj(wbits=31).decompress(data)
    if kind == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data)
    if kind == "lzma":
        return lzma.LZMADecompressor(format=lzma.FORMAT_ALONE).decompress(data)
    if kind == "bzip2":
        return bz2.BZ2Decompressor().decompress(data)
    tool = shutil.which(kind)  # zstd, lz4: no decompressor in the standard library
    if tool is None:
        return b""
    # A trailing size word follows the stream, so the tool may complain after a good
    # payload: the ELF check below decides, not the exit status.
    return subprocess.run([tool, "-dqc"], input=data, capture_output=True,
                          check=False).stdout


_MAGICS = [
    (b"\x1f\x8b\x08", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"BZh", "bzip2"),
    (b"\x5d\x00\x00\x00", "lzma"),
    (b"\x02\x21\x4c\x18", "lz4"),
]


def extract_vmlinux(image: bytes) -> bytes | None:
    """The ELF vmlinux inside a compressed kernel image, or None when there is none.

    Like extract-vmlinux: try every known compression magic at every offset where it
    occurs and keep the first result that is an ELF file.
    """
    if image[:4] == ELF_MAGIC:
        return image
    for magic, kind in _MAGICS:
        pos = image.find(magic)
        while pos >= 0:
            try:
                out = _decompress(kind, image[pos:])
            except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError):
                out = b""
            if out[:4] == ELF_MAGIC:
                return out
            pos = image.find(magic, pos + 1)
    return None


XEN_ELFNOTE_PHYS32_ENTRY = 18
PT_NOTE = 4


def has_pvh_note(elf: bytes) -> bool:
    """Whether a 64-bit vmlinux has the PVH entry note qemu needs to boot it directly."""
    if elf[:4] != ELF_MAGIC or elf[4] != 2:
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        p_type, _flags, offset = struct.unpack_from("<IIQ", elf, phoff + i * phentsize)
        if p_type != PT_NOTE:
            continue
        (filesz,) = struct.unpack_from("<Q", elf, phoff + i * phentsize + 0x20)
        pos, end = offset, offset + filesz
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", elf, pos)
            name = elf[pos + 12:pos + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and ntype == XEN_ELFNOTE_PHYS32_ENTRY:
                return True
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def bootable_image(kernel: Kernel, cache: KernelCache, progress: Progress) -> Path:
    """What qemu should boot: the unpacked vmlinux when it has a PVH note, else the image.

    The result is cached by the image's hash (a marker remembers "no usable vmlinux"),
    so the decompression happens once per kernel.
    """
    data = kernel.image.read_bytes()
    if data[:4] == ELF_MAGIC:
        if not has_pvh_note(data):
            raise VMError(f"--kernel {kernel.image}: an ELF vmlinux without a PVH entry "
                          "note (CONFIG_PVH) cannot be booted directly; give the bzImage")
        return kernel.image
    key = hashlib.sha256(data).hexdigest()[:20]
    store = cache.root / "vmlinux"
    target, marker = store / key, store / f"{key}.none"
    if target.is_file():
        return target
    if marker.exists():
        return kernel.image
    progress(f"unpacking the vmlinux inside {kernel.image.name} (boots faster under TCG)")
    store.mkdir(parents=True, exist_ok=True)
    elf = extract_vmlinux(data)
    if elf is None or not has_pvh_note(elf):
        marker.touch()
        return kernel.image
    tmp = store / f".{key}.{os.getpid()}"
    tmp.write_bytes(elf)
    tmp.replace(target)
    return target


# --- modules ---------------------------------------------------------------------------

MODULE_SUFFIXES = (".ko", ".ko.xz", ".ko.gz", ".ko.zst")


def module_name(filename: str) -> str:
    """The name the kernel knows a module by: file name without suffix, '-' as '_'."""
    for suffix in MODULE_SUFFIXES:
        if filename.endswith(suffix):
            filename = filename[: -len(suffix)]
            break
    return filename.replace("-", "_")


def read_module(path: Path) -> bytes:
    """A module file's ELF bytes, decompressed (busybox insmod loads plain .ko files)."""
    data = path.read_bytes()
    if path.name.endswith(".ko.xz"):
        return lzma.decompress(data)
    if path.name.endswith(".ko.gz"):
        return zlib.decompress(data, wbits=31)
    if path.name.endswith(".ko.zst"):
        out = _decompress("zstd", data)
        if out[:4] != ELF_MAGIC:
            raise VMError(f"{path}: cannot decompress (install zstd)")
        return out
    return data


def modinfo(ko: bytes) -> dict[str, str]:
    """The key=value pairs of a module's .modinfo section (depends, vermagic, ...)."""
    if ko[:4] != ELF_MAGIC or ko[4] != 2:
        raise ValueError("not a 64-bit ELF module")
    shoff, = struct.unpack_from("<Q", ko, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ko, 0x3A)

    def section(i: int) -> tuple[int, int, int]:
        name, _type, _flags, _addr, offset, size = struct.unpack_from(
            "<IIQQQQ", ko, shoff + i * shentsize)
        return name, offset, size

    _, str_off, _ = section(shstrndx)
    info: dict[str, str] = {}
    for i in range(shnum):
        name, offset, size = section(i)
        if ko[str_off + name:str_off + name + 9] == b".modinfo\0":
            for item in ko[offset:offset + size].split(b"\0"):
                key, sep, value = item.decode("utf-8", "replace").partition("=")
                if sep:
                    info.setdefault(key, value)
    return info


class ModuleTree:
    """A kernel's lib/modules/RELEASE: which modules exist, which are built in, deps."""

    def __init__(self, root: Path, release: str | None = None) -> None:
        self.root = root
        self.release = release
        self._index: dict[str, Path] | None = None
        builtin = root / "modules.builtin"
        self.builtin = ({module_name(Path(line).name) for line in
                         builtin.read_text().split()} if builtin.is_file() else set())

    def index(self) -> dict[str, Path]:
        if self._index is None:
            self._index = {}
            for dirpath, _dirs, files in os.walk(self.root):
                for filename in files:
                    if filename.endswith(MODULE_SUFFIXES):
                        self._index.setdefault(module_name(filename),
                                               Path(dirpath) / filename)
        return self._index

    def load_order(self, wanted: Iterable[str],
                   config_names: dict[str, str] | None = None) -> list[tuple[str, bytes]]:
        """The modules to insmod for ``wanted``, dependencies first; built-ins skipped."""
        config_names = config_names or {}
        order: list[tuple[str, bytes]] = []
        seen: set[str] = set()

        def visit(name: str, needed_by: str | None) -> None:
            if name in seen or name in self.builtin:
                return
            seen.add(name)
            path = self.index().get(name)
            if path is None:
                what = f" ({config_names[name]})" if name in config_names else ""
                why = f", needed by {needed_by}" if needed_by else ""
                raise VMError(f"kernel {self.release or self.root.name} has no {name}"
                              f"{what}{why}: neither built in nor a module in {self.root}")
            data = read_module(path)
            info = modinfo(data)
            magic = info.get("vermagic", "").split()
            if self.release and magic and magic[0] != self.release:
                raise VMError(f"module {path} is for kernel {magic[0]}, "
                              f"not {self.release}")
            for dep in filter(None, info.get("depends", "").split(",")):
                visit(dep.replace("-", "_"), name)
            order.append((name, data))

        for name in wanted:
            visit(name, None)
        return order
