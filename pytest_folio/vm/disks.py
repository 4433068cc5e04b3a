"""The guest's disks: one MTD disk per folio order the booted kernel can give, and with
``--fs xfs|ext4`` one scratch file system per block size it can mount, made on the host.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.sizes import format_size
from pytest_folio.vm import Progress, VMError
from pytest_folio.vm.initramfs import GUEST_RUN, GuestDisk
from pytest_folio.vm.qemu import Disk
from pytest_folio.vm.runsettings import RunSettings

# A block device's page cache holds folios of its logical block size from Linux 6.15 on
# (before, a logical block size above PAGE_SIZE is refused), and block devices take
# logical blocks up to BLK_MAX_BLOCK_SIZE, 64K.
LARGE_BDEV_FOLIOS = (6, 15)
MAX_BDEV_ORDER = 4


@dataclasses.dataclass(frozen=True)
class FsKind:
    """A scratch file system the host makes on a disk image for ``--fs``."""

    large_blocks: tuple[int, int]  # the first kernel mounting blocks > PAGE_SIZE
    max_block: int
    mkfs: tuple[str, ...]          # {bs} is the block size
    package: str                   # where the mkfs tool comes from (named when missing)


FILE_SYSTEMS = {
    "xfs": FsKind((6, 12), 64 << 10, ("mkfs.xfs", "-q", "-f", "-b", "size={bs}"),
                  "xfsprogs"),
    "ext4": FsKind((6, 19), 64 << 10, ("mkfs.ext4", "-q", "-F", "-b", "{bs}"),
                   "e2fsprogs"),
}
FS_DISK_SIZE = 512 << 20  # sparse; mkfs.xfs wants at least 300M


def kernel_version(release: str) -> tuple[int, int] | None:
    """(major, minor) from a release string such as 7.2.13+deb14-amd64."""
    match = re.match(r"(\d+)\.(\d+)", release)
    return (int(match.group(1)), int(match.group(2))) if match else None


def mtd_orders(run: RunSettings, release: str, progress: Progress) -> list[int]:
    """The folio orders to make MTD devices at: the run's, checked against what the
    booted kernel can give a block device; a default list is cut to those."""
    orders, given = run.orders, run.orders_given
    version = kernel_version(release)
    large = version is None or version >= LARGE_BDEV_FOLIOS
    cannot = [o for o in orders if o > MAX_BDEV_ORDER or (o > 0 and not large)]
    if not cannot:
        return orders
    sizes = ", ".join(format_size(PAGE_SIZE << o) for o in cannot)
    why = (f"block devices take logical blocks up to {format_size(PAGE_SIZE << MAX_BDEV_ORDER)}"
           if large else "folios above PAGE_SIZE in a block device's page cache need "
           f"Linux {'.'.join(map(str, LARGE_BDEV_FOLIOS))} or later")
    if given:
        raise VMError(f"kernel {release} cannot give block2mtd {sizes} folios ({why}); "
                      "pass --folio-orders the kernel can give")
    kept = [o for o in orders if o not in cannot] or [0]
    progress(f"kernel {release}: no {sizes} folio devices ({why}); MTD devices "
             f"at {', '.join(format_size(PAGE_SIZE << o) for o in kept)} folios")
    return kept


def block_size_refusal(fs: str, bs: int, release: str) -> str | None:
    """Why kernel ``release`` cannot have an ``fs`` of ``bs`` blocks; None when it can."""
    kind = FILE_SYSTEMS[fs]
    version = kernel_version(release)
    if bs > kind.max_block:
        return f"{fs} blocks are at most {format_size(kind.max_block)}"
    if bs > PAGE_SIZE and version is not None and version < kind.large_blocks:
        return (f"{fs} blocks above PAGE_SIZE need Linux "
                f"{'.'.join(map(str, kind.large_blocks))} or later, not {release}")
    return None


def fs_block_sizes(fs: str, run: RunSettings, release: str,
                   progress: Progress) -> list[int]:
    """The block sizes to make ``--fs`` file systems at; the others skipped, said why."""
    kept = []
    for bs in run.block_sizes:
        why = block_size_refusal(fs, bs, release)
        if why is None:
            kept.append(bs)
        else:
            progress(f"{fs} at {format_size(bs)} blocks: skipped ({why})")
    if not kept:
        raise VMError(f"no --folio-block-sizes size {fs} can have on kernel {release}")
    return kept


def mtd_disks(work: Path, orders: list[int], mtd_size: int,
              erasesize: int) -> list[tuple[Disk, GuestDisk]]:
    """One sparse image per folio order, its logical block size the folio size."""
    disks = []
    for index, order in enumerate(orders):
        lbs = PAGE_SIZE << order
        if mtd_size % lbs:
            raise VMError(f"--mtd-size {format_size(mtd_size)} is not a "
                          f"multiple of the {format_size(lbs)} logical block size")
        image = work / f"mtd-{format_size(lbs)}.img"
        with image.open("wb") as f:
            f.truncate(mtd_size)
        serial = f"folio-mtd-{format_size(lbs)}"
        disks.append((Disk(image, serial, lbs),
                      GuestDisk(serial, lbs, mtd=f"/dev/mtd{index}", erasesize=erasesize)))
    return disks


def fs_disks(work: Path, fs: str, sizes: list[int]) -> list[tuple[Disk, GuestDisk]]:
    """One sparse image per block size, the file system made on the host."""
    if not sizes:
        return []
    kind = FILE_SYSTEMS[fs]
    tool = shutil.which(kind.mkfs[0], path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    if tool is None:
        raise VMError(f"{kind.mkfs[0]} not found: install {kind.package} "
                      f"(apt-get install {kind.package})")
    disks = []
    for bs in sizes:
        image = work / f"{fs}-{format_size(bs)}.img"
        with image.open("wb") as f:
            f.truncate(FS_DISK_SIZE)
        cmd = [tool, *(a.format(bs=bs) for a in kind.mkfs[1:]), str(image)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            reason = last_line(proc.stderr + proc.stdout) or f"exit status {proc.returncode}"
            raise VMError(f"{shlex.join(cmd)} failed: {reason}")
        serial = f"folio-{fs}-{format_size(bs)}"
        mountpoint = f"{GUEST_RUN}/{fs}-{format_size(bs)}"
        disks.append((Disk(image, serial, 512),
                      GuestDisk(serial, 512, fstype=fs, mountpoint=mountpoint)))
    return disks


def last_line(text: str) -> str:
    """The last non-empty line of a tool's output (empty when there is none)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""

