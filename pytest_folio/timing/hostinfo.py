"""Facts about the machine a run was measured on, so runs from different machines compare.

The memcpy bandwidth is measured, not looked up: a patched kernel timed on a faster box
is not a faster kernel, and dividing by the bandwidth normalises that away.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
import time
from typing import Any

MEMCPY_BYTES = 32 << 20
MEMCPY_ROUNDS = 5


def cpu_model() -> str:
    """The CPU's name from /proc/cpuinfo, else what platform knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Processor", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memcpy_bandwidth(nbytes: int = MEMCPY_BYTES, rounds: int = MEMCPY_ROUNDS) -> float:
    """Best-of-``rounds`` copy bandwidth in GB/s (10^9 bytes/s) of one ``nbytes`` buffer."""
    src = bytearray(os.urandom(1 << 16)) * (nbytes >> 16)
    dst = bytearray(len(src))
    view = memoryview(dst)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        view[:] = src
        best = min(best, time.perf_counter() - start)
    return round(len(src) / max(best, 1e-9) / 1e9, 2)


def xdist_worker_count(config: Any) -> int:
    """How many xdist workers the run asked for (0 when not distributed).

    ``-n N`` becomes N popen specs in ``--tx``; ``--tx 2*popen`` counts 2. A worker
    knows the count from xdist's ``workerinput``.
    """
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return int(workerinput.get("workercount", 0))
    option = getattr(config, "option", None)
    if getattr(option, "dist", "no") == "no" and not getattr(option, "numprocesses", None):
        return 0
    count = 0
    for spec in getattr(option, "tx", None) or []:
        match = re.match(r"^(\d+)\*", str(spec))
        count += int(match.group(1)) if match else 1
    return count


def machine_facts(workers: int = 0, measure: bool = True) -> dict[str, Any]:
    """CPU, kernel, Python, host, xdist worker count and (if ``measure``) memcpy GB/s."""
    facts: dict[str, Any] = {
        "cpu": cpu_model(),
        "cpus": os.cpu_count() or 0,
        "kernel": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "executable": sys.executable,
        "host": socket.gethostname(),
        "xdist_workers": workers,
    }
    if measure:
        facts["memcpy_gbps"] = memcpy_bandwidth()
    return facts
