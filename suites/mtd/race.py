"""The race the block2mtd series' first patch fixes, tried with threads.

block2mtd's write and erase paths look a page up in the block device's page cache,
compare it unlocked, and lock it only to change it. If the page cache drops the page in
between, the change goes into a page that is no longer cached and never reaches the
device. The suite runs writers (erase an eraseblock, check it reads erased, write it page
by page, check it reads back) on several threads while other threads drop the device's
cache, then syncs, drops everything and checks every byte once more. A write or erase
that did not land is a failure naming its offset.

Who drops the cache depends on the target:

- **the kernel's block2mtd** (an MTD device named ``block2mtd: /dev/X`` whose block device
  can be opened, as in ``python -m pytest_folio vm``): ``BLKFLSBUF`` on the block device
  and ``drop_caches`` on one thread, and ``BLKZEROOUT`` of the first sector of the page a
  writer is on on the others (:mod:`pytest_folio.mtdtests.kernel_blockdev` says which
  of them can take a page block2mtd holds: only the last);
- **the reference**: a thread that syncs and makes ``invalidate_bdev()`` run between the
  next write's or erase's lookup and lock (the model is single-threaded, so the window is
  opened rather than waited for): ``--folio-mtd reference:retry=off`` fails;
- **a user's device** with ``drop_caches()``
  (:class:`~pytest_folio.targets.protocols.DropDeviceCaches`), called from the dropping threads
  while the writers run, so it must be thread-safe.

The first 512 bytes of every page are the droppers' (``BLKZEROOUT`` zeroes them): the
writers never write them and the checks skip them, on every target alike.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import threading
import time
from collections.abc import Callable
from typing import ClassVar

import pytest

from pytest_folio.linux.constants import PAGE_SIZE
from pytest_folio.mtdtests.kernel_blockdev import SECTOR, BackingDevice, drop_caches
from pytest_folio.session import settings
from pytest_folio.suites.mtd.base import _MTDSuite, require_destructive, run_seed
from pytest_folio.targets.mtd import reference_device
from pytest_folio.targets.protocols import DropDeviceCaches, MTDDevice

ERASED = 0xFF


@dataclasses.dataclass
class RaceCounts:
    """What one run did and what it lost."""

    seconds: float = 0.0
    page_writes: int = 0
    erases: int = 0
    drops: dict[str, int] = dataclasses.field(default_factory=dict)
    lost: list[str] = dataclasses.field(default_factory=list)

    def add(self, other: RaceCounts) -> None:
        self.seconds += other.seconds
        self.page_writes += other.page_writes
        self.erases += other.erases
        for kind, n in other.drops.items():
            self.drops[kind] = self.drops.get(kind, 0) + n
        self.lost += other.lost

    def summary(self) -> str:
        drops = ", ".join(f"{n} {kind}" for kind, n in sorted(self.drops.items())) or "none"
        return (f"{len(self.lost)} lost in {self.page_writes} page writes and {self.erases} "
                f"erases over {self.seconds:.1f} s (cache drops: {drops})")


def owned(page: bytes) -> bytes:
    """The bytes of a page the writers own: all but its first sector."""
    return page[SECTOR:]


class RaceRun:
    """Writers on ``writers`` threads, each with its own eraseblocks, for ``seconds``;
    the droppers are started by :meth:`run`. Device calls are serialized by one lock
    (the race is between a device call and a drop, not between two device calls)."""

    def __init__(self, dev: MTDDevice, seconds: float, writers: int, seed: int) -> None:
        self.dev = dev
        self.seconds = seconds
        self.lock = threading.Lock()
        self.counting = threading.Lock()  # the droppers' counts (the writers' are locked)
        self.stop = threading.Event()
        self.esz = dev.erasesize
        blocks = dev.size // self.esz
        self.writers = max(1, min(writers, blocks))
        self.blocks = {w: list(range(w, blocks, self.writers)) for w in range(self.writers)}
        self.current = [0] * self.writers      # the page offset each writer is changing
        self.expected: dict[int, bytes] = {}   # eraseblock -> what it must hold
        self.reported: dict[int, bool] = {}    # eraseblock -> its last write was lost
        self.counts = RaceCounts()
        self.seed = seed
        self.errors: list[BaseException] = []

    def _read(self, base: int) -> bytes:
        with self.lock:
            return self.dev.read(base, self.esz)

    def _lost(self, what: str, base: int, got: bytes, want: bytes, eb: int) -> bool:
        """Record each page of eraseblock ``eb`` whose bytes are not ``want``'s; whether
        there was one."""
        before = len(self.counts.lost)
        for page in range(0, self.esz, PAGE_SIZE):
            mine, theirs = owned(got[page:page + PAGE_SIZE]), owned(want[page:page + PAGE_SIZE])
            if mine != theirs:
                first = next(i for i, (a, b) in enumerate(zip(mine, theirs, strict=True))
                             if a != b)
                offset = base + page + SECTOR + first
                self.counts.lost.append(
                    f"lost {what} at {offset:#x} (eraseblock {eb}, page "
                    f"{page // PAGE_SIZE}): read {mine[first]:#04x}, expected "
                    f"{theirs[first]:#04x}")
        return len(self.counts.lost) > before

    def _writer(self, w: int) -> None:
        rng = random.Random(self.seed * 1000 + w)
        erased = bytes([ERASED]) * self.esz
        while not self.stop.is_set():
            for eb in self.blocks[w]:
                if self.stop.is_set():
                    return
                base = eb * self.esz
                self.current[w] = base + rng.randrange(0, self.esz, PAGE_SIZE)
                with self.lock:
                    self.dev.erase(base, self.esz)
                    self.counts.erases += 1
                self._lost("erase", base, self._read(base), erased, eb)
                data = rng.randbytes(self.esz)
                self.expected[eb] = data
                for page in range(0, self.esz, PAGE_SIZE):
                    self.current[w] = base + page
                    with self.lock:
                        self.dev.write(base + page + SECTOR, data[page + SECTOR:page + PAGE_SIZE])
                        self.counts.page_writes += 1
                self.reported[eb] = self._lost("write", base, self._read(base), data, eb)

    def _guard(self, fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported by run()
                self.errors.append(exc)
                self.stop.set()
        return run

    def dropper(self, kind: str, drop: Callable[[], bool | None]) -> Callable[[], None]:
        """A dropping thread's body: ``drop()`` until the run stops, each True or None
        counted as one drop of ``kind``."""
        def loop() -> None:
            while not self.stop.is_set():
                if drop() is not False:
                    with self.counting:
                        self.counts.drops[kind] = self.counts.drops.get(kind, 0) + 1
        return loop

    def target_page(self, rng: random.Random) -> int:
        """A page some writer is changing now."""
        return self.current[rng.randrange(self.writers)]

    def run(self, droppers: list[Callable[[], None]],
            final_drop: Callable[[], None] | None = None) -> RaceCounts:
        threads = [threading.Thread(target=self._guard(functools.partial(self._writer, w)),
                                    name=f"race-writer-{w}") for w in range(self.writers)]
        threads += [threading.Thread(target=self._guard(d), name=f"race-dropper-{i}")
                    for i, d in enumerate(droppers)]
        start = time.monotonic()
        for t in threads:
            t.start()
        self.stop.wait(self.seconds)
        self.stop.set()
        for t in threads:
            t.join()
        self.counts.seconds = time.monotonic() - start
        if self.errors:
            raise self.errors[0]
        self.dev.sync()
        if final_drop is not None:
            final_drop()
        for eb, data in sorted(self.expected.items()):   # every byte, from the device
            if not self.reported.get(eb):                 # (a loss is said once)
                base = eb * self.esz
                self._lost("write (after sync)", base, self.dev.read(base, self.esz),
                           data, eb)
        return self.counts


def kernel_droppers(run: RaceRun, backing: BackingDevice, threads: int,
                    in_use: bool = True) -> list[Callable[[], None]]:
    """BLKFLSBUF and drop_caches by turns on one thread; BLKZEROOUT of the sector of a
    page a writer is changing on the others (without ``in_use``, BLKFLSBUF and
    drop_caches on every thread: the drops that leave a referenced page alone)."""
    turn = [0]

    def flush_or_drop() -> bool:
        turn[0] += 1
        if turn[0] % 2:
            backing.flush()
        else:
            drop_caches()
        return True

    out = [run.dropper("BLKFLSBUF/drop_caches", flush_or_drop)]
    if not in_use:
        return out * max(threads, 1)
    for i in range(max(threads - 1, 1)):
        out.append(run.dropper("BLKZEROOUT", functools.partial(
            _zero_a_writers_page, run, backing, random.Random(run.seed * 7919 + i))))
    return out


def _zero_a_writers_page(run: RaceRun, backing: BackingDevice, rng: random.Random) -> bool:
    return backing.zero_sector(run.target_page(rng) & ~(PAGE_SIZE - 1))


def reference_dropper(run: RaceRun, dev: MTDDevice) -> Callable[[], None]:
    """The model cannot be raced, so the window is opened: sync (the folio must be clean
    to be dropped, as BLKFLSBUF's sync makes it) and let ``invalidate_bdev()`` run between
    the next write's or erase's lookup and lock."""
    ref = reference_device(dev)
    assert ref is not None

    def drop() -> bool:
        with run.lock:
            ref.sync()
            ref.drop_folio_before_lock(1)
        time.sleep(0.001)
        return True
    return run.dropper("invalidate_bdev between lookup and lock", drop)


def run_invalidate_race(dev: MTDDevice, seconds: float, seed: int, writers: int = 3,
                        droppers: int = 2, in_use: bool = True) -> RaceCounts:
    """The race on ``dev`` (see the module's docstring for who drops the cache)."""
    run = RaceRun(dev, seconds, writers, seed)
    if reference_device(dev) is not None:
        return run.run([reference_dropper(run, dev)])
    backing = BackingDevice.of(dev.name)
    if backing is not None:
        try:
            return run.run(kernel_droppers(run, backing, droppers, in_use), backing.flush)
        finally:
            backing.close()
    if isinstance(dev, DropDeviceCaches):
        drop_caches = dev.drop_caches

        def drop() -> None:
            with run.lock:   # a user's device need not be thread-safe: drops come
                drop_caches()  # between its calls, as the writers' calls do
        return run.run([run.dropper("drop_caches()", drop) for _ in range(droppers)], drop)
    raise LookupError(f"{dev.name} has no cache to drop: neither the reference, nor the "
                      "kernel's block2mtd with its block device here, nor a device with "
                      "drop_caches()")


class InvalidateRaceSuite(_MTDSuite):
    """Writes and erases while other threads drop the page cache: nothing may be lost."""

    race_writers: ClassVar[int] = 3
    race_droppers: ClassVar[int] = 2
    race_drop_in_use: ClassVar[bool] = True  # the kernel's BLKZEROOUT droppers too

    def test_block2mtd_invalidate_race(self, mtd_device: MTDDevice,
                                       request: pytest.FixtureRequest) -> None:
        require_destructive(mtd_device, request.config)
        seconds = settings(request.config).race_seconds
        with self._running(request, "invalidate_race") as say:
            try:
                counts = run_invalidate_race(mtd_device, seconds, run_seed(request.config),
                                             self.race_writers, self.race_droppers,
                                             self.race_drop_in_use)
            except LookupError as exc:
                pytest.skip(str(exc))
            say(f"{mtd_device.name}: {counts.summary()}")
            for line in counts.lost[:20]:
                say(line)
        if counts.lost:
            pytest.fail(f"{mtd_device.name}: {counts.summary()}; first: "
                        + "; ".join(counts.lost[:5]), pytrace=False)
