"""The kernel's block2mtd against the reference: the same operation sequences give the same
bytes, geometry and errnos.

Meaningful only against a real block2mtd (``--folio-mtd /dev/mtdN`` naming one, with
``--folio-allow-destructive``): ``python -m pytest_folio vm`` runs it that way; elsewhere
it skips and says so. The reference runs at every ``--folio-orders`` folio size against the
kernel's device of that folio size (``--folio-mtd=4K=/dev/mtd0,16K=/dev/mtd1,...``: block2mtd
on a disk of that logical block size), or against the one kernel device given.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import pytest

from pytest_folio.fixtures.mtd import mtd_target
from pytest_folio.model.constants import PAGE_SIZE
from pytest_folio.plugin import settings
from pytest_folio.targets.protocols import MTDDevice

SEEDS = [1, 2, 3]
OPS = 300


@pytest.fixture
def kernel_block2mtd(request: pytest.FixtureRequest, mtd_device: MTDDevice) -> MTDDevice:
    """The chosen device, when it is the kernel's block2mtd and may be written."""
    if mtd_target(request.config).kind != "path" or not mtd_device.name.startswith(
            "block2mtd: "):
        pytest.skip("needs the kernel's block2mtd as --folio-mtd /dev/mtdN "
                    "(run it with: python -m pytest_folio vm)")
    if not settings(request.config).allow_destructive:
        pytest.skip("needs --folio-allow-destructive to write the device")
    return mtd_device


def outcome(call: Any, *args: Any) -> tuple[Any, ...]:
    """What an operation did: its result, or the errno it failed with."""
    try:
        result = call(*args)
    except OSError as exc:
        return ("errno", exc.errno)
    if isinstance(result, bytes):
        return ("bytes", hashlib.sha256(result).hexdigest()[:16], len(result))
    return ("ok", result)


def operations(seed: int, size: int, erasesize: int) -> list[tuple[Any, ...]]:
    """A device-independent operation list: mostly in range, some straddling the end,
    some erases that are not eraseblock aligned (block2mtd erases whole pages)."""
    rnd = random.Random(seed)
    ops: list[tuple[Any, ...]] = []
    for _ in range(OPS):
        kind = rnd.choice(["write", "write", "write", "read", "read", "erase", "erase",
                           "sync"])
        near_end = rnd.random() < 0.08
        if kind == "erase":
            if rnd.random() < 0.7:
                first = rnd.randrange(size // erasesize)
                count = rnd.randint(1, 3)
                ops.append(("erase", first * erasesize, count * erasesize))
            else:  # page granular, or past the end
                start = rnd.randrange(size // PAGE_SIZE) * PAGE_SIZE
                ops.append(("erase", start, rnd.randint(1, 40) * PAGE_SIZE))
            continue
        if kind == "sync":
            ops.append(("sync",))
            continue
        length = rnd.choice([1, 7, 512, PAGE_SIZE - 1, PAGE_SIZE, 3 * PAGE_SIZE + 5,
                             erasesize, rnd.randint(1, 5 * PAGE_SIZE)])
        offset = (size - rnd.randint(0, 2 * length) if near_end
                  else rnd.randrange(0, size - length))
        if kind == "write":
            # unchanged bytes, 0xFF and random data: the cases block2mtd treats apart
            fill = rnd.choice([b"\xff", b"\x00", None])
            data = fill * length if fill else rnd.randbytes(length)
            ops.append(("write", offset, data))
        else:
            ops.append(("read", offset, length))
    return ops


def apply(device: MTDDevice, op: tuple[Any, ...]) -> tuple[str, Any]:
    name, *args = op
    return outcome(getattr(device, name), *args)


def contents(device: MTDDevice) -> list[str]:
    """The device's bytes, one digest per eraseblock (short failure messages)."""
    return [hashlib.sha256(device.read(off, device.erasesize)).hexdigest()[:16]
            for off in range(0, device.size, device.erasesize)]


def test_geometry_matches(kernel_block2mtd: MTDDevice, block2mtd: MTDDevice) -> None:
    fields = ("type", "flags", "size", "erasesize", "writesize", "oobsize")
    assert {f: getattr(block2mtd, f) for f in fields} == \
        {f: getattr(kernel_block2mtd, f) for f in fields}


@pytest.mark.parametrize("seed", SEEDS)
def test_same_operations_same_results(kernel_block2mtd: MTDDevice, block2mtd: MTDDevice,
                                      seed: int) -> None:
    for device in (kernel_block2mtd, block2mtd):  # the same start: all erased
        device.erase(0, device.size)
    ops = operations(seed, block2mtd.size, block2mtd.erasesize)
    for i, op in enumerate(ops):
        kernel, reference = apply(kernel_block2mtd, op), apply(block2mtd, op)
        shown = op if op[0] != "write" else (op[0], op[1], f"<{len(op[2])} bytes>")
        assert reference == kernel, f"op {i} {shown}: reference {reference}, kernel {kernel}"
    kernel_block2mtd.sync()
    block2mtd.sync()
    assert contents(block2mtd) == contents(kernel_block2mtd)
