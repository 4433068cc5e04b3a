"""The ramfs blocksize cover letter's benchmark: dd-style write bandwidth by block size.

The seed ran ``dd if=/mnt/rand of=/media/test/rand bs=2M count=2048`` on ramfs mounted
with ``-o blocksize=$bs``. This writes random data in 2 MiB writes into a fresh file on the
``--folio-fs`` target at every ``--folio-block-sizes`` size, times each pass, and records
the bytes, so ``python -m pytest_folio bandwidth`` prints GB/s. Run by ramfs.sh.
"""

from __future__ import annotations

import os
import random
from typing import Any

DD_BS = 2 << 20                  # dd bs=2M
TOTAL = 128 << 20                # bytes per pass (the seed wrote 4 GiB to a real ramfs)
PASSES = 7
WARMUP = 2                       # untimed passes: the first touch of fresh memory faults


def test_dd_write(filesystem: Any, block_size: int, folio_timer: Any) -> None:
    data = random.Random(block_size).randbytes(DD_BS)
    for n in range(WARMUP + PASSES):
        fd = filesystem.open("rand", os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
        try:
            if n < WARMUP:
                write_file(filesystem, fd, data)
            else:
                with folio_timer("dd write (bs=2M)", bytes=TOTAL):
                    write_file(filesystem, fd, data)
            assert filesystem.fstat(fd).st_size == TOTAL
        finally:
            filesystem.close(fd)
            filesystem.unlink("rand")


def write_file(filesystem: Any, fd: int, data: bytes) -> None:
    """What dd does: TOTAL bytes in DD_BS-sized writes from the start of the file."""
    for offset in range(0, TOTAL, DD_BS):
        assert filesystem.pwrite(fd, data, offset) == DD_BS
