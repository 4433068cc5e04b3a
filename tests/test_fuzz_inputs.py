"""Random input to everything that reads a user's file: saved runs (``show``,
``compare``) and operation logs (.fsxops, .mtdops). A user's file is never a traceback:
a result, or one line and an exit code."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_folio.cli import main
from pytest_folio.timing.storage import Record, TimingRun

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8)


def _valid() -> dict[str, Any]:
    run = TimingRun(
        records=[Record(suite="s", name="n", unit="ms", samples=[1.0, 2.0],
                        params={"folio": "16K"}, counters={"c": 3}, extra={"bytes": 4096},
                        target="reference")],
        machine={"memcpy_gbps": 10.0, "host": "h"}, settings={"mtd_size": 1 << 24},
        meta={"version": "1", "git": {"commit": "abc", "dirty": False}})
    return run.to_dict()


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into a JSON document, the document itself first."""
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += _paths(value, (*prefix, i))
    return found


def _replace(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    data[path[0]] = _replace(data[path[0]], path[1:], value)
    return data


def _run_cli(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, err.getvalue()


@FUZZ
@given(st.data())
def test_show_and_compare_of_an_edited_run_is_a_table_or_one_line(data: st.DataObject) -> None:
    edited = _valid()
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(edited)))
        edited = _replace(edited, path, data.draw(json_values))
    with tempfile.TemporaryDirectory() as tmp:
        good, bad = Path(tmp, "good.json"), Path(tmp, "bad.json")
        good.write_text(json.dumps(_valid()))
        bad.write_text(json.dumps(edited))
        for args in (["show", str(bad)], ["compare", str(good), str(bad)],
                     ["compare", "--normalise", "--counter", "c", str(bad), str(good)],
                     ["compare", str(bad), str(good), str(bad)], ["bandwidth", str(bad)]):
            code, err = _run_cli(args)
            assert code in (0, 2), (args, code)
            if code == 2:
                assert err.count("\n") == 1 and "Traceback" not in err, (args, err)
