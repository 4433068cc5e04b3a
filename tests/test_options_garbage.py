"""Garbage in every option and ini key: a valid value or a one-line usage error naming
where it came from, never another exception (which pytest shows as a traceback).

The property runs the plugin's own parsing in-process (fast, so Hypothesis can try many
values); a few real runs check that pytest turns it into exit code 4 and one line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_folio.options import _OPTIONS, _dest, read_settings
from pytest_folio.targets.fs import resolve_fs_target
from pytest_folio.targets.mtd import resolve_mtd_target
from pytest_folio.targets.spec import _FACTORY_RE, TargetError

VALUE_OPTIONS = [option for option, _, _, kind in _OPTIONS if kind != "bool"]
FLAG_OPTIONS = [option for option, _, _, kind in _OPTIONS if kind == "bool"]

TRICKY = ["", " ", "nan", "inf", "-inf", "-1", "0", "0,0", "4k,4096", "1e309", "0x", "~",
          "~nosuchuser_folio/x", "reference:", "reference:memory=1", "reference:memory=",
          "reference:=x", "reference:api=page,api=folio", "reference:features=full,x",
          "9" * 40, "-" * 3, "\x00", "a\x00b", "\u2603", "x" * 5000, "1T", "99999999999T",
          "1.5", "12%", "%", "maybe", "yes please", "[0, 2]", ",,,", "0;2"]


class FakeConfig:
    """Only what read_settings reads: one option's value on the command line or in the
    ini file, the rest unset."""

    def __init__(self, option: str, value: Any, source: str) -> None:
        self.dest, self.value, self.source = _dest(option), value, source

    def getoption(self, dest: str) -> Any:
        return self.value if self.source == "cli" and dest == self.dest else None

    def getini(self, dest: str) -> Any:
        return self.value if self.source == "ini" and dest == self.dest else None


def _safe_target(text: str, option: str) -> bool:
    """Garbage that would open a device or import a module is not garbage to try: a
    random ``/dev`` path or ``idlelib.idle:x`` does something."""
    spec = text.strip()
    if _FACTORY_RE.match(spec):
        return False
    return not (option == "--folio-mtd" and spec.startswith(("/", ".", "~")))


def _configure(option: str, value: Any, source: str) -> None:
    """What the plugin's configure hooks parse: the settings, then the two targets."""
    s = read_settings(cast(pytest.Config, FakeConfig(option, value, source)))
    for target_option, resolve, text in (("--folio-mtd", resolve_mtd_target, s.mtd),
                                         ("--folio-fs", resolve_fs_target, s.fs)):
        try:
            resolve(text, s.source(target_option))
        except TargetError as exc:
            raise pytest.UsageError(str(exc)) from None


def _check_one_line(option: str, value: Any, source: str) -> None:
    try:
        _configure(option, value, source)
    except pytest.UsageError as exc:
        message = str(exc)
        assert message and "\n" not in message, message
        named = option if source == "cli" else f"ini key {_dest(option)}"
        assert named in message, message


values = st.one_of(st.sampled_from(TRICKY), st.text(max_size=40),
                   st.text(alphabet="0123456789,kKmMgGtTx-+. %", max_size=12))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)
@given(option=st.sampled_from(VALUE_OPTIONS), value=values,
       source=st.sampled_from(["cli", "ini"]))
def test_garbage_in_any_option_is_valid_or_one_line_naming_it(option: str, value: str,
                                                              source: str) -> None:
    if option in ("--folio-mtd", "--folio-fs") and not _safe_target(value, option):
        return
    _check_one_line(option, value, source)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(option=st.sampled_from(FLAG_OPTIONS),
       value=st.one_of(st.sampled_from(TRICKY), st.text(max_size=12), st.booleans(),
                       st.integers()))
def test_garbage_in_a_flag_ini_key_is_valid_or_one_line_naming_it(option: str,
                                                                  value: Any) -> None:
    _check_one_line(option, value, "ini")


# One value each that no option accepts, through pytest itself.
REAL_RUNS = [("--folio-orders", "0,,x"), ("--folio-block-sizes", "nan"),
             ("--folio-mtd", "reference:bogus=1"), ("--folio-fs", "a\tb"),
             ("--folio-mtd-size", "-1"), ("--folio-erasesize", "1e3"),
             ("--folio-fsx-ops", "1.5"), ("--folio-seed", "nan"),
             ("--folio-compare-fail", "-inf")]


@pytest.mark.parametrize("source", ["cli", "ini"])
def test_real_runs_end_with_exit_4_and_one_line(pytester: pytest.Pytester,
                                                source: str) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    for option, value in [*REAL_RUNS, ("--folio-allow-destructive", "perhaps")]:
        if source == "cli" and option in FLAG_OPTIONS:
            continue
        if source == "ini":
            Path(pytester.path / "pytest.ini").write_text(
                f"[pytest]\n{_dest(option)} = {value}\n")
            result = pytester.runpytest("-p", "no:cacheprovider")
        else:
            result = pytester.runpytest("-p", "no:cacheprovider", f"{option}={value}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, (option, value)
        errors = [line for line in result.errlines if line.strip()]
        named = option if source == "cli" else f"ini key {_dest(option)}"
        assert len(errors) == 1 and re.match(rf"ERROR: .*{re.escape(named)}", errors[0]), (
            option, errors)
        assert "Traceback" not in result.stdout.str()
