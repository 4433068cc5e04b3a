"""What the guest runs and what it says: pytest's command line and environment there,
the bytecode warm-up on the host, and the console reader that turns the guest's MARK
lines into progress and passes pytest's output through.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import subprocess
import time
from pathlib import Path
from typing import TextIO

from pytest_folio.errors import CommandError
from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.sizes import format_size
from pytest_folio.vm.initramfs import (
    GUEST_OUT,
    GUEST_PYCACHE,
    GUEST_RAMFS,
    GUEST_RUN,
    GUEST_TMP,
    MARK,
)

WARMUP_TIMEOUT = 120.0
GUEST_SAVE = f"{GUEST_OUT}/timings.json"

# Host variables the guest's pytest should see; everything else is set fresh.
PASSED_ENV = ("PATH", "PYTHONPATH", "PYTHONHASHSEED", "VIRTUAL_ENV", "LANG", "LC_ALL",
              "PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PY_COLORS", "NO_COLOR",
              "COLUMNS")


def split_save(pytest_args: list[str]) -> tuple[list[str], Path | None]:
    """Point ``--folio-save`` at the results share; return the user's path for the copy.

    The guest's root is read-only, so the file is written to the share and copied to the
    user's path (relative to the current directory, as pytest would take it) afterwards.
    """
    out: list[str] = []
    save: Path | None = None
    args = iter(pytest_args)
    for arg in args:
        if arg == "--":  # pytest's own end of options: leave the rest alone
            out.append(arg)
            out.extend(args)
            break
        if arg == "--folio-save":
            value = next(args, None)
            if value is None:
                raise CommandError("--folio-save needs a path")
            save = Path(value)
            out.append(f"--folio-save={GUEST_SAVE}")
        elif arg.startswith("--folio-save="):
            save = Path(arg.split("=", 1)[1])
            out.append(f"--folio-save={GUEST_SAVE}")
        else:
            out.append(arg)
    return out, save


def size_map(paths: dict[int, str]) -> str:
    """``4K=/dev/mtd0,16K=/dev/mtd1``: the per-size spec --folio-mtd/--folio-fs take."""
    return ",".join(f"{format_size(size)}={path}" for size, path in sorted(paths.items()))


def guest_pytest_argv(python: str, pytest_args: list[str], mtd_size: int,
                      erasesize: int, mtd: str = "/dev/mtd0", fs: str = GUEST_RAMFS,
                      extra: list[str] | None = None, now_running: bool = False
                      ) -> list[str]:
    """pytest's command line in the guest: the kernel targets (``mtd``, ``fs``) and the
    orders and block sizes they were made for (``extra``) first, so the user's own
    options (later on the line) still win.

    The reference device gets the kernel device's geometry, so differential tests compare
    like with like. ``-p pytest_folio`` keeps the plugin when the user turned plugin
    autoloading off (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1: the fastest start under TCG).
    ``now_running``: the guest keeps the running test's id in the results share
    (:mod:`pytest_folio.vm.nowrunning`), for the report of a run that overran.
    """
    plugins = ["-p", "pytest_folio.vm.nowrunning"] if now_running else []
    # --opt=value: pytest takes a bare argument naming an existing path into its rootdir
    # guess, and /dev/mtd0 would make the rootdir "/".
    return [python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_folio",
            *plugins, f"--folio-mtd={mtd}", f"--folio-fs={fs}", *(extra or []),
            f"--folio-mtd-size={mtd_size}", f"--folio-erasesize={erasesize}",
            "--folio-allow-destructive", *pytest_args]


def guest_env(environ: dict[str, str], colors: bool) -> dict[str, str]:
    env = {k: environ[k] for k in PASSED_ENV if k in environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(HOME=f"{GUEST_RUN}/home", TMPDIR=GUEST_TMP, PYTHONPYCACHEPREFIX=GUEST_PYCACHE,
               PYTHONUNBUFFERED="1", PYTEST_FOLIO_VM="1",
               HYPOTHESIS_STORAGE_DIRECTORY=f"{GUEST_TMP}/hypothesis")
    # the guest's console is a tty, so pytest would colour even into a host pipe
    if "NO_COLOR" not in env:
        env.setdefault("PY_COLORS", "1" if colors else "0")
    return env


def warmup_argv(python: str, pytest_args: list[str], cwd: Path) -> list[str]:
    """A host-side ``pytest --co`` over the user's test paths, run to fill the bytecode
    cache natively. Options are left out (they may name guest paths), and so is anything
    that is neither a path here nor, with --pyargs, an importable module: one unknown
    argument would stop the whole collection."""
    pyargs = "--pyargs" in pytest_args
    keep = []
    for arg in pytest_args:
        if arg.startswith("-"):
            continue
        if (cwd / arg.split("::", 1)[0]).exists() or (pyargs and _importable(arg)):
            keep.append(arg)
    return [python, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider", "-p",
            "pytest_folio", *(["--pyargs"] if pyargs else []), *keep]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def warm_bytecode(argv: list[str], prefix: Path, environ: dict[str, str]) -> float:
    """Compile on the host what the guest's pytest will import, into the bytecode share.

    Compiling (and pytest's assertion rewriting) under TCG costs tens of seconds; on the
    host it takes one or two, and the guest finds the results by the same paths (its root
    is the host's). The guest ignores __pycache__ beside the sources once
    PYTHONPYCACHEPREFIX is set, so this also covers the standard library. A collection
    that fails here only leaves more for the guest to compile.
    """
    start = time.monotonic()
    env = {k: v for k, v in environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=WARMUP_TIMEOUT, check=False)
    return time.monotonic() - start


def _orders_seen(folios: list[str]) -> str:
    """``16x2 1x4`` (COUNTxORDER, from the guest's tracepoint count) as ``16 of order 2
    (16K), 1 of order 4 (64K)``; ``none`` without the tracepoint."""
    counts = [f.split("x") for f in folios if "x" in f]
    seen = [f"{n} of order {o} ({format_size(PAGE_SIZE << int(o))})"
            for n, o in counts if o.isdigit()]
    return ", ".join(seen) or "none: no filemap:mm_filemap_add_to_page_cache tracepoint"


def device_lines(key: str, value: str) -> list[str]:
    """What the guest's ``mtd``/``fs`` MARK lines say, as the lines the user reads.

    mtd: ``/dev/mtdN /dev/vdX LBS [COUNTxORDER ...|none]``, the folio orders the page
    cache used (filemap:mm_filemap_add_to_page_cache) while the guest read the disk.
    fs: ``MOUNTPOINT TYPE DEVICE BLOCKSIZE``.
    """
    words = value.split()
    if key == "ramfs":  # MOUNTPOINT BLOCKSIZE [COUNTxORDER ...|none]
        where, bs, *folios = (words + ["?"] * 2) if len(words) < 2 else words
        size = f"{int(bs) >> 10}k" if bs.isdigit() else bs
        return [f"ramfs blocksize={size} at {where} (folio orders seen: "
                f"{_orders_seen(folios)})"]
    if key == "ramfs-skip":  # BLOCKSIZE REASON...
        bs, _, reason = value.strip().partition(" ")
        size = format_size(int(bs)) if bs.isdigit() else bs
        return [f"ramfs at {size} blocks: skipped ({reason.strip()})"]
    if key == "fs":
        where, fstype, device, bs = (words + ["?"] * 4)[:4]
        on = f" on {device}" if device != "-" else ""
        size = f" ({format_size(int(bs))})" if bs.isdigit() else ""
        return [f"{where}: {fstype}{on}, block size {bs}{size}"]
    mtd, device, lbs, *folios = (words + ["?"] * 3) if len(words) < 3 else words
    size = format_size(int(lbs)) if lbs.isdigit() else "?"
    lines = [f"{mtd}: block2mtd on {device}, logical block size {lbs} ({size} folios)"]
    if folios == ["none"] or not folios:
        lines.append(f"{device}: no filemap:mm_filemap_add_to_page_cache tracepoint to "
                     "confirm the folio sizes")
    else:
        lines.append(f"{device}: the page cache added folios {_orders_seen(folios)} "
                     "(filemap:mm_filemap_add_to_page_cache)")
    return lines


class Console:
    """Reads the guest's console: MARK lines drive progress, pytest's lines pass through."""

    def __init__(self, out: TextIO, err: TextIO, show_boot: bool) -> None:
        self.out, self.err, self.show_boot = out, err, show_boot
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self.on_start: list[str] = []  # progress lines once the guest loaded its modules
        self.marks: dict[str, str] = {}
        self.mark_times: dict[str, float] = {}
        self.started = time.monotonic()

    def __call__(self, line: str) -> None:
        if line.startswith(MARK + " "):
            key, _, value = line[len(MARK) + 1:].partition(" ")
            self.marks[key] = value
            self.mark_times[key] = time.monotonic() - self.started
            if key == "kernel":
                self.err.write(f"folio-vm: {value.strip()}\n")
            elif key in ("mtd", "fs", "ramfs", "ramfs-skip"):
                for shown in device_lines(key, value):
                    self.err.write(f"folio-vm: {shown}\n")
            if key == "start":
                self.err.writelines(f"folio-vm: {line}\n" for line in self.on_start)
            self.err.flush()
        elif "start" in self.marks and "exit" not in self.marks:
            self.tail.append(line)
            self.out.write(line + "\n")
            self.out.flush()
        else:
            self.tail.append(line)
            if self.show_boot:
                self.err.write(line + "\n")
                self.err.flush()

    def ready(self) -> bool:
        return "init" in self.marks

    def done(self) -> bool:
        return "exit" in self.marks or "error" in self.marks

    def last_line(self) -> str:
        lines = [ln.strip() for ln in self.tail if ln.strip()]
        return lines[-1] if lines else "(no console output)"
