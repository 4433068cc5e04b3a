"""The guest's first user space: a small cpio with busybox, the modules and an init script.

The modules that reach the host's root (virtio, 9p) cannot come from that root, so they
ride in the initramfs together with the device modules (virtio_blk, block2mtd, a file
system's) and a static busybox for insmod and mount. The init script mounts the host root
read-only over 9p, puts tmpfs on /run (scratch space: TMPDIR, HOME), the writable results
share, a bytecode share and a kernel ramfs under it, attaches block2mtd to each MTD disk
and mounts each file-system disk (disks found by their serial), then runs the host's
Python once, chrooted into the host root, and powers off. Lines starting with
:data:`MARK` tell the host what happened.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.vm import VMError
from pytest_folio.vmabi import GUEST_OUT, GUEST_RUN, MARK

GUEST_RAMFS = f"{GUEST_RUN}/ramfs"
GUEST_TMP = f"{GUEST_RUN}/tmp"
GUEST_PYCACHE = f"{GUEST_RUN}/pycache"  # PYTHONPYCACHEPREFIX, kept on the host across boots
# --fs ramfs: the guest mounts one ramfs per block size it can have and writes the pytest
# options naming them here; RAMFS_ARGS in the argv stands for them.
GUEST_RAMFS_ARGS = f"{GUEST_RUN}/ramfs.args"
RAMFS_ARGS = "@ramfs-args@"
ROOT_TAG = "folioroot"
OUT_TAG = "folioout"
PYCACHE_TAG = "foliopyc"
NINEP_OPTS = "trans=virtio,version=9p2000.L,msize=512000"

BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")


def find_busybox() -> Path:
    """A statically linked busybox: the initramfs has no C library to load a dynamic one."""
    for candidate in (*BUSYBOX_CANDIDATES, shutil.which("busybox")):
        if candidate and Path(candidate).is_file() and _is_static(Path(candidate)):
            return Path(candidate)
    raise VMError("no static busybox found: install busybox-static "
                  "(apt-get install busybox-static)")


def _is_static(path: Path) -> bool:
    """No PT_INTERP program header means no dynamic loader is needed."""
    data = path.read_bytes()[:0x4000]
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return False
    phoff = int.from_bytes(data[0x20:0x28], "little")
    phentsize = int.from_bytes(data[0x36:0x38], "little")
    phnum = int.from_bytes(data[0x38:0x3A], "little")
    for i in range(phnum):
        start = phoff + i * phentsize
        if int.from_bytes(data[start:start + 4], "little") == 3:  # PT_INTERP
            return False
    return True


# --- cpio "newc" (the format the kernel unpacks; see init/initramfs.c) -----------------

@dataclasses.dataclass(frozen=True)
class Entry:
    name: str
    mode: int
    data: bytes = b""
    rdev: tuple[int, int] = (0, 0)


def cpio_newc(entries: Iterable[Entry]) -> bytes:
    """An uncompressed newc archive with a trailer; every entry owned by root."""
    out = bytearray()

    def pad() -> None:
        out.extend(b"\0" * (-len(out) % 4))

    entries = [*entries, Entry("TRAILER!!!", 0)]
    for ino, entry in enumerate(entries, start=1):
        name = entry.name.encode() + b"\0"
        fields = (ino, entry.mode, 0, 0, 1, 0, len(entry.data), 0, 0,
                  entry.rdev[0], entry.rdev[1], len(name), 0)
        out.extend(b"070701" + b"".join(b"%08X" % f for f in fields))
        out.extend(name)
        pad()
        out.extend(entry.data)
        pad()
    return bytes(out)


def directory(name: str) -> Entry:
    return Entry(name, stat.S_IFDIR | 0o755)


# --- the init script --------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GuestDisk:
    """A virtio disk as the guest sets it up: block2mtd on it as ``mtd``, or the file
    system the host made on it mounted at ``mountpoint``."""

    serial: str                # how the guest finds it (/sys/block/vdX/serial)
    logical_block_size: int    # what its queue must say (else the kernel refused it)
    mtd: str = ""              # "/dev/mtdN" that block2mtd must make on it
    erasesize: int = 0
    fstype: str = ""           # "xfs", "ext4": mounted at ``mountpoint`` in the guest
    mountpoint: str = ""


@dataclasses.dataclass(frozen=True)
class GuestJob:
    """What the guest does once it is up."""

    modules: list[str]              # names to insmod, in order (files in /lib/modules)
    module_params: dict[str, str]   # name -> parameters for insmod
    cwd: str
    argv: list[str]                 # the one process to run, chrooted into the host root
    env: dict[str, str]
    disks: list[GuestDisk] = dataclasses.field(default_factory=list)
    ramfs_sizes: tuple[int, ...] = ()  # --fs ramfs: one mount per block size
    ramfs_type: str = "ramfs"  # what they mount: ramfs, or a patched ramfs's module form
    heartbeat: bool = False    # vm --guests: an "alive" line every HEARTBEAT s (hang check)
    # vm --guests: other guests write the bytecode share too. cache=loose is for a mount
    # nobody else changes: a .pyc another guest wrote through its page cache and renamed
    # into place can reach the host after the rename, and a guest reading it then finds
    # it cut short ("marshal data too short"). Uncached, every write is on the host first.
    pycache_shared: bool = False


HEARTBEAT = 10


TRACING = "/sys/kernel/tracing"
ADD_TO_PAGE_CACHE = f"{TRACING}/events/filemap/mm_filemap_add_to_page_cache"

# Shell functions of the init script. disk: the vdX with this serial. folios: the folio
# orders the page cache used reading a disk's first 256K, from the add_to_page_cache
# tracepoint ("COUNTxORDER ..."); the bdev inode's number is its dev_t (ino in hex).
_FUNCTIONS = f"""\
disk() {{ for d in /sys/block/vd*; do [ "$(cat $d/serial 2>/dev/null)" = "$1" ] \\
    && {{ echo "${{d##*/}}"; return; }}; done; }}
folios() {{
    [ -f {ADD_TO_PAGE_CACHE}/enable ] || {{ echo none; return; }}
    echo > {TRACING}/trace; echo 1 > {ADD_TO_PAGE_CACHE}/enable
    dd if=/dev/$1 of=/dev/null bs=65536 count=4 2>/dev/null
    echo 0 > {ADD_TO_PAGE_CACHE}/enable
    mm=$(cat /sys/block/$1/dev); ino=$(printf %x $(( (${{mm%:*}} << 20) | ${{mm#*:}} )))
    orders $ino
}}
orders() {{
    grep " ino $1 .*order=" {TRACING}/trace | sed 's/.*order=\\([0-9]*\\).*/\\1/' | sort -n \\
        | uniq -c | while read n o; do printf '%sx%s ' "$n" "$o"; done
}}
"""


def disk_lines(disks: list[GuestDisk]) -> list[str]:
    """Attach block2mtd to each MTD disk and mount each file-system disk; one MARK line
    per device, read back from the guest's sysfs and /proc."""
    q = shlex.quote
    lines = [f"mount -t tracefs tracefs {TRACING} 2>/dev/null"]
    for d in disks:
        what = f"disk {d.serial} (logical block size {d.logical_block_size})"
        hint = ("; a logical block above PAGE_SIZE needs CONFIG_TRANSPARENT_HUGEPAGE"
                if d.logical_block_size > PAGE_SIZE else "")
        lines += [
            f"dev=$(disk {q(d.serial)}); [ -n \"$dev\" ] || fail \"no {what}: $(dmesg"
            f" | grep -i -e virtio_blk -e 'block size' | tail -n 1){hint}\"",
            f"lbs=$(cat /sys/block/$dev/queue/logical_block_size); "
            f"[ \"$lbs\" = {d.logical_block_size} ] || fail \"/dev/$dev has logical block "
            f"size $lbs, not {d.logical_block_size}\"",
        ]
        if d.mtd:
            index = d.mtd.removeprefix("/dev/mtd")
            lines += [
                f"echo /dev/$dev,{d.erasesize} > /sys/module/block2mtd/parameters/block2mtd",
                # the write returns 0 even when block2mtd refused: /proc/mtd tells
                f"grep -q \"^mtd{index}: .*block2mtd: /dev/$dev\" /proc/mtd || fail "
                f"\"block2mtd made no {d.mtd} on /dev/$dev: $(dmesg | tail -n 1)\"",
                f"echo \"{MARK} mtd {d.mtd} /dev/$dev $lbs $(folios $dev)\"",
            ]
        else:
            lines += [
                f"mkdir -p /newroot{d.mountpoint}",
                f"mount -t {d.fstype} /dev/$dev /newroot{d.mountpoint} || fail \"cannot "
                f"mount the {d.fstype} on /dev/$dev: $(dmesg | tail -n 1)\"",
                f"echo \"{MARK} fs {d.mountpoint} {d.fstype} /dev/$dev "
                f"$(stat -f -c %S /newroot{d.mountpoint})\"",
            ]
    return lines


def ramfs_lines(sizes: tuple[int, ...], fstype: str = "ramfs") -> list[str]:
    """Mount a ramfs per block size with ``-o blocksize=`` (file system ``fstype``: the
    built-in ramfs, or a patched one built as a module of its own name), keep those the
    kernel really made at that size (``blocksize=`` in /proc/mounts and statfs's block
    size: a ramfs without the option ignores it), see which folio orders a 256K write
    into each gets, and write the pytest options naming them to GUEST_RAMFS_ARGS. One
    MARK line per mount, or per size skipped with the reason."""
    lines = ["spec=; kept="]
    for bs in sizes:
        name = f"{bs >> 10}k"
        where = f"{GUEST_RUN}/ramfs-{name.upper()}"
        root = f"/newroot{where}"
        probe = f"{root}/.folio-probe"
        lines += [
            f"mkdir -p {root}",
            f"if ! mount -t {fstype} -o blocksize={name} {fstype} {root} 2>/dev/null; then",
            f"  echo \"{MARK} ramfs-skip {bs} mount -o blocksize={name} failed: "
            "$(dmesg | tail -n 1)\"",
            f"elif ! grep -q \" {root} {fstype} .*blocksize=\" /proc/mounts && [ {bs} != "
            f"{PAGE_SIZE} ]; then",
            f"  umount {root}; echo \"{MARK} ramfs-skip {bs} the kernel has no {fstype} "
            "blocksize mount option (/proc/mounts shows none)\"",
            f"elif [ \"$(stat -f -c %S {root})\" != {bs} ]; then",
            f"  echo \"{MARK} ramfs-skip {bs} statfs says block size $(stat -f -c %S {root})"
            f"\"; umount {root}",
            "else",
            f"  if [ -f {ADD_TO_PAGE_CACHE}/enable ]; then echo > {TRACING}/trace; "
            f"echo 1 > {ADD_TO_PAGE_CACHE}/enable; fi",
            f"  dd if=/dev/zero of={probe} bs=65536 count=4 2>/dev/null",
            f"  seen=none; if [ -f {ADD_TO_PAGE_CACHE}/enable ]; then echo 0 > "
            f"{ADD_TO_PAGE_CACHE}/enable; seen=$(orders $(printf %x $(stat -c %i {probe})));"
            " fi",
            f"  rm -f {probe}",
            f"  echo \"{MARK} ramfs {where} {bs} ${{seen:-none}}\"",
            f"  spec=\"$spec${{spec:+,}}{name.upper()}={where}\"; "
            f"kept=\"$kept${{kept:+,}}{name}\"",
            "fi",
        ]
    lines += ["[ -n \"$spec\" ] || fail \"no --folio-block-sizes size can be a ramfs block "
              "size on this kernel\"",
              f"echo \"--folio-fs=$spec --folio-block-sizes=$kept\" > /newroot{GUEST_RAMFS_ARGS}"]
    return lines


def command_line(argv: list[str]) -> str:
    """``argv`` as a shell command; RAMFS_ARGS becomes the options the guest wrote."""
    parts = [f"$(cat {GUEST_RAMFS_ARGS})" if a == RAMFS_ARGS else shlex.quote(a)
             for a in argv]
    return " ".join(parts)


def init_script(job: GuestJob) -> str:
    """The /init the kernel runs (busybox sh). Failures print one MARK error line."""
    q = shlex.quote
    lines = [
        "#!/bin/sh",
        "export PATH=/bin",
        f"fail() {{ echo \"{MARK} error $*\"; sync; poweroff -f; }}",
        _FUNCTIONS,
        "mount -t proc proc /proc; mount -t sysfs sysfs /sys",
        "mount -t devtmpfs devtmpfs /dev",
        f"echo \"{MARK} init\"",
    ]
    for name in job.modules:
        params = job.module_params.get(name, "")
        lines.append(f"insmod /lib/modules/{name}.ko {params} "
                     f"|| fail \"insmod {name} failed: $(dmesg | tail -n 1)\"")
    lines += [
        f"mount -t 9p -o {NINEP_OPTS},ro,cache=loose {ROOT_TAG} /newroot "
        "|| fail \"cannot mount the host root over 9p (needs CONFIG_NET_9P_VIRTIO, "
        "CONFIG_9P_FS and CONFIG_VIRTIO_PCI)\"",
        "mount -t tmpfs -o mode=0755 tmpfs /newroot/run || fail 'cannot mount tmpfs on /run'",
        "mkdir -p " + " ".join(f"/newroot{d}" for d in (GUEST_OUT, GUEST_RAMFS, GUEST_TMP,
                                                         GUEST_PYCACHE, f"{GUEST_RUN}/home")),
        f"mount -t 9p -o {NINEP_OPTS} {OUT_TAG} /newroot{GUEST_OUT} "
        "|| fail 'cannot mount the results share'",
        # without the bytecode share Python still works, compiling into tmpfs
        f"mount -t 9p -o {NINEP_OPTS}{'' if job.pycache_shared else ',cache=loose'} "
        f"{PYCACHE_TAG} /newroot{GUEST_PYCACHE} 2>/dev/null",
        f"mount -t ramfs ramfs /newroot{GUEST_RAMFS} || fail 'cannot mount ramfs'",
        "mount -t proc proc /newroot/proc; mount -t sysfs sysfs /newroot/sys",
        "mount -t devtmpfs devtmpfs /newroot/dev",
        "mkdir -p /newroot/dev/shm /newroot/dev/pts",
        "mount -t tmpfs tmpfs /newroot/dev/shm; mount -t devpts devpts /newroot/dev/pts",
        f"echo \"{MARK} kernel $(dmesg | grep -m 1 'Linux version')\"",
        *disk_lines(job.disks),
        *(ramfs_lines(job.ramfs_sizes, job.ramfs_type) if job.ramfs_sizes else
          [f"echo \"{MARK} fs {GUEST_RAMFS} ramfs - $(stat -f -c %S /newroot{GUEST_RAMFS})\""]),
        *([f"(while :; do echo \"{MARK} alive\"; sleep {HEARTBEAT}; done) &"]
          if job.heartbeat else []),
        f"echo \"{MARK} start\"",
        "chroot /newroot /usr/bin/env -i "
        + " ".join(q(f"{k}={v}") for k, v in job.env.items())
        + f" /bin/sh -c {q('cd ' + q(job.cwd) + ' && exec ' + command_line(job.argv))}"
        + " </dev/null",
        "status=$?",
        f"dmesg > /newroot{GUEST_OUT}/dmesg.txt",
        f"echo \"{MARK} exit $status\"",
        "sync",
        "poweroff -f",
    ]
    return "\n".join(lines) + "\n"


def build_initramfs(busybox: Path, modules: list[tuple[str, bytes]], job: GuestJob) -> bytes:
    """The whole cpio: busybox (and its applet links), the modules, /init, /dev/console."""
    entries = [directory(d) for d in ("bin", "dev", "proc", "sys", "newroot", "lib",
                                      "lib/modules")]
    entries.append(Entry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1)))
    entries.append(Entry("bin/busybox", stat.S_IFREG | 0o755, busybox.read_bytes()))
    for applet in ("sh", "mount", "mkdir", "insmod", "dmesg", "grep", "tail", "chroot",
                   "poweroff", "sync", "cat", "echo", "dd", "printf", "sed", "sort", "uniq",
                   "stat", "umount", "rm", "sleep"):
        entries.append(Entry(f"bin/{applet}", stat.S_IFLNK | 0o777, b"busybox"))
    for name, data in modules:
        entries.append(Entry(f"lib/modules/{name}.ko", stat.S_IFREG | 0o644, data))
    entries.append(Entry("init", stat.S_IFREG | 0o755, init_script(job).encode()))
    return cpio_newc(entries)
