"""The ``--folio-mtd`` resolver, below the pytest layer."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_folio.model.block2mtd import Block2MTD
from pytest_folio.targets.mtd import MTDTarget, resolve_mtd_target
from pytest_folio.targets.spec import TargetError, TargetSpec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_mtd"


def test_reference_knobs_get_defaults_and_a_label() -> None:
    target = resolve_mtd_target("reference")
    assert target.knobs == {"api": "folio", "retry": "on"}
    assert target.label == "reference:api=folio,retry=on"
    target = resolve_mtd_target("reference:retry=off,api=page")
    assert target.label == "reference:api=page,retry=off"
    assert target.options == {"api": "page", "retry": False}
    assert resolve_mtd_target("reference:api=page").knobs == {"api": "page", "retry": "on"}


def test_reference_opens_block2mtd_at_the_order_with_the_knobs() -> None:
    with resolve_mtd_target("reference:api=page,retry=off").open(
            size=1 << 20, erasesize=64 << 10, folio_order=3) as dev:
        assert isinstance(dev, Block2MTD)
        assert (dev.api, dev.retry, dev.size, dev.erasesize) == (
            "page", False, 1 << 20, 64 << 10)
        assert dev.mapping.mapping_min_folio_order() == 3




@pytest.fixture
def nor(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(EXAMPLE))
    yield importlib.import_module("nor_flash")
    sys.modules.pop("nor_flash", None)


def test_factory_spec_calls_the_users_function(nor: Any) -> None:
    target = resolve_mtd_target("nor_flash:factory")
    assert (target.kind, target.label) == ("factory", "nor_flash:factory")
    with target.open(size=1 << 20, erasesize=64 << 10, folio_order=2) as dev:
        assert isinstance(dev, nor.NorFlash) and dev.erasesize == 64 << 10


def test_a_factorys_device_is_closed_when_its_block_ends(nor: Any) -> None:
    with resolve_mtd_target("nor_flash:factory").open(
            size=1 << 20, erasesize=64 << 10, folio_order=0) as dev:
        assert isinstance(dev, nor.NorFlash) and len(dev.cells) == 1 << 20
    assert dev.cells == bytearray()      # NorFlash.close() drops its cells


def test_factory_gets_only_the_keywords_it_takes(nor: Any) -> None:
    seen = []

    def sized(size: int) -> Any:
        seen.append(size)
        return nor.NorFlash(size, 4096)

    target = MTDTarget(TargetSpec("factory", "mod:sized", factory=sized))
    dev = target.call_factory(size=8192, erasesize=4096, folio_order=1)
    assert seen == [8192] and dev.size == 8192


def test_factory_returning_something_else_is_a_one_line_error() -> None:
    target = MTDTarget(TargetSpec("factory", "mod:broken", factory=lambda **kw: object()))
    with pytest.raises(TargetError) as info:
        target.call_factory(size=1)
    assert str(info.value) == (
        "--folio-mtd: factory mod:broken returned object, not an MTD device (missing: name, type, "
        "flags, size, erasesize, writesize, oobsize, read, write, erase, sync, close)")


def test_an_entry_point_name_resolves_to_its_factory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nor: Any) -> None:
    dist = tmp_path / "nor_example-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nor-example\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pytest_folio.targets]\nnor = nor_flash:factory\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    target = resolve_mtd_target("nor")
    assert (target.kind, target.label) == ("factory", "nor")
    with target.open(size=1 << 20, erasesize=64 << 10, folio_order=0) as dev:
        assert isinstance(dev, nor.NorFlash)
    with pytest.raises(TargetError, match=r"unknown target 'nur'.*\(nor\)$"):
        resolve_mtd_target("nur")
