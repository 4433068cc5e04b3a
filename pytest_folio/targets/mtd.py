"""``--folio-mtd``: turn the user's spec into MTD devices for the suites.

``reference[:api=folio|page,retry=on|off,torn=prefix|whole|none]`` is the bundled
block2mtd at the test's folio order (``torn``: what a power cut does to the folio under
writeback); a path is a real ``/dev/mtdN`` (a size map, ``4K=/dev/mtd0,16K=/dev/mtd1``, one per
folio size); ``package.module:factory`` and entry-point names are the user's own devices.
The spec is resolved once per run (bad input raises :class:`~.spec.TargetError`, which the
plugin turns into a usage error); every test then opens a fresh device from the resolved
:class:`MTDTarget`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.model.block2mtd import APIS, Block2MTD, make_reference_block2mtd
from pytest_folio.model.blockdev import TORN_WRITEBACK
from pytest_folio.sizes import format_size
from pytest_folio.targets.answers import MTD_RULES, AnswerError, answering, data_answer
from pytest_folio.targets.base import Knob, Target, exception_line
from pytest_folio.targets.mtdchar import open_mtd_char
from pytest_folio.targets.protocols import MTDDevice
from pytest_folio.targets.spec import TargetError, parse_target_spec

__all__ = ["MTDTarget", "oracle_label", "reference_device",
           "resolve_mtd_oracle", "resolve_mtd_target"]

OPTION = "--folio-mtd"
ORACLE_OPTION = "--folio-mtd-oracle"


class MTDTarget(Target[MTDDevice]):
    """A resolved ``--folio-mtd``: what to open for each test, and how to name it."""

    option = OPTION
    protocol = MTDDevice
    capability_kind = "mtd"
    what = "an MTD device"
    reference = "device"
    path_noun = "device"
    size_name = "folios"
    factory_keywords = ("size", "erasesize", "folio_order", "readonly")
    KNOBS: ClassVar[tuple[Knob, ...]] = (
        Knob("api", APIS, APIS[0]),
        Knob("retry", ("on", "off"), "on", parse=lambda value: value == "on"),
        Knob("torn", TORN_WRITEBACK),       # not in labels unless given (model: prefix)
    )

    @contextmanager
    def open(self, *, size: int, erasesize: int, folio_order: int,
             allow_destructive: bool = False, readonly: bool = False) -> Iterator[MTDDevice]:
        """A fresh device for one test, closed afterwards (a reference device also gives
        its memory back then, not at the next cycle collection).

        ``readonly=True`` asks for a device without MTD_WRITEABLE: the reference makes one
        on a read-only block device, a factory is called with ``readonly=True`` (one that
        does not take it raises NotImplementedError here), a real device has its own.
        """
        folio = PAGE_SIZE << folio_order
        if self.kind == "reference":
            try:
                ref = make_reference_block2mtd(size=size, erasesize=erasesize,
                                               folio_order=folio_order, read_only=readonly,
                                               **self.options)
            except ValueError as exc:  # a geometry this folio size cannot have
                raise TargetError(f"{OPTION} {self.label} at {format_size(folio)} folios: "
                                  f"{exc}") from None
            try:
                yield ref
            finally:
                ref.close()
                ref.bdev.release()
            return
        if self.kind == "path":
            device: MTDDevice = open_mtd_char(self.path_at(folio),
                                              allow_destructive=allow_destructive,
                                              exclusive=True)
        else:
            extra = {"readonly": True} if readonly else {}
            device = answering(self.call_factory(size=size, erasesize=erasesize,
                                                 folio_order=folio_order, **extra),
                               MTD_RULES)
        try:
            yield device
        finally:
            device.close()

    @classmethod
    def check_made(cls, made: Any) -> str | None:
        """A device's geometry as integers that fit together (as mtd_info's) and its name
        a string (at every open: reading nothing, so a cache is left as it was)."""
        return check_mtd_geometry(made)

    @classmethod
    def check_once(cls, made: Any) -> str | None:
        return check_mtd_read(made)

    @classmethod
    def check_path_at(cls, size: int | None, path: Path, option: str) -> None:
        """A real device is opened (read-only) and closed here, so a wrong path, a device
        in use or a missing driver stop the run before any test starts."""
        if size is not None and (size < PAGE_SIZE or size & (size - 1)):
            raise TargetError(f"{option}: {format_size(size)} is not a folio size "
                              f"(a power of two from {format_size(PAGE_SIZE)})")
        open_mtd_char(path).close()


def check_mtd_geometry(dev: Any) -> str | None:
    """What is wrong with an MTD device's attributes, as the end of a sentence
    ("returned a device whose ..."); None when nothing is."""
    if not isinstance(dev.name, str):
        return f"returned a device whose name is {type(dev.name).__name__}, not str"
    for attr in ("type", "flags", "size", "erasesize", "writesize", "oobsize"):
        value = getattr(dev, attr)
        if isinstance(value, bool) or not isinstance(value, int):
            return f"returned a device whose {attr} is {value!r}, not an int"
    if dev.size <= 0 or dev.erasesize <= 0 or dev.writesize <= 0 or dev.oobsize < 0:
        return (f"returned a device of size {dev.size}, erasesize {dev.erasesize}, "
                f"writesize {dev.writesize}, oobsize {dev.oobsize}: size, erasesize and "
                "writesize must be positive, oobsize not negative")
    if dev.size % dev.erasesize or dev.erasesize % dev.writesize:
        return (f"returned a device of size {dev.size} in eraseblocks of {dev.erasesize} "
                f"and pages of {dev.writesize}: the eraseblocks must divide the size, the "
                "pages the eraseblocks")
    return None


def check_mtd_read(dev: Any) -> str | None:
    """What is wrong with what ``read`` answers (by the answer rules of
    :mod:`.answers`: bytes-like, of the length asked), as the end of a sentence; checked
    once a run, on the device the session makes first (a read changes a cache's state,
    which the tests must find as the factory left it)."""
    want = min(max(16, dev.writesize), dev.size)
    try:
        data_answer(dev.read(0, want), f"read(0, {want})", want, exact=True)
    except OSError:
        return None    # an errno is an answer the suites check
    except AnswerError as exc:
        return f"returned a device whose {exc}"
    except Exception as exc:
        return f"returned a device whose read(0, {want}) raised {exception_line(exc)}"
    return None


def resolve_mtd_target(text: str, option: str = OPTION, kind: str | None = None) -> MTDTarget:
    """Parse and check ``--folio-mtd`` once per run."""
    return MTDTarget.resolve(text, option, kind)


def resolve_mtd_oracle(text: str | None, target_kind: str,
                       option: str = ORACLE_OPTION) -> MTDTarget | None:
    """``--folio-mtd-oracle``: the reference (``reference[:knob=value,...]``) or ``none``.
    Not given, it is the reference whenever the target is something else (a user's
    device is checked against the Linux-faithful model by default), else none."""
    if text is None:
        text = "none" if target_kind == "reference" else "reference"
    if text.strip() == "none":
        return None
    if parse_target_spec(text, option).kind != "reference":
        raise TargetError(f"{option}: {text!r}: the MTD oracle is the reference "
                          "(reference[:knob=value,...]) or none")
    return resolve_mtd_target(text, option)


def oracle_label(oracle: MTDTarget | None) -> str:
    """How the header and a replay command name the run's MTD oracle."""
    return "none" if oracle is None else oracle.spec.text


def reference_device(dev: object) -> Block2MTD | None:
    """``dev`` as the reference block2mtd when it is one, else None: the checks that look
    inside its page cache run on it alone."""
    return dev if isinstance(dev, Block2MTD) else None
