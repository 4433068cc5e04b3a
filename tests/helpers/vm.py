"""Small builders for the VM tests: ELF files (modules, vmlinux), kernel trees, cpio reading;
whether a process is still alive."""

from __future__ import annotations

import os
import shutil
import struct
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_folio.vm.bootimage import XEN_ELFNOTE_PHYS32_ENTRY
from pytest_folio.vm.source import KernelSource

# linux-source ships as .tar.xz: tar needs xz to take anything out of it
needs_xz = pytest.mark.skipif(
    shutil.which("xz") is None,
    reason="needs xz for linux-source's .tar.xz (apt-get install xz-utils)")


def elf64(sections: dict[str, bytes] | None = None,
          notes: list[tuple[bytes, int, bytes]] | None = None) -> bytes:
    """A minimal little-endian ELF64: named sections and one PT_NOTE segment."""
    sections = sections or {}
    note_blob = b""
    for name, ntype, desc in notes or []:
        name0 = name + b"\0"
        note_blob += struct.pack("<III", len(name0), len(desc), ntype)
        note_blob += name0 + b"\0" * (-len(name0) % 4) + desc + b"\0" * (-len(desc) % 4)
    names = ["", *sections, ".shstrtab"]
    shstrtab = b"\0".join(n.encode() for n in names) + b"\0"
    name_offsets, pos = [], 0
    for n in names:
        name_offsets.append(pos)
        pos += len(n) + 1
    phnum = 1 if notes else 0
    body = bytearray(64 + 56 * phnum)
    note_off = len(body)
    body += note_blob
    offsets = []
    for data in [*sections.values(), shstrtab]:
        offsets.append(len(body))
        body += data
    body += b"\0" * (-len(body) % 8)
    shoff = len(body)
    body += b"\0" * 64  # the null section
    for i, data in enumerate([*sections.values(), shstrtab], start=1):
        body += struct.pack("<IIQQQQIIQQ", name_offsets[i], 1, 0, 0, offsets[i - 1],
                            len(data), 0, 0, 1, 0)
    header = struct.pack("<4sBBBBB7sHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 0, b"\0" * 7,
                         1, 62, 1, 0, 64 if phnum else 0, shoff, 0, 64, 56, phnum, 64,
                         len(names), len(names) - 1)
    body[:64] = header
    if phnum:
        body[64:120] = struct.pack("<IIQQQQQQ", 4, 4, note_off, 0, 0, len(note_blob),
                                   len(note_blob), 4)
    return bytes(body)


def pvh_vmlinux() -> bytes:
    return elf64({".text": b"\x90" * 64},
                 notes=[(b"Xen", XEN_ELFNOTE_PHYS32_ENTRY, b"\0" * 4)])


def module(depends: str = "", vermagic: str = "6.1.0-test SMP mod_unload ") -> bytes:
    info = f"license=GPL\0depends={depends}\0vermagic={vermagic}\0".encode()
    return elf64({".text": b"\xc3", ".modinfo": info})


def bzimage(payload: bytes, release: str = "6.1.0-test") -> bytes:
    """A setup header (HdrS, kernel_version pointer) followed by a compressed payload."""
    image = bytearray(0x1000)
    image[0x202:0x206] = b"HdrS"
    version = f"{release} (builder@host) #1 SMP".encode() + b"\0"
    image[0x300:0x300 + len(version)] = version
    struct.pack_into("<H", image, 0x20E, 0x300 - 0x200)
    return bytes(image) + payload + struct.pack("<I", 12345)


def kernel_tree(root: Path, release: str = "6.1.0-test",
                modules: dict[str, bytes] | None = None, builtin: Sequence[str] = ()) -> Path:
    """An unpacked kernel package: boot/vmlinuz-RELEASE and lib/modules/RELEASE."""
    (root / "boot").mkdir(parents=True)
    (root / "boot" / f"vmlinuz-{release}").write_bytes(bzimage(b"", release))
    mods = root / "lib" / "modules" / release
    for rel, data in (modules or {}).items():
        (mods / rel).parent.mkdir(parents=True, exist_ok=True)
        (mods / rel).write_bytes(data)
    mods.mkdir(parents=True, exist_ok=True)
    (mods / "modules.builtin").write_text("".join(f"kernel/{b}.ko\n" for b in builtin))
    return root


def kernel_source(tmp_path: Path, files: dict[str, str], compiler: str = "sh",
                  config: str | None = None) -> KernelSource:
    """A kernel's build inputs with the source ``files`` already taken out of its
    tarball, and headers with ``config`` as their .config (none when None)."""
    root = tmp_path / "src"
    for rel, text in files.items():
        (root / "tree" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "tree" / rel).write_text(text)
    headers = root / "headers"
    headers.mkdir(parents=True)
    if config is not None:
        (headers / ".config").write_text(config)
    return KernelSource("6.1.0-test", "6.1.1-1", root, headers, root / "none.tar.xz",
                        compiler)


def read_cpio(data: bytes) -> dict[str, tuple[int, bytes, tuple[int, int]]]:
    """Parse a newc archive: name -> (mode, data, (rdevmajor, rdevminor))."""
    entries: dict[str, tuple[int, bytes, tuple[int, int]]] = {}
    pos = 0
    while True:
        assert data[pos:pos + 6] == b"070701", f"bad magic at {pos}"
        fields = [int(data[pos + 6 + 8 * i:pos + 14 + 8 * i], 16) for i in range(13)]
        mode, filesize, rmaj, rmin, namesize = (fields[1], fields[6], fields[9],
                                                fields[10], fields[11])
        pos += 110
        name = data[pos:pos + namesize - 1].decode()
        pos += namesize
        pos += -pos % 4
        body = data[pos:pos + filesize]
        pos += filesize
        pos += -pos % 4
        if name == "TRAILER!!!":
            assert pos == len(data)
            return entries
        entries[name] = (mode, body, (rmaj, rmin))


def alive(pid: int) -> bool:
    """Running or sleeping; a zombie waiting for a reaper counts as gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def fake_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, qemu_script: str) -> Path:
    """``tmp_path`` as a machine for ``vm``: a qemu-system-x86_64 on PATH running
    ``qemu_script`` (a Python stand-in that plays the guest), a bzImage and a busybox
    stand-in; no KVM, no bytecode warm-up, ``tmp_path`` the working directory."""
    from pytest_folio.vm import runner

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    qemu = bin_dir / "qemu-system-x86_64"
    qemu.write_text(f"#!{sys.executable}\n{qemu_script}")
    qemu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_QEMU", "ok")
    (tmp_path / "bzImage").write_bytes(bzimage(b"", "6.1.0-test"))
    (tmp_path / "busybox").write_bytes(b"\x7fELF busybox")
    monkeypatch.setattr(runner, "find_busybox", lambda: tmp_path / "busybox")
    monkeypatch.setattr(runner, "kvm_usable", lambda: False)
    monkeypatch.setattr(runner, "warm_bytecode", lambda argv, prefix, environ: 0.0)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# The start of a stand-in qemu for a --guests guest (its script goes on from here): the
# worker channel's socket, the guest's name from its init, its pid kept for the tests'
# leak checks, and its first console line.
FAKE_GUEST_START = r'''
import os, re, signal, subprocess, sys, time
args = sys.argv[1:]
sock = [a for a in args if a.startswith("socket,id=worker,")][0].split("path=")[1].split(",")[0]
init = open(args[args.index("-initrd") + 1], "rb").read().decode("latin-1")
name = re.search(r"--name ([\w-]+)", init).group(1)
fake = os.environ["FAKE_DIR"]
open(os.path.join(fake, "qemu.pid"), "a").write(f"{os.getpid()}\n")
def say(line):
    sys.stdout.write(line + "\r\n"); sys.stdout.flush()
say("@@folio-vm init")
def start_worker():
    """init's last step: pytest's start mark, then the worker server on the socket."""
    say("@@folio-vm start")
    return subprocess.Popen([sys.executable, "-m", "pytest_folio.vm.gateway", "serve",
                             "--listen", sock, "--name", name])
'''
