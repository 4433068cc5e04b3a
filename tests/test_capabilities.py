"""The optional calls a target offers: the table, ``python -m pytest_folio check SPEC``
and the header line for a factory's target."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from pytest_folio.cli import main
from pytest_folio.targets.capabilities import CAPABILITIES, lacking_line, offered, takes_readonly
from tests.helpers import CHECKOUT, subprocess_env
from tests.helpers.mtd_devices import FolioCacheMTD, RamMTD


def test_every_capability_names_an_existing_protocol_or_attribute() -> None:
    from pytest_folio.targets import protocols

    for capability in CAPABILITIES:
        assert capability.kind in ("mtd", "fs") and capability.unlocks and capability.without
        protocol = getattr(protocols, capability.protocol, None)
        if protocol is not None:
            assert capability.attribute in protocols.protocol_members(protocol)


def test_offered_tells_the_devices_apart() -> None:
    ram = {c.name: has for c, has in offered(RamMTD(), "mtd", RamMTD)}
    cache = {c.name: has for c, has in offered(FolioCacheMTD(), "mtd", FolioCacheMTD)}
    assert not ram["reopen()"] and cache["reopen()"]
    assert takes_readonly(FolioCacheMTD) and not takes_readonly(lambda size: None)
    assert lacking_line([(CAPABILITIES[0], True)]) == "offers every optional call"


def test_check_prints_what_a_factorys_device_offers(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert main(["check", "tests.helpers.mtd_devices:FolioCacheMTD", "--size=1M",
                 "--erasesize=64K"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("--folio-mtd=tests.helpers.mtd_devices:FolioCacheMTD: an MTD device "
                      "(FolioCacheMTD 'foliocache'): size 1M, erasesize 64K, writesize 1, "
                      "oobsize 0")
    rows = {line.split()[0]: line.split()[1] for line in out[2:]}
    assert rows["reopen()"] == "yes" and rows["stats.snapshot()"] == "no"


def test_check_finds_the_kind_and_refuses_a_bad_target_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "tests.helpers.fsx_broken:PassThrough.factory"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--folio-fs=tests.helpers.fsx_broken:PassThrough.factory: a file "
                          "system")
    assert "\nmmap_read(), mmap_write()  " in out and "\ndrop_caches(path)  " in out
    assert main(["check", "--mtd", "tests.helpers.fsx_broken:PassThrough.factory"]) == 2
    err = capsys.readouterr().err
    assert err == ("python -m pytest_folio check: error: --folio-mtd: factory "
                   "tests.helpers.fsx_broken:PassThrough.factory needs blocksize, which the "
                   "plugin does not pass: it calls the factory with the keywords size, "
                   "erasesize, folio_order, readonly (those it takes, or all of them to "
                   "**kwargs)\n")


def test_check_takes_about_a_second_of_cpu() -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "pytest_folio", "check", "reference"],
                          cwd=CHECKOUT, env=subprocess_env(), capture_output=True,
                          text=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stderr
    assert "--folio-mtd=reference" in proc.stdout and "--folio-fs=reference" in proc.stdout
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 3, cpu      # CPU time: wall-clock time depends on the machine's load


def test_the_header_says_what_a_factorys_target_lacks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(mtd_device):\n    pass\n")
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                "--folio-mtd=tests.helpers.mtd_devices:RamMTD",
                                "--folio-orders=0")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "folio: mtd tests.helpers.mtd_devices:RamMTD lacks:",
        "    reopen() (fsx for flash never reopens the device)",
        "    power_cut() (*"])
