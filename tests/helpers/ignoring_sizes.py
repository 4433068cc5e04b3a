"""Factories that ignore the size they are asked for, as a user's often do: the file
system is always 4K blocks, the device always 16K folios (and says so)."""

from __future__ import annotations

from typing import Any

from tests.helpers.usual_python import UsualFS, UsualMTD


def fs(blocksize: int, root: str) -> UsualFS:
    """Whatever the block size asked, 4K."""
    return UsualFS(4096, root)


class OwnOrder(UsualMTD):
    """A device that says its folio order (HasFolioOrder): 2, 16K folios."""

    folio_order = 2


def mtd(size: int, erasesize: int, **ignored: Any) -> OwnOrder:
    """Whatever the folio order asked, 16K folios."""
    return OwnOrder(size=size, erasesize=erasesize, folio_order=2)
