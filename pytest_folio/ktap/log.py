"""KTAP (the kernel's Test Anything Protocol, version 1) read into a tree of results.

The kernel's own tests print their results as KTAP: KUnit suites (nested by indentation,
often with a ``# Subtest: NAME`` line), kselftests (``TAP version 13``; the kselftest
runner prefixes each test's own output with ``# ``, which nests it a second time), and
CI logs where every line carries a console timestamp (``[   12.345678] ok 1 ...``). This
module turns such a log into :class:`KtapTest` trees that keep the nesting, each test's
diagnostic lines, its directive (SKIP, TODO, XFAIL, TIMEOUT, ERROR) and, when the lines
carry timestamps, its duration.

Nothing in a log is trusted: a plan that does not match, numbers that skip, a bail-out,
or output that ends before a test's result line (the test crashed the kernel) become
:attr:`KtapTest.problems`, never exceptions. Only input with no KTAP at all, or input too
large to read, raises :class:`KtapError` (one line).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from pytest_folio.inputs import excerpt, printable, read_limited

# The directives KTAP names; any other word after "#" is diagnostic data.
DIRECTIVES = ("SKIP", "TODO", "XFAIL", "TIMEOUT", "ERROR")
MAX_LOG_BYTES = 64 << 20            # a whole kernel console log fits many times over
MAX_LINE_CHARS = 4096               # longer lines are cut (a test printing a blob)

_TIMESTAMP = re.compile(r"^\s*\[\s*(\d+\.\d+)\]\s?")          # printk's "[   12.345678] "
_LOGLEVEL = re.compile(r"^<\d>")                               # "<6>" from /dev/kmsg readers
_VERSION = re.compile(r"^(?:KTAP version \d+|TAP version \d+)\s*$")
_PLAN = re.compile(r"^1\.\.(\d+)(?:\s*#\s*(.*))?\s*$")
_RESULT = re.compile(r"^(not ok|ok)(?:\s+(\d+))?(?:\s+-)?(?:\s+(.*?))?\s*$")
_SUBTEST = re.compile(r"^#\s*Subtest:\s*(.*?)\s*$")
_BAILOUT = re.compile(r"^Bail out!\s*(.*?)\s*$")


class KtapError(ValueError):
    """Input that holds no KTAP at all, or too much to read: one line for the user."""


@dataclasses.dataclass
class KtapTest:
    """One KTAP test: its result line, the diagnostics before it, and its subtests."""

    name: str
    number: int | None
    ok: bool | None                  # None: the output ended before its result line
    directive: str = ""              # one of DIRECTIVES, or "" (plain ok / not ok)
    reason: str = ""                 # the directive's or result line's diagnostic data
    diagnostics: list[str] = dataclasses.field(default_factory=list)
    subtests: list[KtapTest] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    duration: float | None = None    # seconds, from console timestamps
    line: int = 0                    # the result line's number in the log (1-based)

    @property
    def outcome(self) -> str:
        """``passed``, ``failed``, ``skipped`` or ``xfailed``, as pytest reports them."""
        if self.directive == "SKIP":
            return "skipped"
        if self.ok is None:
            return "failed"
        if self.directive in ("TODO", "XFAIL"):
            return "passed" if self.ok else "xfailed"
        return "passed" if self.ok else "failed"

    def walk(self) -> Iterable[KtapTest]:
        """This test and every test below it, depth first."""
        yield self
        for sub in self.subtests:
            yield from sub.walk()


@dataclasses.dataclass
class _Line:
    number: int
    text: str                        # timestamp and log level removed, trailing space kept out
    stamp: float | None


@dataclasses.dataclass
class _Group:
    """The tests at one nesting level, with the prefix that marks its lines."""

    prefix: str
    tests: list[KtapTest] = dataclasses.field(default_factory=list)
    plan: int | None = None
    bailout: str | None = None
    pending: list[str] = dataclasses.field(default_factory=list)   # for the next test
    owner_diagnostics: list[str] = dataclasses.field(default_factory=list)
    name: str = ""                   # from "# Subtest: NAME"
    start: float | None = None       # timestamp of the first line after the last result
    opened_at: int = 0
    numbering: list[str] = dataclasses.field(default_factory=list)


def _lines(text: str) -> list[_Line]:
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        # control characters escaped: names and diagnostics reach the terminal
        raw = printable(raw[:MAX_LINE_CHARS].rstrip().replace("\t", "    "), keep="")
        stamp = None
        m = _TIMESTAMP.match(raw)
        if m:
            stamp, raw = float(m.group(1)), raw[m.end():]
        raw = _LOGLEVEL.sub("", raw)
        out.append(_Line(number, raw, stamp))
    return out


def _split_prefix(text: str) -> tuple[str, str]:
    """``text``'s leading spaces and the rest."""
    body = text.lstrip(" ")
    return text[:len(text) - len(body)], body


def _result(body: str, line: _Line) -> KtapTest | None:
    m = _RESULT.match(body)
    if not m:
        return None
    rest = m.group(3) or ""
    description, hashed, data = rest.partition("#")
    if not hashed and rest.startswith("#"):
        description, data = "", rest[1:]
    directive, reason = "", data.strip()
    word, _, more = reason.partition(" ")
    if word.upper() in DIRECTIVES:
        directive, reason = word.upper(), more.strip()
    number = int(m.group(2)) if m.group(2) else None
    return KtapTest(name=description.strip(), number=number, ok=m.group(1) == "ok",
                    directive=directive, reason=reason, line=line.number)


class _Parser:
    def __init__(self) -> None:
        self.top: list[KtapTest] = []
        self.stack: list[_Group] = []
        self.found = False

    # -- groups ------------------------------------------------------------------------

    def _open(self, prefix: str, line: _Line) -> None:
        group = _Group(prefix=prefix, start=line.stamp, opened_at=line.number)
        if self.stack:
            group.owner_diagnostics, self.stack[-1].pending = self.stack[-1].pending, []
        self.stack.append(group)

    def _close(self, owner: KtapTest | None, line: _Line) -> None:
        """Pop the deepest group and hand its tests to ``owner``, the result line that
        ends it (or, when the output never printed one, a failed test standing in)."""
        group = self.stack.pop()
        if owner is None:
            owner = KtapTest(name=group.name or "(unfinished)", number=None, ok=None,
                             line=group.opened_at)
            owner.problems.append("the output ends before this test's result line "
                                  "(the test or the kernel crashed, or the log is cut)")
        owner.subtests.extend(group.tests)
        owner.diagnostics = group.owner_diagnostics + group.pending + owner.diagnostics
        owner.name = owner.name or group.name
        owner.problems.extend(_plan_problems(group, "subtests"))
        self._add(self.stack[-1], owner, line)

    def _add(self, group: _Group, test: KtapTest, line: _Line) -> None:
        expected = len(group.tests) + 1
        if test.number is None:
            test.number = expected
        elif test.number != expected:
            group.numbering.append(f"test number {test.number} where {expected} was due "
                                   f"(line {line.number})")
        test.diagnostics = group.pending + test.diagnostics
        group.pending = []
        if group.start is not None and line.stamp is not None:
            test.duration = max(0.0, line.stamp - group.start)
        group.tests.append(test)
        group.start = line.stamp

    def _finish_document(self) -> None:
        end = _Line(0, "", None)
        while len(self.stack) > 1:
            self._close(None, end)
        if self.stack:
            top = self.stack.pop()
            self.top.extend(top.tests)
            problems = _plan_problems(top, "tests")
            if problems or not top.tests:
                # a failed plan, or one that ran nothing ("1..0 # SKIP why"): an item
                # for it, so that the log's verdict is not lost
                diagnostics = top.owner_diagnostics + top.pending
                skip = next((d for d in diagnostics if d.upper().startswith("SKIP")), None)
                self.top.append(KtapTest(
                    name="(plan)", number=None, ok=not problems,
                    directive="SKIP" if not problems else "",
                    reason=(skip[4:].strip() if skip else "") or "the log ran no test",
                    diagnostics=diagnostics, problems=problems, line=top.opened_at))

    # -- lines -------------------------------------------------------------------------

    def feed(self, line: _Line) -> None:
        if not self.stack:
            spaces, body = _split_prefix(line.text)
            if _VERSION.match(body) or _PLAN.match(body) or _RESULT.match(body):
                self.found = True
                self._open(spaces, line)
                self._line(self.stack[-1], body, line)
            return
        # the deepest open group whose prefix the line carries
        depth = len(self.stack) - 1
        while depth > 0 and not line.text.startswith(self.stack[depth].prefix):
            depth -= 1
        group = self.stack[depth]
        rest = line.text[len(group.prefix):]
        deeper = _opener(rest)
        if deeper is not None and depth == len(self.stack) - 1:
            self._open(group.prefix + deeper, line)
            self._line(self.stack[-1], rest[len(deeper):], line)
            return
        body = rest.strip()
        if depth < len(self.stack) - 1:
            # a line outside the deepest group: a result line ends the group below
            # ``group`` (and any deeper one, unfinished); a version line ends all of them;
            # anything else is kernel noise printed while the deepest test ran
            test = _result(body, line) if not rest.startswith(" ") else None
            if test is None and not (_VERSION.match(body) and depth == 0):
                self.stack[-1].pending.append(_diagnostic(body))
                return
            while len(self.stack) > depth + 2:
                self._close(None, line)
            if test is not None:
                self._close(test, line)
                return
            while len(self.stack) > 1:
                self._close(None, line)
        self._line(self.stack[depth if depth < len(self.stack) else -1], body, line)

    def _line(self, group: _Group, body: str, line: _Line) -> None:
        body = body.strip()
        if _VERSION.match(body):
            if len(self.stack) == 1 and (group.tests or group.plan is not None):
                self._finish_document()     # the next kernel module's results
                self._open(group.prefix, line)
            return
        if group.start is None:
            group.start = line.stamp
        m = _PLAN.match(body)
        if m:
            # what came before the plan is the group's header: its owner's, not its
            # first test's
            group.plan = int(m.group(1))
            group.owner_diagnostics += group.pending + ([m.group(2).strip()]
                                                        if m.group(2) else [])
            group.pending = []
            return
        m = _SUBTEST.match(body)
        if m:
            group.name = m.group(1)
            return
        m = _BAILOUT.match(body)
        if m:
            group.bailout = m.group(1)
            return
        test = _result(body, line)
        if test is not None:
            self._add(group, test, line)
        elif body:
            group.pending.append(_diagnostic(body))

    def finish(self) -> list[KtapTest]:
        self._finish_document()
        return self.top


def _opener(rest: str) -> str | None:
    """The extra prefix of a line that opens a deeper group: more spaces before a KTAP
    line (KUnit), or ``# `` before a version line (the kselftest runner)."""
    spaces, body = _split_prefix(rest)
    if spaces and (_VERSION.match(body) or _SUBTEST.match(body) or _PLAN.match(body)
                   or _RESULT.match(body)):
        return spaces
    if rest.startswith("#"):
        after = rest[1:]
        inner_spaces, inner = _split_prefix(after)
        if inner_spaces and _VERSION.match(inner):
            return "#" + inner_spaces
    return None


def _diagnostic(body: str) -> str:
    """A diagnostic line's text: its ``#`` marks (one per nesting the kselftest runner
    added before the test's own header) removed."""
    return body.lstrip("# ") if body.startswith("#") else body


def _plan_problems(group: _Group, what: str) -> list[str]:
    problems = []
    if group.bailout is not None:
        problems.append(f"bailed out: {group.bailout}" if group.bailout else "bailed out")
    if group.plan is not None and group.plan != len(group.tests):
        problems.append(f"planned {group.plan} {what}, {len(group.tests)} ran")
    return problems + group.numbering


def parse(text: str) -> list[KtapTest]:
    """The top-level tests of a KTAP log (several documents, as successive kernel modules
    print them, are read as one list). Raises :class:`KtapError` when nothing in ``text``
    is KTAP."""
    parser = _Parser()
    for line in _lines(text):
        parser.feed(line)
    tests = parser.finish()
    if not parser.found:
        first = next((line for line in text.splitlines() if line.strip()), "")
        raise KtapError("no KTAP in it (no 'KTAP version 1', 'TAP version N', plan or "
                        f"'ok N' line); it starts {excerpt(first)}" if first
                        else "no KTAP in it: it is empty")
    return tests


def read(path: str) -> list[KtapTest]:
    """Parse the KTAP log at ``path``: a regular file of at most :data:`MAX_LOG_BYTES`
    (checked before it is read; a FIFO or device is refused, not waited on)."""
    data = read_limited(path, KtapError, MAX_LOG_BYTES, "KTAP log")
    try:
        return parse(data.decode("utf-8", errors="replace"))
    except KtapError as exc:
        raise KtapError(f"{path}: {exc}") from None
