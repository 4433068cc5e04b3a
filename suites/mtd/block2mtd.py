"""block2mtd's promises, checked inside the reference model's page cache."""

from __future__ import annotations

from typing import ClassVar

import pytest

from pytest_folio.model.block2mtd import Block2MTD
from pytest_folio.mtdtests.block2mtd import (
    check_api_paths_agree,
    check_dropped_folio_race,
    check_erase_skips_erased_pages,
    check_unchanged_write_dirties_nothing,
)
from pytest_folio.suites.mtd.base import _MTDSuite, run_seed
from pytest_folio.targets.mtd import reference_device
from pytest_folio.targets.protocols import MTDDevice


class Block2MTDChecks(_MTDSuite):
    """block2mtd's promises, checked inside the reference model's page cache; on any other
    target these skip."""

    api_paths_count: ClassVar[int] = 300   # stress operations replayed through both apis

    @staticmethod
    def _reference(dev: MTDDevice) -> Block2MTD:
        reference = reference_device(dev)
        if reference is None:
            pytest.skip(f"block2mtd checks need the reference block2mtd "
                        f"(--folio-mtd reference), not {dev.name}")
        return reference

    def test_erase_skips_erased_pages(self, mtd_device: MTDDevice) -> None:
        check_erase_skips_erased_pages(self._reference(mtd_device))

    def test_unchanged_write_dirties_nothing(self, mtd_device: MTDDevice) -> None:
        check_unchanged_write_dirties_nothing(self._reference(mtd_device))

    def test_dropped_folio_race(self, mtd_device: MTDDevice) -> None:
        dev = self._reference(mtd_device)
        retries = check_dropped_folio_race(dev)
        assert retries >= 2, "the injected race did not make write and erase retry"

    def test_api_paths_agree(self, mtd_device: MTDDevice,
                             request: pytest.FixtureRequest) -> None:
        deltas = check_api_paths_agree(self._reference(mtd_device),
                                       count=self.api_paths_count,
                                       seed=run_seed(request.config))
        # the conversion's point: the folio path needs no compound_head at all
        assert deltas["folio"].get("compound_head", 0) == 0
        assert deltas["page"].get("compound_head", 0) > 0
