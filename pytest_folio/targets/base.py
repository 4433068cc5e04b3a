"""The one shape of a target: what ``--folio-mtd`` and ``--folio-fs`` resolve to.

Every target has a ``kind`` (``reference``, ``path`` or ``factory``), a ``label`` (how
reports and saved runs name it), the reference's knobs checked against one kind of table
(:class:`Knob`), a real device or directory per size when the spec is a size map
(``4K=/dev/mtd0,16K=/dev/mtd1``), and one way to call a user's factory: with the keyword
arguments it takes, its result checked against the target's protocol. Each kind of
target adds ``open(...)``: a context manager that hands out a fresh device or file system
for one test parameter and tears it down afterwards.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Generic, Self, TypeVar

from pytest_folio.sizes import format_size
from pytest_folio.targets.capabilities import signature_problem
from pytest_folio.targets.protocols import missing_members
from pytest_folio.targets.spec import TargetError, TargetSpec, parse_size_map, parse_target_spec

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Knob:
    """One knob of a reference target (``reference:api=page``): the values it takes (or a
    parser of any value, raising ValueError), its default, and what the target makes of
    the text (``parse``)."""

    name: str
    choices: tuple[str, ...] = ()
    default: str | None = None      # None: not set unless given (the model's own default)
    parse: Callable[[str], Any] = str
    metavar: str = "VALUE"          # how the usage line names a value without choices

    def usage(self) -> str:
        return f"{self.name}={'|'.join(self.choices) or self.metavar}"

    def value(self, text: str, option: str) -> Any:
        if self.choices and text not in self.choices:
            raise TargetError(f"{option}: {self.name}={text!r} is not one of "
                              f"{'|'.join(self.choices)}")
        try:
            return self.parse(text)
        except ValueError as exc:
            raise TargetError(f"{option}: {self.name}={text!r}: {exc}") from None


def check_knobs(table: tuple[Knob, ...], given: dict[str, str], option: str,
                what: str) -> tuple[dict[str, str], dict[str, Any]]:
    """Every knob known and every value allowed. Returns the knobs as text and as the
    model takes them, defaults filled in, in the table's order (``what`` names the
    reference in messages)."""
    known = {knob.name: knob for knob in table}
    for name in given:
        if name not in known:
            raise TargetError(f"{option}: unknown knob {name!r} for the reference {what}; "
                              f"valid knobs: {', '.join(k.usage() for k in table)}")
    text = {knob.name: given.get(knob.name, knob.default or "") for knob in table
            if knob.name in given or knob.default is not None}
    return text, {name: known[name].value(value, option) for name, value in text.items()}


def _signature_problem(params: list[inspect.Parameter], given: dict[str, Any],
                       keywords: tuple[str, ...]) -> str | None:
    """What in the factory's signature the plugin's call (with ``given``) cannot satisfy,
    or None; ``keywords`` are all the plugin ever passes, for the message."""
    needed = [p.name for p in params if p.default is p.empty
              and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
              and (p.kind is p.POSITIONAL_ONLY or p.name not in given)]
    if needed:
        return (f"needs {', '.join(needed)}, which the plugin does not pass: it calls the "
                f"factory with the keywords {', '.join(keywords)} (those it takes, or all "
                "of them to **kwargs)")
    return None


def exception_line(exc: BaseException) -> str:
    """``TypeError: message`` on one line (the message's first line), for messages that
    must stay one line."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _made_problem(made: Any, protocol: type, what: str,
                  check: Callable[[Any], str | None] | None) -> str | None:
    """What is wrong with a factory's result: not a ``protocol``, or what ``check``
    finds; None when nothing is."""
    if not isinstance(made, protocol):
        return (f"returned {type(made).__name__}, not {what} (missing: "
                f"{', '.join(missing_members(made, protocol))})")
    return None if check is None else check(made)


def call_factory(factory: Callable[..., Any], name: str, protocol: type, what: str,
                 option: str, check: Callable[[Any], str | None] | None = None,
                 keywords: tuple[str, ...] = (), **kwargs: Any) -> Any:
    """Call the user's factory with the keyword arguments it accepts (all of them when it
    takes ``**kwargs``), and check that it returned a ``protocol`` (and, with ``check``,
    whatever else ``check`` finds wrong). ``readonly``, when given, must be accepted:
    NotImplementedError otherwise, and what the factory raises for it is raised as it is.

    Every other problem is one :class:`TargetError` line naming the factory: a signature
    the call cannot satisfy, an exception from the factory, a result that is not a
    ``protocol`` or fails ``check``. ``keywords``: every keyword the plugin may pass (the
    message of a signature it cannot call says them)."""
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: pass everything
        params = None
    passed = dict(kwargs)
    if params is not None and not any(p.kind is p.VAR_KEYWORD for p in params):
        accepted = {p.name for p in params if p.kind is not p.POSITIONAL_ONLY}
        if "readonly" in kwargs and "readonly" not in accepted:
            raise NotImplementedError(f"{name} takes no readonly= argument")
        kwargs = {k: v for k, v in kwargs.items() if k in accepted}
        problem = _signature_problem(params, kwargs, keywords or tuple(passed))
        if problem is not None:
            raise TargetError(f"{option}: factory {name} {problem}")
    try:
        made = factory(**kwargs)
    except (Exception, SystemExit) as exc:   # SystemExit: sys.exit() in a factory
        if kwargs.get("readonly") and isinstance(exc, (TypeError, NotImplementedError)):
            raise
        call = ", ".join(f"{k}={v!r}" for k, v in passed.items())
        raise TargetError(f"{option}: factory {name}({call}) raised "
                          f"{exception_line(exc)}") from None
    try:
        problem = _made_problem(made, protocol, what, check)
    except Exception as exc:      # a member that raises when read (a property)
        problem = (f"returned {type(made).__name__}, whose members raise when read: "
                   f"{exception_line(exc)}")
    if problem is not None:
        with contextlib.suppress(Exception):   # one that is a protocol's gives it back
            if isinstance(made, protocol):
                made.close()  # type: ignore[attr-defined]
        raise TargetError(f"{option}: factory {name} {problem}")
    return made


@dataclasses.dataclass(frozen=True)
class Target(abc.ABC, Generic[T]):
    """A resolved target spec; subclasses say what it opens and how."""

    spec: TargetSpec
    # the reference's knobs as text, defaults filled in (what the label spells out), and
    # as the model takes them
    knobs: dict[str, str] = dataclasses.field(default_factory=dict)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    # a real device or directory per size (a folio size, or a block size), from a size
    # map such as the VM's ``4K=/dev/mtd0,16K=/dev/mtd1``; empty for a single one
    paths: dict[int, Path] = dataclasses.field(default_factory=dict)

    option: ClassVar[str]                  # the option it comes from, for messages
    protocol: ClassVar[type]               # what open() hands out
    capability_kind: ClassVar[str]         # "mtd" or "fs": its optional calls' kind
    what: ClassVar[str]                    # "an MTD device", in messages
    reference: ClassVar[str]               # "device": "the reference device"
    path_noun: ClassVar[str]               # "device": what a path names
    size_name: ClassVar[str]               # "folios": what a size map's sizes are
    factory_keywords: ClassVar[tuple[str, ...]]   # what a factory may be called with
    KNOBS: ClassVar[tuple[Knob, ...]] = ()

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def label(self) -> str:
        """How reports and saved timings name the target (a reference's knobs spelled
        out, defaults included, so runs with and without them compare)."""
        if self.kind == "reference" and self.knobs:
            return "reference:" + ",".join(f"{k}={v}" for k, v in self.knobs.items())
        return self.spec.text

    @property
    def per_size(self) -> bool:
        """Whether it opens at each test parameter: everything but a single real device or
        directory (which has its own geometry)."""
        return self.kind != "path" or bool(self.paths)

    def path_at(self, size: int | None) -> Path:
        """The real device or directory for ``size`` (the one path of a plain spec)."""
        if not self.paths or size is None:
            assert self.spec.path is not None
            return self.spec.path
        path = self.paths.get(size)
        if path is None:
            raise TargetError(f"{self.option} {self.label}: no {self.path_noun} at "
                              f"{format_size(size)} {self.size_name}")
        return path

    def call_factory(self, **kwargs: Any) -> T:
        """The user's factory called the one way (see :func:`call_factory`), its result
        checked by :meth:`check_made`."""
        assert self.spec.factory is not None
        made: T = call_factory(self.spec.factory, self.spec.text, self.protocol, self.what,
                               self.option, self.check_made, self.factory_keywords,
                               **kwargs)
        return made

    @classmethod
    def check_made(cls, made: Any) -> str | None:
        """What is wrong with what a factory returned beyond missing members (attribute
        types, geometry, what a call returns), as the end of a sentence; None when fine."""
        return None

    @classmethod
    def check_once(cls, made: Any) -> str | None:
        """What is wrong with a factory's target that only a call can show (what a read
        answers), as the end of a sentence; checked once a run, on the first target made
        (a call may change a cache's state, which the tests must find as the factory
        left it)."""
        return None

    def check_first(self, made: Any) -> None:
        """The checks of the first target a factory makes, before any test, as the
        plugin and ``python -m pytest_folio check`` both make them (its calls' signatures,
        then :meth:`check_once`): TargetError of one line naming the factory."""
        if self.kind != "factory":
            return
        try:
            problem = signature_problem(made, self.capability_kind) or self.check_once(made)
        except Exception as exc:
            problem = (f"returned {type(made).__name__}, whose check raised "
                       f"{exception_line(exc)}")
        if problem is not None:
            raise TargetError(f"{self.option}: factory {self.spec.text} {problem}")

    @classmethod
    def resolve(cls, text: str, option: str | None = None, kind: str | None = None) -> Self:
        """Parse and check a spec once per run (``option`` names where the text came from
        in messages: the option, or its ini key); TargetError on bad input.

        ``kind`` is the controller's classification, handed to an xdist worker: the
        worker takes it as decided and does not probe the paths again.
        """
        option = option or cls.option
        per_size = parse_size_map(text, option)
        if per_size is not None:
            for size, path in per_size.items():
                if kind is None:
                    cls.check_path_at(size, path, option)
            return cls(TargetSpec("path", text.strip(), path=per_size[min(per_size)]),
                       paths=per_size)
        spec = parse_target_spec(text, option, kind)
        if spec.kind == "reference":
            knobs, options = check_knobs(cls.KNOBS, spec.knobs, option, cls.reference)
            return cls(spec, knobs, options)
        if spec.kind == "path" and kind is None:
            assert spec.path is not None
            cls.check_path_at(None, spec.path, option)
        return cls(spec)

    @classmethod
    @abc.abstractmethod
    def check_path_at(cls, size: int | None, path: Path, option: str) -> None:
        """Stop the run now when ``path`` (for ``size`` of a size map) cannot be used;
        each target kind says what it needs of a path."""
