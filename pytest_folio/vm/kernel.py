"""The kernel the guest boots, and the modules it needs.

Default: the distribution's current kernel package (on Debian, what ``linux-image-amd64``
depends on), fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x`` into a
cache directory, never installed, and reused while the package version stays the same.
``--kernel debian:SUITE`` fetches the current kernel of another Debian suite (sid,
trixie, ...) the same way, through a private apt configuration kept in the cache
(:class:`SuiteApt`, also behind :func:`fetch_package`), so the host's apt sources and
lists are never touched. ``--kernel IMAGE`` takes the user's own image and module tree.

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
    "virtio_blk": "CONFIG_VIRTIO_BLK",
    "block2mtd": "CONFIG_MTD_BLOCK2MTD",
}
FS_MODULES = {"xfs": "CONFIG_XFS_FS", "ext4": "CONFIG_EXT4_FS"}
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

    def add(self, package: str, version: str, deb: Path | list[Path],
            run: Run = _run) -> Kernel:
        """Unpack ``deb`` (dpkg-deb -x, never installed; several: one tree, as a kernel
        split into image, modules and base packages) and publish it as an entry. A module
        tree shipped without modules.dep gets one from ``depmod -b``."""
        entry = self.entry(package, version)
        entry.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=entry.parent))
        try:
            for one in deb if isinstance(deb, list) else [deb]:
                proc = run(["dpkg-deb", "-x", str(one), str(staging)])
                if proc.returncode != 0:
                    raise VMError(f"cannot unpack {one.name}: {_last_error(proc)}")
            # refuse a package without a kernel before publishing
            _add_modules_dep(kernel_from_tree(staging), staging, run)
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


# --- another Debian suite, through a private apt configuration --------------------------

DEBIAN_PREFIX = "debian:"
HOST_APT = Path("/etc/apt")


@dataclasses.dataclass(frozen=True)
class Archive:
    """A Debian archive as the host's apt sources name it: its URI and keyring."""

    uri: str
    signed_by: str | None = None


def _source_entries(etc: Path) -> list[dict[str, str]]:
    """Every enabled source of the host's apt (one-line and deb822 files), as fields."""
    entries: list[dict[str, str]] = []
    one_line = [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*.list"))]
    for path in one_line:
        for line in (path.read_text(errors="replace").splitlines()
                     if path.is_file() else []):
            words = line.split("#", 1)[0].split()
            if len(words) < 3 or words[0] != "deb":
                continue
            options: dict[str, str] = {}
            if words[1].startswith("["):
                while words and not words[1].endswith("]"):
                    words[1:3] = [words[1] + " " + words[2]]
                for opt in words.pop(1).strip("[]").split():
                    key, _, value = opt.partition("=")
                    options[key.lower()] = value
            entries.append({"types": "deb", "uris": words[1], "suites": words[2],
                            "components": " ".join(words[3:]),
                            "signed-by": options.get("signed-by", "")})
    for path in sorted((etc / "sources.list.d").glob("*.sources")):
        for stanza in path.read_text(errors="replace").split("\n\n"):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.strip()
            if fields.get("enabled", "yes").lower() != "no" and \
                    "deb" in fields.get("types", "").split():
                entries.append(fields)
    return entries


def host_archive(etc: Path = HOST_APT, codename: str | None = None) -> Archive:
    """The Debian archive the host already uses: the source carrying the host's own
    release (``VERSION_CODENAME``) with its main component; no host name is ours."""
    if codename is None:
        codename = _os_release().get("VERSION_CODENAME", "")
    candidates = [e for e in _source_entries(etc)
                  if "main" in e.get("components", "").split() and e.get("uris")]
    for entry in candidates:
        if codename and codename in entry.get("suites", "").split():
            return Archive(entry["uris"].split()[0], entry.get("signed-by") or None)
    if candidates:
        return Archive(candidates[0]["uris"].split()[0],
                       candidates[0].get("signed-by") or None)
    raise VMError(f"no kernel package reachable: the host's apt sources ({etc}) name no "
                  "Debian archive with a main component")


def _os_release() -> dict[str, str]:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return {}
    pairs = (line.partition("=") for line in text.splitlines())
    return {k: v.strip().strip('"') for k, sep, v in pairs if sep}


def check_suite(suite: str) -> str:
    """A suite name as apt and a cache directory can take it (``sid``, ``trixie``)."""
    if not suite or not all(c.isalnum() or c in "-_." for c in suite) or \
            suite.startswith((".", "-")):
        raise ValueError(f"not a Debian suite name: {suite!r} (e.g. debian:sid)")
    return suite


class SuiteApt:
    """apt-cache and apt-get for one Debian suite through a configuration of its own.

    Its sources list, lists, status and archive cache live under ``ROOT/apt/SUITE``
    (the Dir::Etc::sourcelist, Dir::State and Dir::Cache options point there); the
    host's keyrings are read, its sources and lists never change. The lists are
    refreshed once per process (:meth:`refresh`); a failed refresh keeps the old ones.
    """

    def __init__(self, root: Path, suite: str, archive: Archive | None = None,
                 run: Run = _run) -> None:
        self.suite = check_suite(suite)
        self.dir = root / "apt" / suite
        self.archive = archive
        self._run = run
        self.refreshed = False

    def options(self) -> list[str]:
        d = self.dir
        return [f"-oDir::Etc::sourcelist={d / 'sources.list'}",
                f"-oDir::Etc::sourceparts={d / 'sources.list.d'}",
                f"-oDir::Etc::preferences={d / 'preferences'}",
                f"-oDir::Etc::preferencesparts={d / 'preferences.d'}",
                f"-oDir::State={d / 'state'}", f"-oDir::State::status={d / 'status'}",
                f"-oDir::Cache={d / 'cache'}", "-oAcquire::Languages=none",
                "-oDPkg::Lock::Timeout=60"]

    def run(self, cmd: list[str], cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
        """``cmd`` (apt-cache/apt-get ...) with this suite's configuration."""
        return self._run([cmd[0], *self.options(), *cmd[1:]], cwd=cwd)

    def has_lists(self) -> bool:
        lists = self.dir / "state" / "lists"
        return lists.is_dir() and any(lists.glob("*_Packages*"))

    def _configure(self) -> None:
        archive = self.archive or host_archive()
        for sub in ("sources.list.d", "preferences.d", "state/lists/partial",
                    "cache/archives/partial"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        signed = f"[signed-by={archive.signed_by}] " if archive.signed_by else ""
        (self.dir / "sources.list").write_text(f"deb {signed}{archive.uri} {self.suite} main\n")
        (self.dir / "status").touch()

    def refresh(self) -> None:
        """``apt-get update`` for this suite; one line naming apt's error when it fails."""
        if self.refreshed:
            return
        self._configure()
        proc = self.run(["apt-get", "update", "-q"])
        # no network is only a warning to apt-get update (exit 0, "W: Failed to fetch")
        errors = [ln for ln in (proc.stderr + proc.stdout).splitlines()
                  if ln.startswith("W: Failed to fetch")]
        if proc.returncode != 0 or errors:
            reason = _last_error(proc) if proc.returncode else errors[-1].strip()
            if "Release" in reason and ("does not have" in reason or "404" in reason):
                shutil.rmtree(self.dir, ignore_errors=True)  # nothing worth keeping
                raise VMError(f"no kernel package reachable: no Debian suite "
                              f"{self.suite!r} in the archive ({reason})")
            raise VMError(f"no kernel package reachable: cannot refresh the package "
                          f"lists of Debian {self.suite} ({reason})")
        self.refreshed = True

    def version(self, package: str) -> str:
        """The version of ``package`` these lists offer."""
        proc = self.run(["apt-cache", "show", "--no-all-versions", package])
        for line in proc.stdout.splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
        raise VMError(f"no package {package} in Debian {self.suite} ({_last_error(proc)})")

    def depends(self, package: str) -> list[str]:
        """The packages ``package`` depends on (apt-cache depends: Depends lines only)."""
        proc = self.run(["apt-cache", "depends", package])
        names = []
        for line in proc.stdout.splitlines():
            key, _, value = line.strip().lstrip("|").partition(":")
            if key in ("Depends", "PreDepends") and not value.strip().startswith("<"):
                names.append(value.strip())
        return names


def fetch_package(suite: str, name: str, cache_dir: Path | None = None,
                  run: Run = _run, archive: Archive | None = None) -> Path:
    """The ``.deb`` of package ``name``'s current version in Debian ``suite``, fetched with
    ``apt-get download`` through the suite's private apt configuration and kept under
    ``CACHE/debs/SUITE`` (one file per version, so a second call downloads nothing).
    Offline, the lists of the last refresh decide the version."""
    root = cache_root() if cache_dir is None else cache_dir
    apt = SuiteApt(root, suite, archive, run)
    try:
        apt.refresh()
    except VMError:
        if not apt.has_lists():
            raise
    version = apt.version(name)
    store = root / "debs" / suite
    store.mkdir(parents=True, exist_ok=True)
    quoted = version.replace(":", "%3a")
    for deb in store.glob(f"{name}_{quoted}_*.deb"):
        return deb
    with tempfile.TemporaryDirectory(prefix=".download-", dir=store) as tmp:
        deb = download_package(name, version, Path(tmp), apt.run)
        target = store / deb.name
        deb.replace(target)
    return target


def fetch_suite_kernel(cache: KernelCache, suite: str, progress: Progress,
                       meta: str = DEFAULT_META_PACKAGE, run: Run = _run,
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
        raise VMError(f"depmod -b {base} {kernel.release} failed: {_last_error(proc)}")


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
