"""``--folio-mtd``: turn the user's spec into MTD devices for the suites.

``reference[:api=folio|page,retry=on|off]`` is the bundled block2mtd at the test's folio
order; a path is a real ``/dev/mtdN``; ``package.module:factory`` and entry-point names
are the user's own devices. The spec is resolved once per run (bad input raises
:class:`~.spec.TargetError`, which the plugin turns into a usage error); every test then
opens a fresh device from the resolved :class:`MTDTarget`.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

from pytest_folio.constants import PAGE_SIZE
from pytest_folio.sizes import format_size
from pytest_folio.targets.mtdchar import open_mtd_char
from pytest_folio.targets.protocols import MTDDevice
from pytest_folio.targets.spec import (
    TargetError,
    TargetSpec,
    parse_size_map,
    parse_target_spec,
)

OPTION = "--folio-mtd"

# knob -> accepted values; the first is the default.
REFERENCE_KNOBS: dict[str, tuple[str, ...]] = {
    "api": ("folio", "page"),
    "retry": ("on", "off"),
}


def _valid_knobs() -> str:
    return ", ".join(f"{k}={'|'.join(v)}" for k, v in REFERENCE_KNOBS.items())


def check_reference_knobs(knobs: dict[str, str], option: str = OPTION) -> dict[str, str]:
    """Every knob known and every value allowed; returns all knobs with defaults filled."""
    for knob, value in knobs.items():
        if knob not in REFERENCE_KNOBS:
            raise TargetError(f"{option}: unknown knob {knob!r} for the reference device; "
                              f"valid knobs: {_valid_knobs()}")
        if value not in REFERENCE_KNOBS[knob]:
            raise TargetError(f"{option}: {knob}={value!r} is not one of "
                              f"{'|'.join(REFERENCE_KNOBS[knob])}")
    return {knob: knobs.get(knob, values[0]) for knob, values in REFERENCE_KNOBS.items()}


@dataclasses.dataclass(frozen=True)
class MTDTarget:
    """A resolved ``--folio-mtd``: what to open for each test, and how to name it."""

    spec: TargetSpec
    knobs: dict[str, str] = dataclasses.field(default_factory=dict)
    # ``4K=/dev/mtd0,16K=/dev/mtd1``: a real device per folio order (the VM's block2mtd
    # on disks of those logical block sizes); empty for a single device
    devices: dict[int, Path] = dataclasses.field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def label(self) -> str:
        """The target as reports and saved timings name it (knobs spelled out)."""
        if self.kind == "reference":
            return "reference:" + ",".join(f"{k}={v}" for k, v in self.knobs.items())
        return self.spec.text

    def open(self, *, size: int, erasesize: int, folio_order: int,
             allow_destructive: bool = False, readonly: bool = False) -> MTDDevice:
        """A fresh device for one test; the caller closes it.

        ``readonly=True`` asks for a device without MTD_WRITEABLE: the reference makes one
        on a read-only block device, a factory is called with ``readonly=True`` (one that
        does not take it raises NotImplementedError here), a real device has its own.
        """
        if self.kind == "reference":
            from pytest_folio.model.block2mtd import make_reference_block2mtd

            try:
                return make_reference_block2mtd(
                    size=size, erasesize=erasesize, folio_order=folio_order,
                    api=self.knobs["api"], retry=self.knobs["retry"] == "on",
                    read_only=readonly)
            except ValueError as exc:  # a geometry this folio size cannot have
                raise TargetError(f"{OPTION} {self.label} at "
                                  f"{format_size(PAGE_SIZE << folio_order)} folios: "
                                  f"{exc}") from None
        if self.kind == "path":
            path = self.spec.path if not self.devices else self.devices.get(folio_order)
            if path is None:
                raise TargetError(f"{OPTION} {self.label}: no device at "
                                  f"{format_size(PAGE_SIZE << folio_order)} folios")
            return open_mtd_char(path, allow_destructive=allow_destructive, exclusive=True)
        assert self.spec.factory is not None
        extra = {"readonly": True} if readonly else {}
        return call_factory(self.spec.factory, self.spec.text, size=size,
                            erasesize=erasesize, folio_order=folio_order, **extra)


def call_factory(factory: Any, name: str, **kwargs: Any) -> MTDDevice:
    """Call the user's factory with the keyword arguments it accepts (all of them when it
    takes ``**kwargs``), and check that it returned something shaped like an MTDDevice.
    ``readonly``, when given, must be accepted: NotImplementedError otherwise."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: pass everything
        params = None
    if params is not None and not any(p.kind is p.VAR_KEYWORD for p in params):
        accepted = {p.name for p in params}
        if "readonly" in kwargs and "readonly" not in accepted:
            raise NotImplementedError(f"{name} takes no readonly= argument")
        kwargs = {k: v for k, v in kwargs.items() if k in accepted}
    device = factory(**kwargs)
    if not isinstance(device, MTDDevice):
        missing = [attr for attr in ("name", "type", "flags", "size", "erasesize", "writesize",
                                     "oobsize", "read", "write", "erase", "sync", "close")
                   if not hasattr(device, attr)]
        raise TargetError(f"{OPTION}: {name} returned {type(device).__name__}, not an MTD "
                          f"device (missing: {', '.join(missing)})")
    return device


def resolve_mtd_target(text: str, option: str = OPTION) -> MTDTarget:
    """Parse and check ``--folio-mtd`` once per run (``option`` names where the text came
    from in messages: the option, or its ini key).

    A real device is opened (read-only) and closed here, so a wrong path, a device in use
    or a missing driver stop the run before any test starts.
    """
    per_size = parse_size_map(text, option)
    if per_size is not None:
        devices = {}
        for folio_size, path in per_size.items():
            if folio_size < PAGE_SIZE or folio_size & (folio_size - 1):
                raise TargetError(f"{option}: {format_size(folio_size)} is not a folio size "
                                  f"(a power of two from {format_size(PAGE_SIZE)})")
            open_mtd_char(path).close()
            devices[(folio_size // PAGE_SIZE).bit_length() - 1] = path
        return MTDTarget(TargetSpec("path", text.strip(), path=devices[min(devices)]),
                         devices=devices)
    spec = parse_target_spec(text, option)
    if spec.kind == "reference":
        return MTDTarget(spec, check_reference_knobs(spec.knobs, option))
    if spec.kind == "path":
        assert spec.path is not None
        open_mtd_char(spec.path).close()
    return MTDTarget(spec)
