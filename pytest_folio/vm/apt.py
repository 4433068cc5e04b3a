"""Debian packages for the VM: what apt's lists offer, fetched with ``apt-get download``,
never installed.

:class:`SuiteApt` asks apt about one Debian suite through a configuration of its own kept
in the cache (its own sources list, lists, status and archive cache), so the host's apt
sources and lists are never touched; :func:`fetch_package` fetches any package of a suite
that way (a suite's kernel, a kernel's source and headers).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pytest_folio.vm import Run, VMError, cache_root, last_error, run_tool

DEFAULT_META_PACKAGE = "linux-image-amd64"


def resolve_kernel_package(meta: str = DEFAULT_META_PACKAGE,
                           run: Run = run_tool) -> tuple[str, str]:
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
                      f"({last_error(proc)}; run apt-get update?)")
    proc = run(["apt-cache", "show", "--no-all-versions", package])
    for line in proc.stdout.splitlines():
        if line.startswith("Version:"):
            return package, line.split(":", 1)[1].strip()
    raise VMError(f"no kernel package reachable: apt has no version of {package} "
                  f"({last_error(proc)})")


def download_package(package: str, version: str, into: Path, run: Run = run_tool) -> Path:
    """``apt-get download PACKAGE=VERSION`` into a directory; the .deb it wrote."""
    os.chmod(into, 0o755)  # lets apt's sandbox user write there instead of warning
    proc = run(["apt-get", "download", f"{package}={version}"], cwd=into)
    debs = sorted(into.glob("*.deb"))
    if proc.returncode != 0 or not debs:
        raise VMError(f"no kernel package reachable: apt-get download {package}={version} "
                      f"failed ({last_error(proc)})")
    return debs[0]


# --- a Debian suite, through a private apt configuration ------------------------------

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
                 run: Run = run_tool) -> None:
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
        for sub in ("sources.list.d", "preferences.d", "state/lists/partial",
                    "cache/archives/partial"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        lines = [f"deb {_signed(archive)}{archive.uri} {suite} main\n"
                 for archive, suite in self.sources()]
        (self.dir / "sources.list").write_text("".join(lines))
        (self.dir / "status").touch()

    def sources(self, etc: Path = HOST_APT) -> list[tuple[Archive, str]]:
        """Where this suite's packages come from: the given archive; else the host's own
        sources for this suite and its -updates/-security suites (the host's release:
        a kernel update may live in the security archive only); else the host's
        archive (the host carries another release)."""
        if self.archive is not None:
            return [(self.archive, self.suite)]
        own = [(Archive(e["uris"].split()[0], e.get("signed-by") or None), s)
               for e in _source_entries(etc)
               if "main" in e.get("components", "").split() and e.get("uris")
               for s in e.get("suites", "").split()
               if s == self.suite or s.startswith(f"{self.suite}-")]
        return own or [(host_archive(), self.suite)]

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
            reason = last_error(proc) if proc.returncode else errors[-1].strip()
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
        raise VMError(f"no package {package} in Debian {self.suite} ({last_error(proc)})")

    def depends(self, package: str) -> list[str]:
        """The packages ``package`` depends on (apt-cache depends: Depends lines only)."""
        proc = self.run(["apt-cache", "depends", package])
        names = []
        for line in proc.stdout.splitlines():
            key, _, value = line.strip().lstrip("|").partition(":")
            if key in ("Depends", "PreDepends") and not value.strip().startswith("<"):
                names.append(value.strip())
        return names


    def fetch(self, name: str, version: str | None = None) -> Path:
        """The ``.deb`` of ``name`` at ``version`` (default: the version these lists
        offer), kept under ``CACHE/debs/SUITE``: one file per version, so a second call
        downloads nothing."""
        version = version or self.version(name)
        store = self.dir.parent.parent / "debs" / self.suite
        store.mkdir(parents=True, exist_ok=True)
        for deb in store.glob(f"{name}_{version.split(':', 1)[-1]}_*.deb"):
            return deb
        with tempfile.TemporaryDirectory(prefix=".download-", dir=store) as tmp:
            deb = download_package(name, version, Path(tmp), self.run)
            target = store / deb.name
            deb.replace(target)
        return target


def _signed(archive: Archive) -> str:
    return f"[signed-by={archive.signed_by}] " if archive.signed_by else ""


def suite_apt(root: Path, suite: str, archive: Archive | None = None,
              run: Run = run_tool) -> SuiteApt:
    """A suite's apt with fresh lists, or offline the lists of its last refresh."""
    apt = SuiteApt(root, suite, archive, run)
    try:
        apt.refresh()
    except VMError:
        if not apt.has_lists():
            raise
    return apt


def host_suite() -> str:
    """The host's Debian release (``bookworm``): the suite its distribution kernel and
    that kernel's source and headers come from."""
    codename = _os_release().get("VERSION_CODENAME", "")
    if not codename:
        raise VMError("no kernel package reachable: /etc/os-release names no "
                      "VERSION_CODENAME, so the host's Debian suite is unknown")
    return check_suite(codename)


def fetch_package(suite: str, name: str, cache_dir: Path | None = None,
                  run: Run = run_tool, archive: Archive | None = None,
                  version: str | None = None) -> Path:
    """The ``.deb`` of package ``name`` in Debian ``suite`` (its current version, or
    ``version``), fetched with ``apt-get download`` through the suite's private apt
    configuration and kept under ``CACHE/debs/SUITE``. Offline, the lists of the last
    refresh decide the version."""
    root = cache_root() if cache_dir is None else cache_dir
    return suite_apt(root, suite, archive, run).fetch(name, version)
