"""Machine facts: worker counts from xdist's options and a measured memcpy bandwidth."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_folio.timing import hostinfo
from pytest_folio.timing.hostinfo import machine_facts, memcpy_bandwidth, xdist_worker_count


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


def test_bandwidth_is_the_bytes_over_the_fastest_rounds_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # three rounds of 1 MiB taking 200, 100 and 400 us: the best is 100 us, 10.49 GB/s
    clock = iter([0.0, 0.0002, 1.0, 1.0001, 2.0, 2.0004])
    monkeypatch.setattr(hostinfo.time, "perf_counter", lambda: next(clock))
    assert memcpy_bandwidth(1 << 20, rounds=3) == 10.49


def test_facts_name_the_machine_and_measure_nothing_when_told_not_to() -> None:
    facts = machine_facts(workers=3, measure=False)
    assert facts["xdist_workers"] == 3 and "memcpy_gbps" not in facts
    assert facts["cpus"] >= 1 and facts["kernel"] and facts["python"] and facts["cpu"]
