"""The booted kernel's own source and headers, to build a patched driver against it.

A module only loads into the kernel it was built for (vermagic, symbol versions), so a
patched block2mtd must be built from that kernel's source with that kernel's headers and
compiler. For a Debian kernel both come from the archive at the kernel package's exact
version: ``linux-source-X.Y`` (the whole tree as one tarball) and
``linux-headers-RELEASE`` with the packages it depends on (the common headers, kbuild),
fetched with ``apt-get download`` through the suite's private apt configuration as a
suite's kernel is (the host's own sources and lists are never used), unpacked with
``dpkg-deb -x`` (never installed) and cached under ``CACHE/sources/RELEASE_VERSION``.
Only the directories a build needs are taken out of the tarball, once each.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
from pathlib import Path

from pytest_folio.vm import Progress, Run, VMError, entry_name, last_error, publish, run_tool
from pytest_folio.vm.apt import Archive, host_suite, suite_apt
from pytest_folio.vm.bootimage import bzimage_release
from pytest_folio.vm.kernel import Kernel

SETUP_HEADER_VERSION = 0x20E  # where a bzImage keeps the pointer to its version string


def image_version_text(image: bytes) -> str:
    """The whole version string a bzImage carries (``6.1.0-57-amd64 (...) #1 SMP ...``)."""
    if bzimage_release(image) is None:
        return ""
    pointer = int.from_bytes(image[SETUP_HEADER_VERSION:SETUP_HEADER_VERSION + 2], "little")
    return image[pointer + 0x200:pointer + 0x400].split(b"\0", 1)[0].decode("ascii",
                                                                            "replace")


def debian_version(image: bytes) -> str | None:
    """The Debian package version a Debian-built kernel names in its version string
    (``... PREEMPT_DYNAMIC Debian 6.1.192-3 (2026-11-26)``), else None."""
    match = re.search(r"\bDebian (\d[\w.+~:-]*)", image_version_text(image))
    return match.group(1) if match else None


def source_package(version: str) -> str:
    """``linux-source-6.1`` for 6.1.192-3: Debian names the source by major.minor."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise VMError(f"cannot tell the kernel series of Debian version {version!r}")
    return f"linux-source-{match.group(1)}.{match.group(2)}"


@dataclasses.dataclass(frozen=True)
class KernelSource:
    """One kernel's build inputs: its kbuild directory, source tarball and compiler."""

    release: str
    version: str
    root: Path            # CACHE/sources/RELEASE_VERSION
    headers: Path         # the kbuild directory (make -C HERE M=...)
    tarball: Path | None  # linux-source-X.Y.tar.xz (None: local_tree is the source)
    compiler: str         # the C compiler the kernel was built with, e.g. gcc-12
    local_tree: Path | None = None  # --build-kernel's SRC_DIR: read in place

    @property
    def tree(self) -> Path:
        """Where the source is: the user's tree, or the parts taken out of the tarball."""
        return self.local_tree if self.local_tree is not None else self.root / "tree"

    def extract(self, paths: list[str], run: Run = run_tool) -> Path:
        """Take ``paths`` (files or directories, relative to the tree's top) out of the
        tarball into :attr:`tree`, each once; a path the tarball lacks is a VMError.

        What was taken out is listed in ``.extracted`` beside the tree: a directory
        that exists because a path inside it was taken out (``fs`` after ``fs/ramfs``)
        is not whole, so it is taken out then, its new entries merged in."""
        if self.tarball is None:
            missing = [p for p in dict.fromkeys(paths) if not (self.tree / p).exists()]
            if missing:
                raise VMError(f"{self.tree} has no {', '.join(missing)}")
            return self.tree
        listing = self.root / ".extracted"
        done = set(listing.read_text().split()) if listing.is_file() else set()

        def whole(path: str) -> bool:
            if not (self.tree / path).exists():
                return False
            if ({path} | {str(a) for a in Path(path).parents}) & done:
                return True
            return not any(d.startswith(f"{path}/") for d in done)
        missing = [p for p in dict.fromkeys(paths) if not whole(p)]
        if missing:
            top = _tar_top(self.tarball)
            staging = Path(tempfile.mkdtemp(prefix=".extract-", dir=self.root))
            try:
                proc = run(["tar", "-xJf", str(self.tarball), "-C", str(staging),
                            *(f"{top}/{p}" for p in missing)])
                if proc.returncode != 0:
                    raise VMError(f"{self.tarball.name} has no {', '.join(missing)} "
                                  f"({last_error(proc)})")
                for path in missing:
                    dest = self.tree / path
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    _merge(staging / top / path, dest)
                listing.write_text("".join(f"{p}\n" for p in sorted(done | set(missing))))
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return self.tree


def _merge(src: Path, dest: Path) -> None:
    """Move ``src`` to ``dest``; into a directory already there, only what it lacks."""
    if not dest.exists():
        src.rename(dest)
    elif src.is_dir() and dest.is_dir():
        for child in src.iterdir():
            _merge(child, dest / child.name)


def _tar_top(tarball: Path) -> str:
    """The tarball's top directory: Debian's ``linux-source-6.1.tar.xz`` holds
    ``linux-source-6.1/``."""
    return tarball.name.split(".tar", 1)[0]


def kernel_compiler(headers: Path) -> str:
    """The compiler a Debian kernel's headers name (``CC = ... gcc-12`` in
    .kernelvariables), else the ``CONFIG_CC_VERSION_TEXT`` of its .config, else gcc."""
    variables = headers / ".kernelvariables"
    if variables.is_file():
        for line in variables.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "CC" and value.split():
                return value.split()[-1].replace("$(CROSS_COMPILE)", "")
    config = headers / ".config"
    if config.is_file():
        match = re.search(r'^CONFIG_CC_VERSION_TEXT="(\S+)', config.read_text(), re.M)
        if match:
            return match.group(1)
    return "gcc"


def check_compiler(source: KernelSource) -> str:
    """The compiler's path; a VMError when this host lacks the kernel's compiler."""
    path = shutil.which(source.compiler)
    if path is None:
        raise VMError(f"kernel {source.release} was built with {source.compiler}, which "
                      f"this host does not have: a module built with another compiler "
                      f"may not load; install {source.compiler}, or build the kernel "
                      f"itself with --build-kernel SRC_DIR")
    return path


class SourceCache:
    """``ROOT/sources/RELEASE_VERSION``: the unpacked headers and the source tarball of
    one kernel, published by one rename like the kernel cache's entries."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def entry(self, release: str, version: str) -> Path:
        return self.root / "sources" / entry_name(release, version)

    def lookup(self, release: str, version: str) -> KernelSource | None:
        entry = self.entry(release, version)
        return _source_from(entry, release, version) if entry.is_dir() else None

    def fetch(self, kernel: Kernel, progress: Progress, suite: str | None = None,
              run: Run = run_tool, archive: Archive | None = None) -> KernelSource:
        """The kernel's source and headers at the kernel's exact version: cached, or
        fetched from Debian ``suite`` (default: the host's release) through the suite's
        private apt configuration, as a suite's kernel is (:func:`~.apt.suite_apt`)."""
        version = debian_version(kernel.image.read_bytes()[:0x10000])
        if version is None:
            raise VMError(f"kernel {kernel.release} does not say which Debian package "
                          "version it is, so its source cannot be fetched; build your "
                          "own kernel with --build-kernel SRC_DIR")
        cached = self.lookup(kernel.release, version)
        if cached is not None:
            progress(f"kernel source {source_package(version)} {version} (cached)")
            return cached
        apt = suite_apt(self.root, suite or host_suite(), archive, run)
        headers = f"linux-headers-{kernel.release}"
        packages = [source_package(version), headers,
                    *(d for d in apt.depends(f"{headers}={version}")
                      if d.startswith(("linux-headers-", "linux-kbuild-")))]
        progress(f"fetching {' '.join(packages)} {version} from Debian {apt.suite} "
                 "(apt-get download)")
        entry = self.entry(kernel.release, version)
        with publish(entry) as staging:
            for package in packages:
                deb = apt.fetch(package, version)
                proc = run(["dpkg-deb", "-x", str(deb), str(staging / "pkg")])
                if proc.returncode != 0:
                    raise VMError(f"cannot unpack {deb.name}: {last_error(proc)}")
            _relocate_headers(staging, entry)
            _source_from(staging, kernel.release, version)  # refuse before publishing
        found = self.lookup(kernel.release, version)
        assert found is not None
        return found


def _relocate_headers(staging: Path, entry: Path) -> None:
    """Debian's flavour Makefile names the common headers and (from 7.x on) its own
    directory by absolute path (``include /usr/src/linux-headers-...-common/Makefile``,
    ``KBUILD_OUTPUT=/usr/src/linux-headers-...-amd64``): point both into the cache entry
    (where ``staging`` will be renamed to). Relative symlinks need nothing."""
    for makefile in (staging / "pkg/usr/src").glob("linux-headers-*/Makefile"):
        text = makefile.read_text()
        fixed = re.sub(r"^(include\s+|KBUILD_OUTPUT\s*:?=\s*)/usr/src/",
                       lambda m: f"{m.group(1)}{entry}/pkg/usr/src/", text, flags=re.M)
        if fixed != text:
            makefile.write_text(fixed)


def _source_from(entry: Path, release: str, version: str) -> KernelSource:
    headers = entry / "pkg/usr/src" / f"linux-headers-{release}"
    tarballs = sorted((entry / "pkg/usr/src").glob("linux-source-*.tar.*"))
    if not (headers / "Makefile").is_file():
        raise VMError(f"{entry}: no headers for kernel {release} (linux-headers-{release})")
    if not tarballs:
        raise VMError(f"{entry}: no kernel source tarball ({source_package(version)})")
    return KernelSource(release, version, entry, headers, tarballs[0],
                        kernel_compiler(headers))
