"""``vm --guest SPEC``: a matrix of guests (kernels, file systems, block sizes) in one
session, and what its controller and workers know of it.

A SPEC is ``key=value`` pairs joined by commas, lists joined by ``+``::

    kernel=debian:bookworm-backports,fs=xfs,block-sizes=4k+64k,orders=0+2,name=bpo
    patch=examples/seeds/block2mtd-folio.patch,name=patched

Guests of one kernel, file system, orders, block sizes and patches form a *group*, named
by its label (``xfs@6.12.95+deb12-amd64``, ``xfs@6.1.0-57-amd64+block2mtd-folio`` for a
guest whose modules a ``patch=`` rebuilt, or the SPEC's ``name``). The runner boots them,
then hands the controller a :class:`Matrix` (JSON in :data:`MATRIX_ENV`); the controller
hands it to every worker. Every process parametrizes the items whose answers come from a
guest's kernel (:data:`KERNEL_FIXTURES`) over the groups, so every worker collects the
same items; each item's id ends with its group's label, items at a size their group's
devices were not made at are deselected, and the scheduler
(:mod:`pytest_folio.vm.scheduler`) sends each item only to a guest of its group. A worker
runs against its own guest's devices: its ``--folio-mtd``/``--folio-fs`` are replaced by
its group's before the plugin reads them.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_folio.errors import CommandError
from pytest_folio.options import parse_order
from pytest_folio.sizes import parse_block_size
from pytest_folio.vm.apt import DEBIAN_PREFIX, check_suite

MATRIX_ENV = "PYTEST_FOLIO_MATRIX"      # the controller's matrix, as JSON
FILE_SYSTEMS = ("ramfs", "xfs", "ext4")
KEYS = ("kernel", "modules", "fs", "block-sizes", "orders", "patch", "name", "host")
LABEL = re.compile(r"[A-Za-z0-9_.+@]([A-Za-z0-9_.+@-]*[A-Za-z0-9_.+@])?")
# the fixtures whose answers come from a guest's kernel: its devices (the targets, made
# at the group's orders and block sizes) and what a test mounts or loads there itself
TARGET_FIXTURES = {"mtd_device": "orders", "filesystem": "block_sizes"}
KERNEL_FIXTURES = (*TARGET_FIXTURES, "kernel_ramfs", "kernel_mtd")


HOST_KEYS = ("ssh", "python", "ssh_config", "cache")


@dataclasses.dataclass(frozen=True)
class HostSpec:
    """One ``--host ssh=HOST//python=PY``: a machine that boots the guests placed on it
    (``host=HOST`` in their SPEC) with ``python -m pytest_folio.vm.agent``, its own
    kernel cache (``cache=DIR``, else that machine's default)."""

    ssh: str
    python: str = "python3"
    ssh_config: str | None = None
    cache: str | None = None


def parse_host_spec(text: str) -> HostSpec:
    """``ssh=HOST//python=PY//ssh_config=FILE//cache=DIR`` (xdist's gateway syntax);
    ValueError of one line."""
    given: dict[str, str] = {}
    for part in text.split("//"):
        key, eq, value = part.partition("=")
        if not eq or not value.strip():
            raise ValueError(f"{part!r} is not key=value (keys: {', '.join(HOST_KEYS)})")
        if key not in HOST_KEYS:
            raise ValueError(f"unknown key {key!r} (keys: {', '.join(HOST_KEYS)})")
        if key in given:
            raise ValueError(f"{key} given twice")
        given[key] = value.strip()
    if "ssh" not in given:
        raise ValueError("needs ssh=HOST (e.g. ssh=lab1//python=/usr/bin/python3)")
    if given["ssh"].startswith("-"):
        raise ValueError(f"ssh={given['ssh']}: not a host name")
    return HostSpec(**given)


def check_host_specs(texts: Iterable[str]) -> tuple[HostSpec, ...]:
    """Every ``--host``, each machine once; CommandError of one line."""
    hosts: list[HostSpec] = []
    for text in texts:
        try:
            host = parse_host_spec(text)
        except ValueError as exc:
            raise CommandError(f"--host {text}: {exc}") from None
        if any(h.ssh == host.ssh for h in hosts):
            raise CommandError(f"--host {text}: ssh={host.ssh} given twice")
        hosts.append(host)
    return tuple(hosts)


@dataclasses.dataclass(frozen=True)
class GuestSpec:
    """One ``--guest SPEC``: None fields take the run's (``--kernel``, ``--fs``, the
    pytest arguments' orders and block sizes)."""

    kernel: Path | None = None
    suite: str | None = None            # kernel=debian:SUITE
    modules: Path | None = None
    fs: str | None = None
    block_sizes: tuple[int, ...] | None = None
    orders: tuple[int, ...] | None = None
    name: str | None = None
    host: str | None = None             # --host ssh=HOST's HOST; None: this machine
    # patch=A+B: applied in order to the kernel's source, the modules they change built
    # out of tree and loaded instead of the stock ones (as --patch does for one guest)
    patches: tuple[Path, ...] = ()
    text: str = dataclasses.field(default="", compare=False)   # as given (for a --host)


def _list(key: str, text: str, parse: Any) -> tuple[int, ...]:
    values = []
    for part in text.split("+"):
        try:
            value = parse(part.strip())
        except ValueError as exc:
            raise ValueError(f"{key}={text}: {exc}") from None
        if value in values:
            raise ValueError(f"{key}={text}: {part.strip()} twice")
        values.append(value)
    return tuple(values)


def parse_guest_spec(text: str) -> GuestSpec:
    """A SPEC as :class:`GuestSpec`; ValueError of one line saying what is wrong."""
    if not text.strip():
        raise ValueError("empty (e.g. kernel=debian:sid,fs=xfs,block-sizes=4k+64k)")
    given: dict[str, str] = {}
    for pair in text.split(","):
        key, eq, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value:
            raise ValueError(f"{pair.strip()!r} is not key=value (keys: {', '.join(KEYS)})")
        if key not in KEYS:
            raise ValueError(f"unknown key {key!r} (keys: {', '.join(KEYS)})")
        if key in given:
            raise ValueError(f"{key} given twice")
        given[key] = value
    kernel = suite = None
    if "kernel" in given:
        if given["kernel"].startswith(DEBIAN_PREFIX):
            suite = check_suite(given["kernel"][len(DEBIAN_PREFIX):])
        else:
            kernel = Path(given["kernel"])
    if "modules" in given and kernel is None:
        raise ValueError("modules= goes with kernel=IMAGE (a Debian kernel brings its own)")
    fs = given.get("fs")
    if fs is not None and fs not in FILE_SYSTEMS:
        raise ValueError(f"fs={fs}: not one of {', '.join(FILE_SYSTEMS)}")
    name = given.get("name")
    if name is not None and not LABEL.fullmatch(name):
        raise ValueError(f"name={name}: letters, digits and _.+@- only (it goes into "
                         "test ids)")
    return GuestSpec(
        kernel=kernel, suite=suite,
        modules=Path(given["modules"]) if "modules" in given else None, fs=fs,
        block_sizes=(_list("block-sizes", given["block-sizes"], parse_block_size)
                     if "block-sizes" in given else None),
        orders=_list("orders", given["orders"], parse_order) if "orders" in given else None,
        patches=_patches(given["patch"]) if "patch" in given else (),
        name=name, host=given.get("host"), text=text)


def _patches(text: str) -> tuple[Path, ...]:
    """``patch=a.patch+b.patch``: the files, in order (each once)."""
    paths = [Path(part.strip()) for part in text.split("+")]
    if any(not str(p).strip() or str(p) == "." for p in paths):
        raise ValueError(f"patch={text}: an empty file name")
    if len(set(paths)) != len(paths):
        raise ValueError(f"patch={text}: a patch given twice")
    return tuple(paths)


def check_guest_specs(texts: Iterable[str], hosts: Iterable[str]) -> tuple[GuestSpec, ...]:
    """Every ``--guest`` parsed, each placed on this machine or a ``--host``; a mistake
    is one CommandError line naming the SPEC."""
    names = set(hosts)
    specs = []
    for text in texts:
        try:
            spec = parse_guest_spec(text)
        except ValueError as exc:
            raise CommandError(f"--guest {text}: {exc}") from None
        if spec.host is not None and spec.host not in names:
            raise CommandError(f"--guest {text}: host={spec.host} is not a --host "
                               f"({', '.join(sorted(names)) or 'none given'})")
        specs.append(spec)
    return tuple(specs)


def spread_guests(count: int, hosts: tuple[HostSpec, ...]) -> tuple[GuestSpec, ...]:
    """``--guests N`` with ``--host``: N guests of the run's kernel, placed on one
    machine after another, the ``--host`` machines first, then this one (so every host
    gets one when N is at least their number); a matrix of alike guests."""
    places = [*(h.ssh for h in hosts), None]
    return tuple(GuestSpec(host=place, text=f"host={place}" if place else "")
                 for place in itertools.islice(itertools.cycle(places), count))


@dataclasses.dataclass(frozen=True)
class GuestParam:
    """An item's parameter naming the group of guests it runs on; ``label`` is the
    item id's part."""

    label: str
    kernel: str
    fs: str


@dataclasses.dataclass(frozen=True)
class Group:
    """Guests alike: one kernel, file system and set of devices; their items' label."""

    label: str
    kernel: str                 # the kernel's release
    fs: str
    orders: tuple[int, ...]
    block_sizes: tuple[int, ...]
    mtd: str                    # the --folio-mtd size map in these guests
    fs_map: str                 # the --folio-fs size map in these guests
    patch: str = ""             # what their modules were built with ("" : stock)

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Group:
        """From :func:`dataclasses.asdict`'s dict, through JSON (lists for tuples)."""
        return cls(**{**data, "orders": tuple(data["orders"]),
                      "block_sizes": tuple(data["block_sizes"])})


def default_label(release: str, fs: str, patches: Iterable[Path] = ()) -> str:
    """``xfs@6.1.0-57-amd64``: the file system on the kernel; with patches, their names
    after a ``+`` each (``xfs@6.1.0-57-amd64+block2mtd-folio``), so a patched guest of a
    kernel is a group, and a target, of its own beside the stock one."""
    return "".join([f"{fs}@{release}", *(
        "+" + re.sub(r"[^A-Za-z0-9_.-]", "_", p.name.removesuffix(".patch").removesuffix(
            ".diff")) for p in patches)])


@dataclasses.dataclass(frozen=True)
class Matrix:
    """The groups and which guest (xdist worker id) belongs to which."""

    groups: tuple[Group, ...]
    guests: dict[str, str]      # guest name -> group label

    def group(self, label: str) -> Group:
        return next(g for g in self.groups if g.label == label)

    def of_guest(self, name: str) -> Group | None:
        label = self.guests.get(name)
        return None if label is None else self.group(label)

    def to_json(self) -> str:
        return json.dumps({"groups": [dataclasses.asdict(g) for g in self.groups],
                           "guests": self.guests})

    @classmethod
    def from_json(cls, text: str) -> Matrix:
        data = json.loads(text)
        groups = tuple(Group.from_data(g) for g in data["groups"])
        return cls(groups, dict(data["guests"]))

    @classmethod
    def of(cls, guests: dict[str, Group]) -> Matrix:
        """The matrix of these guests; two groups of one label that differ are refused
        (their items would share ids): VMError-worthy, so ValueError of one line."""
        groups: dict[str, Group] = {}
        for name, group in guests.items():
            known = groups.setdefault(group.label, group)
            if known != group:
                other = next(n for n, g in guests.items() if g.label == group.label)
                raise ValueError(f"guests {other} and {name} are both {group.label} but "
                                 "differ in orders, block sizes or patches: give one of them a "
                                 "name= of its own")
        return cls(tuple(groups.values()), {n: g.label for n, g in guests.items()})

    def labels_longest_first(self) -> list[str]:
        return sorted((g.label for g in self.groups), key=len, reverse=True)

    def label_of(self, nodeid: str) -> str | None:
        """The group an item id names (its last parameter id), None: any guest."""
        if not nodeid.endswith("]"):
            return None
        for label in self.labels_longest_first():
            if nodeid.endswith((f"-{label}]", f"[{label}]")):
                return label
        return None
