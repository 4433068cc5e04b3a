"""The guest run's folio orders and block sizes, read the way its pytest reads them.

The host makes one disk per order and block size before the guest's pytest starts, so it
must know the values that pytest will see: the command line, then the ini key
(``folio_orders``, ``-o folio_orders=...``), from the ini file pytest selects (``-c``,
``--rootdir``, the first of pytest.ini, pyproject.toml, tox.ini, setup.cfg upwards from
the arguments), with ``PYTEST_ADDOPTS`` and the ini's ``addopts`` applied. Rather than
copy those rules, a host-side pytest with the same arguments, directory and environment
reads them (the plugin's own :class:`~pytest_folio.options.GivenValues`) and stops
before configuring anything, as ``pytest --version`` does.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from pytest_folio.errors import CommandError
from pytest_folio.options import GivenValues, parse_order
from pytest_folio.sizes import parse_block_size, parse_list

READ = ("--folio-orders", "--folio-block-sizes", "--folio-failures")
MARK = "folio-run-settings: "
READ_TIMEOUT = 120.0


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """What the guest's pytest will run at; ``orders_given``: the user chose the orders
    (on the command line or in the ini), so the kernel's limits refuse rather than cut."""

    orders: list[int]
    orders_given: bool
    block_sizes: list[int]
    failures: Path | None = None  # --folio-failures, from the rootdir (None: off)


class _Reader:
    """A pytest plugin printing the given values as one JSON line, then ending the run."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_cmdline_main(self, config: pytest.Config) -> int:
        given = GivenValues(config)
        values: dict[str, object] = {
            option: {"given": given.raw(option) is not None, "text": given.text(option),
                     "source": given.source(option)} for option in READ}
        values["rootdir"] = str(config.rootpath)
        print(MARK + json.dumps(values), flush=True)
        return 0


def main(argv: list[str]) -> int:
    """The host-side pytest: ``python -m pytest_folio.vm.runsettings PYTEST_ARGS...``."""
    return int(pytest.main(["-p", "pytest_folio", "-p", "no:cacheprovider", *argv],
                           plugins=[_Reader()]))


def read_run_settings(pytest_args: list[str], environ: Mapping[str, str]) -> RunSettings:
    """The run's orders and block sizes; a value pytest or the plugin refuses is one
    CommandError line (pytest's own, naming the option or ini key)."""
    proc = subprocess.run([sys.executable, "-m", "pytest_folio.vm.runsettings",
                           *pytest_args], env=dict(environ), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=READ_TIMEOUT, check=False)
    found = [ln[len(MARK):] for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode != 0 or not found:
        raise CommandError(f"pytest could not read the run's settings: "
                           f"{_error_line(proc.stderr + proc.stdout, proc.returncode)}")
    values = json.loads(found[-1])
    orders = _parsed(values["--folio-orders"], parse_order)
    failures = str(values["--folio-failures"]["text"] or "off")
    return RunSettings(orders, values["--folio-orders"]["given"],
                       _parsed(values["--folio-block-sizes"], parse_block_size),
                       None if failures.lower() == "off"
                       else Path(values["rootdir"]) / Path(failures).expanduser())


def _error_line(output: str, status: int) -> str:
    """pytest's own error line: a UsageError's ``ERROR: ...``, or argparse's
    ``...: error: unrecognized arguments ...`` (not the usage or rootdir lines around it)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ": error: " in ln
              or (ln.startswith("ERROR: ") and not ln.startswith("ERROR: usage:"))]
    line = (errors or lines or [f"exit status {status}"])[-1]
    return line.removeprefix("ERROR: ").split(": error: ", 1)[-1]


def _parsed(value: dict[str, object], parse: Callable[[str], int]) -> list[int]:
    """The values of a list option, each once, in order; errors name where it came from."""
    try:
        parsed = [parse(v) for v in parse_list(str(value["text"]))]
    except ValueError as exc:
        raise CommandError(f"{value['source']}: {exc}") from None
    if not parsed:
        raise CommandError(f"{value['source']} needs at least one value")
    return list(dict.fromkeys(parsed))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
