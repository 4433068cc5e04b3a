"""Parse a ``--folio-mtd`` / ``--folio-fs`` spec into what it names.

A spec is one of: ``reference`` or ``reference:knob=value,...`` (the bundled model), a
path (a real device or directory), ``package.module:factory`` (the user's own), or a name
registered under the entry-point group ``pytest_folio.targets``. The MTD and file-system
resolvers build on this; bad input raises :class:`TargetError` with a one-line message.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

from pytest_folio.sizes import parse_size

ENTRY_POINT_GROUP = "pytest_folio.targets"

_FACTORY_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_NAME_RE = re.compile(r"^[A-Za-z_][\w.-]*$")
_SIZE_MAP_RE = re.compile(r"^\d+[A-Za-z]*=")


class TargetError(ValueError):
    """A target spec that cannot be used; the message is one line for the user."""


@dataclasses.dataclass(frozen=True)
class TargetSpec:
    """A parsed spec. ``text`` is what the user wrote, for messages and reports."""

    kind: Literal["reference", "path", "factory"]
    text: str
    knobs: dict[str, str] = dataclasses.field(default_factory=dict)
    path: Path | None = None
    factory: Callable[..., Any] | None = None


def parse_knobs(text: str, option: str) -> dict[str, str]:
    """``api=page,retry=off`` -> ``{"api": "page", "retry": "off"}``."""
    knobs: dict[str, str] = {}
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise TargetError(f"{option}: knob {part!r} is not of the form name=value")
        key, value = key.strip(), value.strip()
        if key in knobs:    # the last one would silently win
            raise TargetError(f"{option}: knob {key} is given twice ({knobs[key]!r} and "
                              f"{value!r})")
        knobs[key] = value
    return knobs


def load_factory(text: str, option: str) -> Callable[..., Any]:
    """Import ``package.module:attr`` and check that it is callable."""
    module_name, _, attr = text.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    # an import error of the user's module, whatever it is: sys.exit() on import too
    except (Exception, SystemExit) as exc:
        raise TargetError(f"{option}: cannot import factory {text!r}: {type(exc).__name__}: "
                          f"{exc}{_not_on_path_hint(exc, module_name)}") from None
    if not callable(obj):
        raise TargetError(f"{option}: {text!r} is not callable")
    return obj


def _not_on_path_hint(exc: BaseException, module_name: str) -> str:
    """The hint for a module that sits in the current directory but is not importable
    from there: console ``pytest`` (unlike ``python -m pytest``) does not put the current
    directory on ``sys.path``."""
    top = module_name.split(".")[0]
    if not isinstance(exc, ModuleNotFoundError) or exc.name != top:
        return ""
    here = Path.cwd()
    if not ((here / f"{top}.py").is_file() or (here / top / "__init__.py").is_file()):
        return ""
    return (f" ({top} is in the current directory, which console pytest does not put on "
            "sys.path: run python -m pytest, or set pythonpath = . in the ini file)")


def registered_targets() -> dict[str, Any]:
    """Entry points in the ``pytest_folio.targets`` group, by name."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _exists(text: str) -> bool:
    """Whether ``text`` names an existing path; text no path can be (a NUL byte, a name
    too long) is not one."""
    try:
        return Path(text).exists()
    except (OSError, ValueError):
        return False


def parse_target_spec(text: str, option: str, kind: str | None = None) -> TargetSpec:
    """Classify ``text``; raise TargetError naming the accepted forms when it fits none.

    ``kind``, when given, is the classification already made (by the xdist controller):
    it is taken as it is, so every worker reads the spec the same way even where a path
    the controller saw does not exist.
    """
    text = text.strip()
    head, _, tail = text.partition(":")
    if kind == "reference" or (kind is None and head == "reference"):
        return TargetSpec("reference", text, knobs=parse_knobs(tail, option))
    if kind == "path" or (kind is None and (text.startswith(("/", ".", "~"))
                                            or _exists(text))):
        try:
            path = Path(text).expanduser()
        except RuntimeError as exc:  # ~nosuchuser/x
            raise TargetError(f"{option}: cannot expand {text!r}: {exc}") from None
        return TargetSpec("path", text, path=path)
    if _FACTORY_RE.match(text):
        return TargetSpec("factory", text, factory=load_factory(text, option))
    registered = registered_targets()
    if _NAME_RE.match(text) and text in registered:
        try:
            factory = registered[text].load()
        except Exception as exc:
            raise TargetError(
                f"{option}: cannot load registered target {text!r}: "
                f"{type(exc).__name__}: {exc}") from None
        return TargetSpec("factory", text, factory=factory)
    names = ", ".join(sorted(registered)) or "none registered"
    raise TargetError(
        f"{option}: unknown target {text!r}: expected reference[:knob=value,...], a path, "
        f"package.module:factory, or an entry-point name ({names})")


def parse_size_map(text: str, option: str) -> dict[int, Path] | None:
    """``4K=/dev/mtd0,16K=/dev/mtd1``: one real device or directory per size (a folio size
    for ``--folio-mtd``, a block size for ``--folio-fs``), as ``python -m pytest_folio vm``
    passes its per-size kernel devices; None when ``text`` is not of this form."""
    if not _SIZE_MAP_RE.match(text.strip()):
        return None
    paths: dict[int, Path] = {}
    for part in filter(None, text.strip().split(",")):
        size, sep, path = part.partition("=")
        try:
            value = parse_size(size.strip())
        except ValueError as exc:
            raise TargetError(f"{option}: {part!r}: {exc}") from None
        if not sep or not path.strip().startswith("/"):
            raise TargetError(f"{option}: {part!r} is not of the form SIZE=/absolute/path")
        if value in paths:
            raise TargetError(f"{option}: size {size.strip()} given twice")
        paths[value] = Path(path.strip())
    return paths
