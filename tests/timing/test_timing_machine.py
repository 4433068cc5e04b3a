"""Machine facts: worker counts from xdist's options and a measured memcpy bandwidth."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_folio.timing.machine import machine_facts, memcpy_bandwidth, xdist_worker_count


@pytest.mark.parametrize(("option", "workerinput", "count"), [
    ({"dist": "no", "numprocesses": None, "tx": []}, None, 0),
    ({"dist": "load", "numprocesses": 2, "tx": ["popen", "popen"]}, None, 2),
    ({"dist": "load", "numprocesses": None, "tx": ["2*popen", "ssh=lab//python=python3"]},
     None, 3),
    ({"dist": "load", "numprocesses": None, "tx": ["popen"]}, {"workercount": 4}, 4),
])
def test_worker_count(option: dict[str, object], workerinput: dict[str, int] | None,
                      count: int) -> None:
    config = SimpleNamespace(option=SimpleNamespace(**option))
    if workerinput is not None:
        config.workerinput = workerinput
    assert xdist_worker_count(config) == count


def test_facts_and_bandwidth() -> None:
    assert 0.01 < memcpy_bandwidth(1 << 20, rounds=2) < 10_000
    facts = machine_facts(workers=3, measure=False)
    assert facts["xdist_workers"] == 3 and "memcpy_gbps" not in facts
    assert facts["cpus"] >= 1 and facts["kernel"] and facts["python"] and facts["cpu"]
