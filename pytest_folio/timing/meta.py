"""What a run was measured with, and the differences that make two runs compare badly.

Saved with every run: the package version, the git commit (and whether the tree had
uncommitted changes) of the code under test, and the seed; the options that change
timings are the run's ``settings`` and the machine's facts its ``machine``. ``doubts``
turns the differences between two runs into one warning line each.
"""

from __future__ import annotations

import os
import subprocess
from importlib import metadata
from typing import Any

from pytest_folio.sizes import format_size
from pytest_folio.timing.storage import TimingRun

BANDWIDTH_TOLERANCE = 0.20      # memcpy figures further apart than this: other machines


def package_version() -> str:
    try:
        return metadata.version("pytest-folio")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def git_state(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"commit": ..., "dirty": bool}`` of the repository holding ``directory``, or
    nothing: no git, not a repository, or git too slow never fail a run."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", os.fspath(directory), *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": commit, "dirty": dirty}


def run_meta(directory: str | os.PathLike[str], seed: int | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"version": package_version()}
    git = git_state(directory)
    if git:
        meta["git"] = git
    if seed is not None:
        meta["seed"] = seed
    return meta


def run_targets(run: TimingRun) -> list[str]:
    """The targets a run measured, in the order its records first name them."""
    return list(dict.fromkeys(r.target for r in run.records if r.target))


def kernel_release(run: TimingRun) -> str:
    """The kernel the run was measured under (``6.8.0-45-generic``), or ``unknown``."""
    kernel = str(run.machine.get("kernel") or "unknown")
    return kernel.removeprefix("Linux ")


def git_text(run: TimingRun) -> str:
    """The code's commit as ``1a2b3c4d5e6f`` (``+dirty`` with uncommitted changes), or
    ``none`` when the run was not measured from a git checkout."""
    git = run.meta.get("git") or {}
    if not git.get("commit"):
        return "none"
    return str(git["commit"])[:12] + ("+dirty" if git.get("dirty") else "")


def identity(run: TimingRun) -> str:
    """What tells two runs apart: their targets, kernel and code."""
    return (f"target {', '.join(run_targets(run)) or 'none'}; kernel {kernel_release(run)}; "
            f"git {git_text(run)}")


def describe(run: TimingRun) -> str:
    """One line: when, where and with what code a run was measured."""
    parts = [run.created or "undated", f"host {run.machine.get('host', '?')}",
             identity(run)]
    if run.meta.get("version"):
        parts.append(f"pytest-folio {run.meta['version']}")
    if not run.complete:
        parts.append("INTERRUPTED")
    return "; ".join(parts)


def _size(value: Any) -> str:
    return format_size(value) if isinstance(value, int) else str(value)


def doubts(named: list[tuple[str, TimingRun]]) -> list[str]:
    """One line per difference between the first run and each other that makes the
    comparison doubtful: geometry, machine, memcpy bandwidth, version, interruption."""
    lines = [f"{name} is an interrupted run: some items are missing"
             for name, run in named if not run.complete]
    if not named:
        return lines
    first_name, first = named[0]
    for name, run in named[1:]:
        pair = f"{first_name} and {name}"
        for key, what in (("mtd_size", "device size"), ("erasesize", "erasesize")):
            a, b = first.settings.get(key), run.settings.get(key)
            if a is not None and b is not None and a != b:
                lines.append(f"{pair} ran with different {what}s: {_size(a)} and {_size(b)}")
        ma, mb = first.machine, run.machine
        for key, what in (("host", "hosts"), ("cpu", "CPUs")):
            if ma.get(key) and mb.get(key) and ma[key] != mb[key]:
                lines.append(f"{pair} ran on different {what}: {ma[key]} and {mb[key]}")
        ga, gb = ma.get("memcpy_gbps"), mb.get("memcpy_gbps")
        if (isinstance(ga, int | float) and isinstance(gb, int | float) and min(ga, gb) > 0
                and max(ga, gb) / min(ga, gb) > 1 + BANDWIDTH_TOLERANCE):
            lines.append(f"{pair}: memcpy bandwidth {ga} and {gb} GB/s are more than "
                         f"{BANDWIDTH_TOLERANCE:.0%} apart (compare --normalise scales by it)")
        va, vb = first.meta.get("version"), run.meta.get("version")
        if va and vb and va != vb:
            lines.append(f"{pair} were measured by different pytest-folio versions: "
                         f"{va} and {vb}")
    return lines
