"""Files and directories the package writes where others may also write (``--folio-fsx-dir``,
``--folio-failures``, a shared cache, a test's output directory): never through a planted
symlink, never half written, and nothing removed that the package did not make.

Every file is written to a new temporary file beside it, created exclusively under a
random name (so no one can have placed a symlink there first), fsynced, then renamed over
the final name: a rename replaces a symlink at that name instead of writing where it
points, and a full file system leaves the old file whole. The file gets the mode
``open()`` would have given it (0666 less the umask).

A directory the package makes for itself carries a marker file; :func:`remove_owned`
removes only a real directory holding its marker, and in it only the names the package
recorded: whatever else is found there stays.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO


def umask() -> int:
    """The process's umask (read without changing it where Linux allows)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write(path: str | os.PathLike[str], fill: Callable[[BinaryIO], object],
           publish: Callable[[str, Path], object]) -> Path:
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        publish(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


def write_file(path: str | os.PathLike[str], data: bytes | str,
               publish: Callable[[str, Path], object] = os.replace) -> Path:
    """Write ``data`` to ``path`` as the module says; ``publish(tmp, path)`` puts the new
    file in place (``os.replace``; ``os.link`` to fail with FileExistsError when the name
    is taken). The temporary file never outlives a failure."""
    raw = data.encode() if isinstance(data, str) else data
    return _write(path, lambda f: f.write(raw), publish)


def copy_file(src: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Path:
    """Copy the file ``src`` to ``dest`` as :func:`write_file` writes (streamed: a log
    may be larger than is wise to hold in memory)."""
    with open(src, "rb") as inp:
        return _write(dest, lambda f: shutil.copyfileobj(inp, f), os.replace)


def name_for(text: str, limit: int = 80, *, unique: str | None = None) -> str:
    """A file name for ``text`` that no other text gets: a readable prefix (its runs of
    characters a file name should not hold turned into ``_``, cut to ``limit``) and a
    short hash of the whole text (of ``unique`` when given), the same in every
    process."""
    readable = re.sub(r"[^\w.-]+", "_", text).strip("_.")[:limit] or "x"
    whole = (text if unique is None else unique).encode(errors="surrogatepass")
    return f"{readable}-{hashlib.sha256(whole).hexdigest()[:12]}"


def owned(directory: Path, marker: str) -> bool:
    """Whether ``directory`` is a real directory (not a symlink) holding the regular
    file ``marker``: one the package made."""
    try:
        return (stat.S_ISDIR(os.lstat(directory).st_mode)
                and stat.S_ISREG(os.lstat(directory / marker).st_mode))
    except OSError:
        return False


def make_owned(parent: Path, prefix: str, marker: str, record: str) -> Path:
    """A new directory in ``parent`` under a random name starting ``prefix`` (mode as
    ``mkdir`` gives), its ``marker`` holding ``record`` written first."""
    made = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        os.chmod(made, 0o777 & ~umask())
        write_file(made / marker, record)
    except OSError:
        os.rmdir(made)      # still empty: the marker's temporary file never outlives it
        raise
    return made


def remove_owned(directory: Path, marker: str, names: Iterable[str]) -> bool:
    """Remove ``names`` (plain names the package wrote there), then ``marker``, then the
    directory, when :func:`owned` says it is the package's; a directory that still holds
    anything else stays. The names are removed through a descriptor of the directory
    opened without following a symlink, so a directory swapped for a link meanwhile is
    not reached. True when it is gone."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.stat(marker, dir_fd=fd, follow_symlinks=False).st_mode):
            return False
        for name in [*names, marker]:
            if name in ("", ".", "..") or "/" in name or "\0" in name:
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)      # a symlink is removed, never followed
        os.rmdir(directory)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True
