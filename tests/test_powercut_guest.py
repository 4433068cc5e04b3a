"""Both guest sides of ``vm --power-cut`` take one shape, :class:`GuestSide`: mypy checks
the two assignments below against the protocol, and the test checks at run time that
each call takes the protocol's arguments and nothing more that lacks a default."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pytest_folio.fsx import guest as fs_guest
from pytest_folio.mtdtests import guest as mtd_guest
from pytest_folio.mtdtests.kernel_modules import KernelDevice
from pytest_folio.powercut import GuestSide
from pytest_folio.targets.protocols import FileSystem

MTD_SIDE: GuestSide[Sequence[KernelDevice]] = mtd_guest
FS_SIDE: GuestSide[Mapping[str, FileSystem]] = fs_guest
CALLS = [name for name, member in vars(GuestSide).items()
         if inspect.isfunction(member) and not name.startswith("_")]


def takes_the_protocols_arguments(impl: Any, call: str) -> list[str]:
    """What keeps ``impl.call`` from being called as the protocol calls it."""
    wanted = len(inspect.signature(getattr(GuestSide, call)).parameters) - 1  # not self
    params = list(inspect.signature(getattr(impl, call)).parameters.values())
    positional = [p for p in params
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    problems = [f"{call} takes {len(positional)} positional arguments, not {wanted}"
                ] if len(positional) < wanted else []
    problems += [f"{call}'s {p.name} has no default" for p in params[wanted:]
                 if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return problems


def test_the_protocol_names_both_calls() -> None:
    assert sorted(CALLS) == ["check_after_cut", "run_until_cut"]


@pytest.mark.parametrize("side", [MTD_SIDE, FS_SIDE], ids=["mtd", "fs"])
def test_a_guest_side_takes_the_protocols_shape(side: GuestSide[Any]) -> None:
    assert isinstance(side.LOG_NAME, str) and side.LOG_NAME.endswith(".json")
    assert [p for call in CALLS for p in takes_the_protocols_arguments(side, call)] == []


def test_the_shape_check_sees_a_call_that_wants_more() -> None:
    class Wrong:
        LOG_NAME = "x.json"

        @staticmethod
        def run_until_cut(targets: object, seed: int) -> list[object]:
            return []

        @staticmethod
        def check_after_cut(label: str, device: object, out: object) -> None:
            return None

    assert takes_the_protocols_arguments(Wrong, "run_until_cut") == [
        "run_until_cut takes 2 positional arguments, not 3"]
    assert takes_the_protocols_arguments(Wrong, "check_after_cut") == [
        "check_after_cut's out has no default"]
