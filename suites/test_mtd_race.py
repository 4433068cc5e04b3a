"""The race block2mtd's retry fixes, with threads: writes and erases on several threads
while others drop the page cache, then every byte checked. On the kernel's block2mtd in
``python -m pytest_folio vm`` the droppers use its block device; on the reference the
window is opened on purpose (``--folio-mtd reference:retry=off`` fails); a user's device
needs ``drop_caches()``. ``--folio-race-seconds`` says how long to try."""

from pytest_folio.suites.mtd.race import InvalidateRaceSuite


class TestInvalidateRace(InvalidateRaceSuite):
    pass
