"""What the project's tests share besides fixtures: the catalogues of broken MTD devices
(``mtd_devices``) and file systems (``fsx_broken`` over ``fsx_cachedfs`` and ``fsx_memfs``),
the model's and the VM's small builders (``model``, ``vm``).

Imported by package path (``from tests.helpers.mtd_devices import RamMTD``) with the
checkout on ``sys.path`` (pyproject's ``pythonpath``); the catalogues are user factories on
the command line too: ``--folio-mtd=tests.helpers.mtd_devices:NAME``,
``--folio-fs=tests.helpers.fsx_broken:NAME``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]


def subprocess_env(**extra: str) -> dict[str, str]:
    """This process's environment for a pytest started as a subprocess: the checkout first on
    ``PYTHONPATH``, so the inner run imports ``tests.helpers`` as this one does, and without
    ``PYTEST_ADDOPTS`` (the outer run's options are not the inner run's)."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(CHECKOUT), os.environ.get("PYTHONPATH", "")) if p)
    env.pop("PYTEST_ADDOPTS", None)
    return env


# A -k expression keeping the first of the stress test's four items (2,500 of its 10,000
# operations): tests that check the ready-made MTD suites run and pass; the main job
# runs them all.
FIRST_STRESS_PART = "not (part2of4 or part3of4 or part4of4)"


def runpytest_own_process(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """``pytester.runpytest(*args)`` in a Python process of its own that imports
    ``tests.helpers`` as this one does: for the inner runs of the suites' random tests.

    In the test's own process they cost 1.5 to 2.5 times the CPU: there the stack is
    deeper, and CPython 3.11 maps and unmaps a 16 KiB frame chunk whenever a call in the
    hot loop crosses a chunk's end (1.4 million mmap/munmap pairs in one catalogue run),
    and the garbage collector walks a worker's heap that grows with every in-process run.
    A new process costs about a second of start-up: worth it from a few seconds up."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", subprocess_env()["PYTHONPATH"])
        return pytester.runpytest_subprocess(*args)


def run_result(proc: subprocess.CompletedProcess[str]) -> pytest.RunResult:
    """A pytest run started with :mod:`subprocess` as pytester's RunResult, so its outcomes
    are compared as counts (``assert_outcomes``), not as the summary line's text."""
    return pytest.RunResult(proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines(),
                            0.0)
