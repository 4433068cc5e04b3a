"""A kernel's module tree: module names, their .modinfo, and the order to load them in."""

from __future__ import annotations

import lzma
import os
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path

from pytest_folio.vm import VMError
from pytest_folio.vm.bootimage import ELF_MAGIC, decompress

MODULE_SUFFIXES = (".ko", ".ko.xz", ".ko.gz", ".ko.zst")


def module_name(filename: str) -> str:
    """The name the kernel knows a module by: file name without suffix, '-' as '_'."""
    for suffix in MODULE_SUFFIXES:
        if filename.endswith(suffix):
            filename = filename[: -len(suffix)]
            break
    return filename.replace("-", "_")


def read_module(path: Path) -> bytes:
    """A module file's ELF bytes, decompressed (busybox insmod loads plain .ko files)."""
    data = path.read_bytes()
    if path.name.endswith(".ko.xz"):
        return lzma.decompress(data)
    if path.name.endswith(".ko.gz"):
        return zlib.decompress(data, wbits=31)
    if path.name.endswith(".ko.zst"):
        out = decompress("zstd", data)
        if out[:4] != ELF_MAGIC:
            raise VMError(f"{path}: cannot decompress (install zstd)")
        return out
    return data


def modinfo(ko: bytes) -> dict[str, str]:
    """The key=value pairs of a module's .modinfo section (depends, vermagic, ...)."""
    if ko[:4] != ELF_MAGIC or ko[4] != 2:
        raise ValueError("not a 64-bit ELF module")
    shoff, = struct.unpack_from("<Q", ko, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ko, 0x3A)

    def section(i: int) -> tuple[int, int, int]:
        name, _type, _flags, _addr, offset, size = struct.unpack_from(
            "<IIQQQQ", ko, shoff + i * shentsize)
        return name, offset, size

    _, str_off, _ = section(shstrndx)
    info: dict[str, str] = {}
    for i in range(shnum):
        name, offset, size = section(i)
        if ko[str_off + name:str_off + name + 9] == b".modinfo\0":
            for item in ko[offset:offset + size].split(b"\0"):
                key, sep, value = item.decode("utf-8", "replace").partition("=")
                if sep:
                    info.setdefault(key, value)
    return info


class ModuleTree:
    """A kernel's lib/modules/RELEASE: which modules exist, which are built in, deps."""

    def __init__(self, root: Path, release: str | None = None) -> None:
        self.root = root
        self.release = release
        self._index: dict[str, Path] | None = None
        self._aliases: dict[str, list[str]] | None = None
        builtin = root / "modules.builtin"
        self.builtin = ({module_name(Path(line).name) for line in
                         builtin.read_text().split()} if builtin.is_file() else set())

    def index(self) -> dict[str, Path]:
        if self._index is None:
            self._index = {}
            for dirpath, _dirs, files in os.walk(self.root):
                for filename in files:
                    if filename.endswith(MODULE_SUFFIXES):
                        self._index.setdefault(module_name(filename),
                                               Path(dirpath) / filename)
        return self._index

    def load_order(self, wanted: Iterable[str],
                   config_names: dict[str, str] | None = None) -> list[tuple[str, bytes]]:
        """The modules to insmod for ``wanted``, dependencies first; built-ins skipped."""
        config_names = config_names or {}
        order: list[tuple[str, bytes]] = []
        seen: set[str] = set()

        def visit(name: str, needed_by: str | None) -> None:
            if name in seen or name in self.builtin:
                return
            seen.add(name)
            path = self.index().get(name)
            if path is None:
                what = f" ({config_names[name]})" if name in config_names else ""
                why = f", needed by {needed_by}" if needed_by else ""
                raise VMError(f"kernel {self.release or self.root.name} has no {name}"
                              f"{what}{why}: neither built in nor a module in {self.root}")
            data = read_module(path)
            info = modinfo(data)
            magic = info.get("vermagic", "").split()
            if self.release and magic and magic[0] != self.release:
                raise VMError(f"module {path} is for kernel {magic[0]}, "
                              f"not {self.release}")
            for dep in filter(None, info.get("depends", "").split(",")):
                visit(dep.replace("-", "_"), name)
            for dep in self.soft_pre(info.get("softdep", "")):
                visit(dep, name)
            order.append((name, data))

        for name in wanted:
            visit(name, None)
        return order

    def soft_pre(self, softdep: str) -> list[str]:
        """The modules a ``softdep=pre: ...`` asks to be loaded first, where the tree has
        them (by name, else by alias; a generic implementation before a CPU-specific one,
        which may refuse the guest's CPU). Without modprobe in the guest nobody else loads
        them: libcrc32c (xfs, on 6.1) fails its init without a crc32c algorithm."""
        words = softdep.split()
        pre = words[words.index("pre:") + 1:] if "pre:" in words else []
        pre = pre[:pre.index("post:")] if "post:" in pre else pre
        found = []
        for want in pre:
            name = module_name(want)
            if name in self.builtin or name in self.index():
                found.append(name)
                continue
            providers = sorted(self.aliases().get(want, []),
                               key=lambda m: not m.endswith("_generic"))
            found += [m for m in providers if m in self.index()][:1]
        return found

    def aliases(self) -> dict[str, list[str]]:
        """modules.alias's plain aliases (no wildcards): alias -> module names."""
        if self._aliases is None:
            self._aliases = {}
            path = self.root / "modules.alias"
            lines = path.read_text().splitlines() if path.is_file() else []
            for line in lines:
                words = line.split()
                if len(words) == 3 and words[0] == "alias" and "*" not in words[1]:
                    self._aliases.setdefault(words[1], []).append(module_name(words[2]))
        return self._aliases
