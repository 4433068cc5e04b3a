"""Files the package writes where others may also write (``--folio-fsx-dir``, a shared
cache, a test's output directory): never through a planted symlink, never half written.

Every such file is written to a new temporary file beside it, created exclusively under
a random name (so no one can have placed a symlink there first), fsynced, then renamed
over the final name: a rename replaces a symlink at that name instead of writing where
it points. The file gets the mode ``open()`` would have given it (0666 less the umask).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


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


def write_file(path: str | os.PathLike[str], data: bytes | str,
               publish: Callable[[str, Path], object] = os.replace) -> Path:
    """Write ``data`` to ``path`` as the module says; ``publish(tmp, path)`` puts the new
    file in place (``os.replace``; ``os.link`` to fail with FileExistsError when the name
    is taken). The temporary file never outlives a failure."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        publish(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target
