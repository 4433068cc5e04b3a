"""What qemu boots: the vmlinux inside a bzImage (the logic of scripts/extract-vmlinux).

Under TCG an uncompressed vmlinux boots seconds faster than a bzImage (no decompression
in emulated code), so a bzImage is unpacked once and the vmlinux is booted through its
PVH entry point when it has one.
"""

from __future__ import annotations

import bz2
import hashlib
import lzma
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

from pytest_folio.vm import Progress, VMError

ELF_MAGIC = b"\x7fELF"


def bzimage_release(image: bytes) -> str | None:
    """The release string a bzImage carries in its setup header (kernel_version field)."""
    if len(image) < 0x210 or image[0x202:0x206] != b"HdrS":
        return None
    (pointer,) = struct.unpack_from("<H", image, 0x20E)
    start = pointer + 0x200
    if not pointer or start >= len(image):
        return None
    text = image[start:start + 256].split(b"\0", 1)[0].decode("ascii", "replace")
    return text.split()[0] if text.strip() else None


def decompress(kind: str, data: bytes) -> bytes:
    """``data`` unpacked by the named compressor (a kernel image's or a module's)."""
    if kind == "gzip":
        return zlib.decompressobj(wbits=31).decompress(data)
    if kind == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data)
    if kind == "lzma":
        return lzma.LZMADecompressor(format=lzma.FORMAT_ALONE).decompress(data)
    if kind == "bzip2":
        return bz2.BZ2Decompressor().decompress(data)
    tool = shutil.which(kind)  # zstd, lz4: no decompressor in the standard library
    if tool is None:
        return b""
    # A trailing size word follows the stream, so the tool may complain after a good
    # payload: the ELF check below decides, not the exit status.
    return subprocess.run([tool, "-dqc"], input=data, capture_output=True,
                          check=False).stdout


_MAGICS = [
    (b"\x1f\x8b\x08", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"BZh", "bzip2"),
    (b"\x5d\x00\x00\x00", "lzma"),
    (b"\x02\x21\x4c\x18", "lz4"),
]


def extract_vmlinux(image: bytes) -> bytes | None:
    """The ELF vmlinux inside a compressed kernel image, or None when there is none.

    Like extract-vmlinux: try every known compression magic at every offset where it
    occurs and keep the first result that is an ELF file.
    """
    if image[:4] == ELF_MAGIC:
        return image
    for magic, kind in _MAGICS:
        pos = image.find(magic)
        while pos >= 0:
            try:
                out = decompress(kind, image[pos:])
            except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError):
                out = b""
            if out[:4] == ELF_MAGIC:
                return out
            pos = image.find(magic, pos + 1)
    return None


XEN_ELFNOTE_PHYS32_ENTRY = 18
PT_NOTE = 4


def has_pvh_note(elf: bytes) -> bool:
    """Whether a 64-bit vmlinux has the PVH entry note qemu needs to boot it directly."""
    if elf[:4] != ELF_MAGIC or elf[4] != 2:
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        p_type, _flags, offset = struct.unpack_from("<IIQ", elf, phoff + i * phentsize)
        if p_type != PT_NOTE:
            continue
        (filesz,) = struct.unpack_from("<Q", elf, phoff + i * phentsize + 0x20)
        pos, end = offset, offset + filesz
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", elf, pos)
            name = elf[pos + 12:pos + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and ntype == XEN_ELFNOTE_PHYS32_ENTRY:
                return True
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def bootable_image(image: Path, store: Path, progress: Progress) -> Path:
    """What qemu should boot: the vmlinux unpacked from ``image`` when it has a PVH note,
    else ``image`` itself.

    The result is cached in ``store`` by the image's hash (a marker remembers "no usable
    vmlinux"), so the decompression happens once per kernel.
    """
    data = image.read_bytes()
    if data[:4] == ELF_MAGIC:
        if not has_pvh_note(data):
            raise VMError(f"--kernel {image}: an ELF vmlinux without a PVH entry "
                          "note (CONFIG_PVH) cannot be booted directly; give the bzImage")
        return image
    key = hashlib.sha256(data).hexdigest()[:20]
    target, marker = store / key, store / f"{key}.none"
    if target.is_file():
        return target
    if marker.exists():
        return image
    progress(f"unpacking the vmlinux inside {image.name} (boots faster under TCG)")
    store.mkdir(parents=True, exist_ok=True)
    elf = extract_vmlinux(data)
    if elf is None or not has_pvh_note(elf):
        marker.touch()
        return image
    tmp = store / f".{key}.{os.getpid()}"
    tmp.write_bytes(elf)
    tmp.replace(target)
    return target
