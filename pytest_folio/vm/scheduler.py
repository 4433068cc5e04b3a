"""xdist's scheduler for a ``vm --guest`` matrix: each item goes only to a guest of the
group its id names (:meth:`pytest_folio.vm.matrix.Matrix.label_of`), an item naming no
group to any guest. Every worker collects the same items (xdist's rule, checked here as
its own schedulers check it); within a group the guests share the items as ``--dist
load`` shares them, a few at a time, so a slow guest is not handed a long queue. A guest
that goes down gives the items it had not started back to its group; the items of a
group with no guest left to take them (a guest that was told there is nothing more takes
none) are not run, and the guest plugin names them at the end.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_folio.vm.matrix import Matrix

WorkerController = Any      # xdist's, which has no type information

AHEAD = 2       # items a guest holds: the one it runs and the next


class MatrixScheduling:
    """The :class:`xdist.scheduler.protocol.Scheduling` of a guest matrix."""

    def __init__(self, config: pytest.Config, matrix: Matrix, log: Any) -> None:
        self.config, self.matrix, self.log = config, matrix, log
        self.numnodes = len(config.getoption("tx"))     # the runner's one per guest
        self.node2collection: dict[WorkerController, list[str]] = {}
        self.node2pending: dict[WorkerController, list[int]] = {}
        self.collection: list[str] | None = None
        self.queues: dict[str | None, list[int]] = {}    # group label (None: any) -> items

    @property
    def nodes(self) -> list[WorkerController]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.node2collection) >= self.numnodes

    def waiting(self) -> bool:
        """Whether items are queued that a guest still taking items may run."""
        return any(self.runnable(n) for n in self.nodes if not n.shutting_down)

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or self.waiting():
            return False
        return all(len(pending) < AHEAD for pending in self.node2pending.values())

    @property
    def has_pending(self) -> bool:
        return self.waiting() or any(self.node2pending.values())

    def not_run(self) -> dict[str, list[str]]:
        """Group label -> the items left in its queue (no guest of it was left)."""
        if self.collection is None:
            return {}
        return {str(label): [self.collection[i] for i in sorted(queue)]
                for label, queue in self.queues.items() if queue}

    def group_of(self, node: WorkerController) -> str | None:
        return self.matrix.guests.get(node.gateway.id)

    def runnable(self, node: WorkerController) -> list[list[int]]:
        """The queues ``node`` takes from, its group's first; only non-empty ones."""
        return [q for q in (self.queues.get(self.group_of(node), []),
                            self.queues.get(None, [])) if q]

    def add_node(self, node: WorkerController) -> None:
        assert node not in self.node2pending
        self.node2pending[node] = []

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        assert node in self.node2pending
        if self.collection is not None and list(collection) != self.collection:
            self.log(collection_diff(self.collection, list(collection), "the others",
                                     node.gateway.id))
            return
        self.node2collection[node] = list(collection)

    def mark_test_complete(self, node: WorkerController, item_index: int,
                           duration: float = 0) -> None:
        self.node2pending[node].remove(item_index)
        self.check_schedule(node)

    def mark_test_pending(self, item: str) -> None:
        assert self.collection is not None
        index = self.collection.index(item)
        self.queues.setdefault(self.matrix.label_of(item), []).insert(0, index)
        for node in self.nodes:
            self.check_schedule(node)

    def remove_pending_tests_from_node(self, node: WorkerController,
                                       indices: Sequence[int]) -> None:
        """Items a worker gave back unstarted go back to their group's queue (xdist
        asks only schedulers that steal work, which this one does not)."""
        pending = self.node2pending[node]
        for index in indices:
            pending.remove(index)
        self._requeue(indices)

    def _requeue(self, indices: Sequence[int]) -> None:
        assert self.collection is not None
        for index in indices:
            self.queues.setdefault(self.matrix.label_of(self.collection[index]),
                                   []).append(index)
        for other in self.nodes:
            self.check_schedule(other)

    def check_schedule(self, node: WorkerController, duration: float = 0) -> None:
        """Fill ``node`` up to :data:`AHEAD` items; once nothing is left that it may
        run, tell it so: an xdist worker runs an item only when it knows the next one
        or that there is none (its teardown depends on it), so a guest holding its
        group's last item would otherwise wait for the whole session."""
        if node.shutting_down:
            return
        pending = self.node2pending[node]
        sent: list[int] = []
        for queue in self.runnable(node):
            while queue and len(pending) + len(sent) < AHEAD:
                sent.append(queue.pop(0))
        if sent:
            pending.extend(sent)
            node.send_runtest_some(sent)
        if not self.runnable(node):
            node.shutdown()

    def remove_node(self, node: WorkerController) -> str | None:
        """The node went down (or finished): its unstarted items go back to their
        queues; the item it was running, if any, is returned as crashed."""
        pending = self.node2pending.pop(node)
        if not pending:
            return None
        assert self.collection is not None
        crashed = self.collection[pending.pop(0)]
        self._requeue(pending)
        return crashed

    def schedule(self) -> None:
        """Once every guest collected: index the items by group and start every guest."""
        assert self.collection_is_completed
        if self.collection is None:
            collections = list(self.node2collection.items())
            first, col = collections[0]
            for node, other in collections[1:]:
                diff = collection_diff(col, other, first.gateway.id, node.gateway.id)
                if diff:
                    self.log(diff)
                    self.config.hook.pytest_collectreport(report=pytest.CollectReport(
                        nodeid=node.gateway.id, outcome="failed", longrepr=diff,
                        result=[]))
                    return
            self.collection = col
            for index, nodeid in enumerate(col):
                self.queues.setdefault(self.matrix.label_of(nodeid), []).append(index)
        for node in self.nodes:
            self.check_schedule(node)


def collection_diff(one: list[str], other: list[str], one_name: str,
                    other_name: str) -> str:
    """Empty when the collections are the same; else where they differ, as a diff."""
    if one == other:
        return ""
    diff = difflib.unified_diff(one, other, one_name, other_name, lineterm="", n=1)
    return (f"guests {one_name} and {other_name} collected different items (every guest "
            "must collect the same):\n" + "\n".join(list(diff)[:40]))


def make_scheduler(config: pytest.Config, matrix: Matrix, log: Any) -> MatrixScheduling:
    return MatrixScheduling(config, matrix, log.matrixsched)
