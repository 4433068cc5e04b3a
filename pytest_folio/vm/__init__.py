"""Run pytest inside a Linux kernel booted under qemu (``python -m pytest_folio vm``).

The guest sees the host's root file system read-only over 9p, so the host's Python and
this package run inside unchanged; it gets a RAM disk with the kernel's block2mtd on it as
``/dev/mtd0`` and a kernel ramfs, and pytest runs with the real-device and real-directory
targets pointed at them. Modules, bottom up: :mod:`.apt` (Debian packages through a
private apt configuration), :mod:`.kernel` (which kernel, its cache), :mod:`.modules` (a
module tree, .modinfo, load order), :mod:`.bootimage` (the vmlinux qemu boots),
:mod:`.source`, :mod:`.build`, :mod:`.kernelbuild` (a patched driver, the kernel's own
source, a kernel built for the VM), :mod:`.initramfs` (the guest's first user space),
:mod:`.qemu` (command line, boot, the timeout), :mod:`.disks` (the guest's disks),
:mod:`.guest` (pytest's command line there, the console), :mod:`.mtdtests` (the kernel's
mtd tests in the guest), :mod:`.vmoptions` and :mod:`.runner` (the subcommand).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

Progress = Callable[[str], None]
Run = Callable[..., "subprocess.CompletedProcess[str]"]


class VMError(Exception):
    """A one-line reason the VM run cannot happen; the subcommand prints it and exits 125.

    125 is what ``git bisect run`` reads as "cannot test this revision", which is what a
    missing qemu, kernel or module means to someone bisecting a kernel.
    """


EXIT_VM_ERROR = 125


def run_tool(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of the package tools (apt, dpkg-deb, tar, depmod) and capture its output;
    a tool that is not installed is a VMError."""
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise VMError(f"no kernel package reachable: {cmd[0]} not found (fetching the "
                      "distribution kernel needs apt and dpkg-deb; or give your own with "
                      "--kernel)") from None


def last_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The line of a tool's output that says what went wrong (apt's last ``E:``)."""
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("E:")]
    return (errors or lines or [f"exit status {proc.returncode}"])[-1]


def cache_root(env: dict[str, str] | None = None) -> Path:
    """``$PYTEST_FOLIO_CACHE``, else ``$XDG_CACHE_HOME/pytest-folio``, else ~/.cache/..."""
    env = dict(os.environ) if env is None else env
    if env.get("PYTEST_FOLIO_CACHE"):
        return Path(env["PYTEST_FOLIO_CACHE"])
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", "/root")) / ".cache")
    return Path(base) / "pytest-folio"


def entry_name(*parts: str) -> str:
    """A cache entry's name from a package and version (``linux-image-..._6.1.192-3``);
    an epoch's ``:`` is quoted so the name is a portable file name."""
    return "_".join(p.replace(":", "%3a") for p in parts)


@contextlib.contextmanager
def publish(entry: Path, ready: str | None = None) -> Iterator[Path]:
    """A fresh staging directory beside ``entry``, renamed to ``entry`` when the block
    ends without an error and removed otherwise, so an interrupted or failed fetch or
    build never leaves a half-made entry that a later run would trust. A concurrent run
    that published first wins (``ready``: the file that marks a finished entry)."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=entry.parent))
    try:
        yield staging
        try:
            staging.rename(entry)
        except OSError:
            if not (entry / ready).is_file() if ready else not entry.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
