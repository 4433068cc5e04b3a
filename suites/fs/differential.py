"""Differential mode: the target against an oracle, one random sequence on both."""

from __future__ import annotations

import pytest

from pytest_folio.fixtures.fs import REPRODUCE, fs_rerun_command
from pytest_folio.fsx.oracle import (
    BAD_MODES,
    MAXLEN,
    VERSION_DEPENDENT_MODES,
    Mismatch,
    compare,
    fallocate_modes,
    generate,
)
from pytest_folio.session import settings
from pytest_folio.suites.fs.base import _Base
from pytest_folio.targets.protocols import AnyFileSystem


class FsDifferential(_Base):
    """Differential mode (``--folio-fs-oracle``): one random sequence of
    ``--folio-fsx-ops`` operations from the run's seed on the target and on the oracle,
    every return value, errno, size and byte compared (:mod:`pytest_folio.fsx.oracle`).
    The first difference is one line: the operation, both sides' outcomes, and the
    command that replays it."""

    def test_the_target_matches_the_oracle(self, filesystem: AnyFileSystem,
                                           fs_oracle: AnyFileSystem,
                                           request: pytest.FixtureRequest) -> None:
        folio = settings(request.config)
        modes = fallocate_modes(filesystem, fs_oracle, [
            m for m in BAD_MODES if m not in VERSION_DEPENDENT_MODES])
        ops = generate(folio.fsx_seed, modes, folio.fsx_ops,
                       maxlen=max(MAXLEN, 3 * filesystem.blocksize))
        try:
            compare(filesystem, fs_oracle, ops)
        except Mismatch as exc:
            found = exc
        else:
            return
        request.node.add_report_section("call", "differential", "\n".join(found.log[-25:]))
        request.node.stash[REPRODUCE] = False     # the message says it already
        pytest.fail(f"differential: {found}; replay: {fs_rerun_command(request.node)}",
                    pytrace=False)
