"""A KTAP log as the session's items: ``--folio-ktap FILE``.

Each KTAP test becomes a pytest item, and a test with subtests a collector of them, so a
kernel's own results (KUnit, kselftests, a log from another machine or a CI job) read
like any run: one summary, one skip list, ``-k`` to select, the timing table for the tests
whose lines carry console timestamps, and ``--folio-save`` to keep them. The items replay
outcomes recorded elsewhere; they run nothing.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from pytest_folio.ktap.log import KtapTest, read
from pytest_folio.measurement import Measurement

SUITE = "ktap"
SHOWN_DIAGNOSTICS = 30      # a failure shows its last lines; the log has the rest


class KtapFailure(Exception):
    """A KTAP test that did not pass: its report is the result line and diagnostics."""


RUN = "[RUN] "                 # what the mm selftests print before each case
_LABEL = re.compile(r" \[([^\[\]]+)\]$")


def run_label(name: str) -> str:
    """The ``[LABEL]`` ending a top-level test's name, as ``vm --ktap`` names one run
    of a program per place (``selftests: mm: split_huge_page_test [16K-xfs]``), or ""."""
    m = _LABEL.search(name)
    return m.group(1) if m else ""


def _described(test: KtapTest) -> str:
    """A test's description; where the mm selftests' ``[RUN] ...`` line before it says
    what the case is (their result lines repeat one description), that line first."""
    run = next((d[len(RUN):].strip() for d in reversed(test.diagnostics)
                if d.startswith(RUN)), "")
    parts = [p for p in (run, test.name) if p]
    return ": ".join(parts).replace("::", ":")


def item_names(tests: Iterable[KtapTest]) -> list[str]:
    """Names for sibling tests that are unique and stable across runs: the description,
    or, where it is empty or shared, the description with the test's number."""
    tests = list(tests)
    described = [_described(t) for t in tests]
    counts = Counter(described)
    return [name if name and counts[name] == 1 else f"{name or 'test'} #{t.number}"
            for name, t in zip(described, tests, strict=True)]


def _needs_own_item(test: KtapTest) -> bool:
    """Whether a test with subtests has an outcome its subtests do not already show: a
    plan or bail-out problem, or a failure (or skip) none of them has."""
    if test.problems:
        return True
    if test.outcome == "passed":
        return False
    return not any(sub.outcome == test.outcome for sub in test.walk() if sub is not test)


class KtapLog(pytest.File):
    """The log named by ``--folio-ktap``."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        yield from _children(self, read(str(self.path)), None)


class KtapGroup(pytest.Collector):
    """A KTAP test with subtests."""

    def __init__(self, *, test: KtapTest, label: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.test = test
        self.label = label

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        yield from _children(self, self.test.subtests, self.label)
        if _needs_own_item(self.test):
            yield KtapItem.from_parent(self, name="(result)", test=self.test,
                                       label=self.label)


def _children(parent: pytest.Collector, tests: list[KtapTest],
              label: str | None) -> Iterator[pytest.Item | pytest.Collector]:
    """The nodes of ``tests`` below ``parent``; ``label``: of their top-level run (None:
    they are the top level, each its own)."""
    for name, test in zip(item_names(tests), tests, strict=True):
        kind = KtapGroup if test.subtests else KtapItem
        yield kind.from_parent(parent, name=name, test=test,
                               label=run_label(name) if label is None else label)


class KtapItem(pytest.Item):
    """One KTAP test's recorded outcome."""

    def __init__(self, *, test: KtapTest, label: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.test = test
        # the run's place (run_label): skip reasons start with it, as the skip lists
        # show the log's line, not the id
        self.label = label
        # the top-level tests' times (name, seconds) this item announces: the timing
        # table has one row per top-level test (a selftest program, a KUnit suite)
        self.times: list[tuple[str, float]] = []

    def runtest(self) -> None:
        test = self.test
        for name, seconds in self.times:
            self.config.hook.pytest_folio_measurement(item=self, measurement=Measurement(
                suite=SUITE, name=name, unit="ms", samples=[seconds * 1000.0],
                target=f"ktap:{self.path.name}"))
        if test.outcome == "skipped":
            reason = test.reason or "skipped (the log gives no reason)"
            pytest.skip(f"[{self.label}] {reason}" if self.label else reason)
        if test.outcome == "xfailed":
            pytest.xfail(f"{test.directive} {test.reason}".strip())
        if test.outcome == "failed" or test.problems:
            raise KtapFailure(self._report())

    def _report(self) -> str:
        test = self.test
        if test.ok is None:
            head = f"no result line for {test.name or 'this test'}"
        else:
            head = f"{'ok' if test.ok else 'not ok'} {test.number} {test.name}".rstrip()
            tail = " ".join(part for part in (test.directive, test.reason) if part)
            if tail:
                head += f" # {tail}"
        lines = [f"{self.path.name}:{test.line}: {head}" if test.line else head,
                 *(f"  {p}" for p in test.problems)]
        diagnostics = test.diagnostics
        if len(diagnostics) > SHOWN_DIAGNOSTICS:
            lines.append(f"  ({len(diagnostics) - SHOWN_DIAGNOSTICS} earlier diagnostic "
                         f"lines are in the log)")
            diagnostics = diagnostics[-SHOWN_DIAGNOSTICS:]
        lines.extend(f"  # {d}" for d in diagnostics)
        return "\n".join(lines)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: object = None) -> str:
        if isinstance(excinfo.value, KtapFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        name = self.name
        if isinstance(self.parent, KtapGroup) and self.parent.test is self.test:
            name = f"{self.parent.name} (result)"        # a parent test's own verdict
        return self.path, (self.test.line - 1) if self.test.line else None, name


def locate_skip(item: pytest.Item, report: pytest.TestReport) -> None:
    """A skipped KTAP test's report points at its line in the log, not at this module."""
    if isinstance(item, KtapItem) and report.skipped and isinstance(report.longrepr, tuple):
        _, _, reason = report.longrepr
        report.longrepr = (str(item.path), item.test.line, reason)


def collect_log(session: pytest.Session, path: Path) -> list[pytest.Item]:
    """Every item of the log at ``path``, collected below ``session`` (and reported as
    collected, so that the run's "collected N items" counts them)."""
    items: list[pytest.Item] = []
    path = path.resolve()
    try:
        nodeid = path.relative_to(session.config.rootpath).as_posix()
    except ValueError:
        nodeid = path.name          # a log from elsewhere: its name, not its whole path
    log = KtapLog.from_parent(session, path=path, nodeid=nodeid)
    for top in log.collect():
        first = len(items)
        pending: list[pytest.Item | pytest.Collector] = [top]
        while pending:
            node = pending.pop(0)
            if isinstance(node, pytest.Item):
                items.append(node)
            else:
                assert isinstance(node, pytest.Collector)
                pending[0:0] = list(node.collect())
        head = items[first] if len(items) > first else None
        assert isinstance(top, KtapGroup | KtapItem)
        if top.test.duration is not None and isinstance(head, KtapItem):
            head.times.append((top.name, top.test.duration))
    session.config.hook.pytest_collectreport(report=pytest.CollectReport(
        nodeid, "passed", None, list(items)))
    return items
