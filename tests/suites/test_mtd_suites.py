"""The suite base classes under pytest: broken devices are caught, correct ones pass,
measurements are announced, and writing suites skip where they may not write."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from pytest_folio.measurement import Measurement
from pytest_folio.params import MTDParam, default_erasesizes
from tests.helpers import CHECKOUT, run_result, subprocess_env
from tests.helpers.mtd_devices import BROKEN, EDGE_BUGS, UNNAMED_BUGS
from tests.helpers.shared import SessionResults

POWER_CUT_TESTS = {
    'test_power_cut_after_every_sync_keeps_what_was_synced',
    'test_power_cut_between_writes_reads_old_or_new',
    'test_power_cut_after_erases_leaves_each_erase_done_or_not'}
# Which default tests must fail for each bug class (and no others).
CAUGHT_BY = {
    'erase_fills_zero': {'test_mtd_fsx', 'test_stress', 'test_torture'},
    'readonly_accepts_writes': {
        'test_readonly_device_refuses_every_write_and_erase', 'test_readonly_refuses_writes'},
    'off_by_one_page_at_eraseblock_end': {'test_mtd_fsx', 'test_speed', 'test_torture'},
    'erase_wrong_block': {'test_mtd_fsx', 'test_stress'},
    'short_read_at_folio_boundary': {
        'test_mtd_fsx', 'test_read', 'test_speed', 'test_stress', 'test_torture'},
    'lost_write_on_folio_drop': {'test_mtd_fsx', 'test_speed', 'test_stress', 'test_torture'},
    'stale_cache_after_erase': {'test_mtd_fsx', 'test_stress', 'test_torture'},
    'partial_last_page_write': {'test_mtd_fsx', 'test_speed', 'test_stress'},
    'aliasing_offset': {'test_mtd_fsx', 'test_stress'},
    'out_of_range_wraps': {'test_mtd_fsx', 'test_out_of_range_is_einval'},
    'eviction_drops_dirty': {'test_mtd_fsx', 'test_speed', 'test_stress', 'test_torture'},
    'whole_folio_write_not_read_not_dirty': {'test_mtd_fsx'},
    'eviction_writes_back_at_the_new_index': {
        'test_mtd_fsx', 'test_speed', 'test_stress', 'test_torture'},
    'writeback_writes_one_page': {'test_mtd_fsx', 'test_speed', 'test_stress', 'test_torture'},
    'writeback_at_page_index': {'test_mtd_fsx', 'test_speed', 'test_stress', 'test_torture'},
    'read_folio_at_page_index': {'test_mtd_fsx', 'test_speed', 'test_stress', 'test_torture'},
    'sync_clears_dirty_without_writing': {'test_mtd_fsx'},
    'sync_skips_the_newest_folio': {'test_mtd_fsx'},
    'reopen_without_writeback': {'test_mtd_fsx'},
    'partial_folio_write_skips_the_read': {'test_mtd_fsx', 'test_stress'},
    'partial_folio_write_of_a_page_skips_the_read': {'test_mtd_fsx', 'test_stress'},
    'partial_write_not_dirty': {'test_mtd_fsx', 'test_speed', 'test_stress'},
    'erased_looking_write_not_dirty': {'test_mtd_fsx'},
    'zero_pages_treated_as_holes': {'test_mtd_fsx'},
    'unchanged_check_looks_at_the_first_page': {'test_mtd_fsx'},
    'unchanged_check_against_the_store': {'test_mtd_fsx'},
    'erase_shortcut_looks_at_the_first_page': {'test_mtd_fsx'},
    'erase_shortcut_checks_the_store': {'test_mtd_fsx'},
    'erase_not_dirty': {'test_mtd_fsx', 'test_stress', 'test_torture'},
    'erase_only_cached_folios': {'test_mtd_fsx', 'test_stress', 'test_torture'},
    'erase_whole_folios': {'test_mtd_fsx'},
    'multi_block_erase_erases_the_first': {'test_mtd_fsx'},
    'erase_batch_of_four': {'test_mtd_fsx'},
    'multi_block_erase_skips_the_last': {'test_mtd_fsx'},
    'erase_of_the_last_block_is_einval': {
        'test_mtd_fsx', 'test_speed', 'test_stress', 'test_torture'},
    'read_ending_at_the_last_byte_is_einval': {
        'test_mtd_fsx', 'test_out_of_range_is_einval', 'test_read',
        'test_readonly_device_refuses_every_write_and_erase', 'test_speed', 'test_stress',
        'test_torture'},
    'write_ending_at_the_last_byte_is_einval': {'test_mtd_fsx', 'test_speed', 'test_torture'},
    'read_across_folios_repeats_the_first': {'test_mtd_fsx', 'test_speed', 'test_stress'},
    'write_across_folios_wraps_in_the_first': {
        'test_mtd_fsx', 'test_speed', 'test_stress', 'test_torture'},
    'whole_folio_reads_bypass_the_cache': {
        'test_mtd_fsx', 'test_speed', 'test_stress', 'test_torture'},
    'zero_length_read_returns_the_folio': {'test_mtd_fsx'},
    'unaligned_write_rounded_down': {'test_mtd_fsx'},
    'readonly_still_erases': {'test_readonly_device_refuses_every_write_and_erase'},
    'readonly_refuses_only_at_writeback': {
        'test_readonly_device_refuses_every_write_and_erase'},
    # the interface's edges, and kinds no issue named (tests.helpers.mtd_devices)
    'partial_last_folio_read_as_zeroes': {'test_mtd_fsx'},
    'partial_last_folio_not_written_back': {'test_mtd_fsx'},
    'last_partial_folio_out_of_range': {'test_mtd_fsx'},
    'zero_length_erase_is_einval': {'test_mtd_fsx'},
    'zero_length_erase_erases_a_block': {'test_mtd_fsx'},
    'zero_length_write_at_the_end_is_einval': {'test_mtd_fsx'},
    'zero_length_read_at_the_end_is_einval': {'test_mtd_fsx'},
    'unaligned_erase_rounds_out_to_eraseblocks': {'test_mtd_fsx'},
    'unaligned_erase_rounds_out_to_folios': {'test_mtd_fsx'},
    'unaligned_erase_skips_part_pages': {'test_mtd_fsx'},
    'unaligned_erase_refused_across_eraseblocks': {'test_mtd_fsx'},
    'drop_caches_drops_dirty': {'test_mtd_fsx'},
    'cold_read_bypasses_the_cache': {'test_mtd_fsx', 'test_stress'},
    # a view is one only once it changes: never on a device nobody may write
    'read_returns_a_view_of_the_folio': {'test_mtd_fsx'},
    'read_rounded_up_to_the_page': {
        'test_mtd_fsx', 'test_out_of_range_is_einval', 'test_read',
        'test_readonly_device_refuses_every_write_and_erase', 'test_speed', 'test_stress'},
    'zero_length_read_returns_none': {'test_mtd_fsx'},
    'write_across_eraseblocks_stops_at_the_boundary': {'test_mtd_fsx', 'test_stress'},
    'whole_device_erase_skips_the_last_block': {'test_mtd_fsx'},
    'sync_stops_at_the_first_clean_folio': {'test_mtd_fsx'},
    'worn_eraseblock_stops_erasing': {'test_mtd_fsx', 'test_stress'},
    # the state after a failed call (issue 32)
    'past_the_end_write_stores_its_first_part': {'test_mtd_fsx'},
    # crash-only: caught by the power-cut suites and by nothing else
    'sync_without_flush': POWER_CUT_TESTS,
    'sync_writes_the_wrong_pages': POWER_CUT_TESTS,
    'erase_queued_past_sync': POWER_CUT_TESTS,
    # durability bugs: every power-cut test catches them, at the device's end or past 1 MiB
    'writeback_drops_the_last_byte': POWER_CUT_TESTS | {
        'test_mtd_fsx', 'test_torture', 'test_speed'},
    'sync_stops_at_1mib': POWER_CUT_TESTS | {'test_mtd_fsx'},
}

# Devices opened as --folio-mtd=tests.helpers.mtd_devices:NAME opens them, at each geometry
# below; the others are one object each.
FACTORIES = {**{bug: cls.__name__ for bug, cls in BROKEN.items()}, "ram": "RamMTD",
             "cached": "CachedRamMTD", "foliocache": "FolioCacheMTD", "powercut": "PowerCutMTD",
             "pageerase": "PageEraseMTD"}
DEVICES = {
    "nand": "NandRamMTD()",
    "rom": "RamMTD(type=mtd_devices.MTD_ROM, flags=mtd_devices.MTD_CAP_ROM)",
    "real": "RamMTD(); dev.is_real_device = True",
}
# 16K folios at the default erasesizes for them: smaller, equal, larger
SIZE, ERASESIZE = 2 << 20, 128 << 10
GEOMETRIES = [MTDParam(2, e) for e in default_erasesizes(2, ERASESIZE, SIZE)]

# mtd_fsx_shrink_seconds: the catalogue counts which tests fail; shrinking the random
# run's failure only shortens its printed log (tests/mtdtests/test_mtd_fsx.py shows it
# does), and the catalogue's slowest devices spent up to 20 s at each geometry on it.
TUNING = """
    stress_seed = 5
    stress_count = 600
    torture_cycles = 3
    speed_passes = 1
    powercut_seed = 1
    mtd_fsx_shrink_seconds = 0
"""

CLASS = """
class Test_{key}(MTDTests):
""" + TUNING + """
    @pytest.fixture
    def mtd_device(self):
        dev = mtd_devices.{factory}
        yield dev
        dev.close()
"""

FACTORY_CLASS = """
class Test_{key}(MTDTests):
""" + TUNING + """
    user_spec = "tests.helpers.mtd_devices:{factory}"

    @pytest.fixture
    def mtd_device(self, request):
        yield from user_device(self.user_spec, request)
"""

# What --folio-mtd=tests.helpers.mtd_devices:NAME does, for many devices in one process: the tests
# marked folio_erasesizes run at each geometry, the others at the default erasesize.
PRELUDE = f"""
import pytest
from tests.helpers import mtd_devices
from pytest_folio.fixtures.mtd import MTD_OPENER_KEY, MTDOpener
from pytest_folio.params import MTDParam
from pytest_folio.suites.mtd import MTDTests
from pytest_folio.targets.mtd import resolve_mtd_target

GEOMETRIES = {GEOMETRIES!r}


def pytest_generate_tests(metafunc):
    if hasattr(metafunc.cls, "user_spec"):
        params = (GEOMETRIES if metafunc.definition.get_closest_marker("folio_erasesizes")
                  else [MTDParam(2)])
        metafunc.parametrize("mtd_device", params, indirect=True, ids=[p.id for p in params])


def user_device(spec, request):
    param = request.param
    opener = MTDOpener(resolve_mtd_target(spec), {SIZE}, param.erasesize or {ERASESIZE},
                       param.folio_order, False, several_erasesizes=param.erasesize is not None)
    request.node.stash[MTD_OPENER_KEY] = opener
    with opener.open() as dev:
        yield dev
"""

Outcomes = dict[str, dict[str, str]]


# plugins the inner runs do not need, each costing a second or two of start-up
QUICK = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark")


def run_suites(directory: Path, devices: dict[str, str], *args: str,
               factories: dict[str, str] | None = None) -> tuple[Outcomes, str]:
    """One pytest process with a suite class per device: ({device: {test: outcome}}, output),
    where a test fails when it fails at any geometry.

    A separate process, because the devices module and the plugin must be imported fresh.
    """
    source = PRELUDE + "".join(CLASS.format(key=key, factory=factory)
                               for key, factory in devices.items())
    source += "".join(FACTORY_CLASS.format(key=key, factory=factory)
                      for key, factory in (factories or {}).items())
    (directory / "test_devices.py").write_text(source)
    env = subprocess_env()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "pytest_folio", *QUICK,
         "-rs", "--junitxml=results.xml", "--folio-orders", "0", "test_devices.py", *args],
        cwd=directory, env=env, capture_output=True, text=True, timeout=900)
    outcomes: Outcomes = {}
    for case in ElementTree.parse(directory / "results.xml").iter("testcase"):
        key = case.attrib["classname"].rsplit(".Test_", 1)[1]
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed", "error": "error"}.get(tag, tag)
        tests = outcomes.setdefault(key, {})
        name = case.attrib["name"].split("[")[0]
        if tests.get(name) not in ("failed", "error"):
            tests[name] = outcome
    return outcomes, proc.stdout + proc.stderr


def _split(names: list[str], parts: int) -> list[tuple[str, ...]]:
    size = -(-len(names) // parts)
    return [tuple(names[i:i + size]) for i in range(0, len(names), size)]


# The edge classes and the unnamed kinds, each caught by the differential test alone:
# test_mtd_fsx against the reference (--folio-mtd-oracle=reference).
DIFFERENTIAL = sorted({*EDGE_BUGS, *UNNAMED_BUGS})
# The devices in a few groups, one inner run each, run once per session by whichever
# worker needs the group first; a worker whose group another is running runs one the
# session needs later meanwhile (tests.helpers.shared: under xdist each worker ran every
# group its tests read, and xdist hands the items out round-robin). The correct devices
# share a group, whose output the tests read.
CORRECT_GROUP = (*DEVICES, "ram", "cached", "foliocache", "powercut", "pageerase")
_BUGS = sorted(BROKEN)
GROUPS = {"catalogue": [CORRECT_GROUP, *_split(_BUGS, 5)],
          "differential": _split([*DIFFERENTIAL, "pageerase"], 3)}
# what a test that names no device reads: the correct group's output (nand, rom, real)
GROUP_READ_BY_DEFAULT = {"catalogue": "ram", "differential": "pageerase"}
Catalogue = Callable[[str], tuple[Outcomes, str]]


def _group_key(kind: str, device: str) -> str:
    return f"{kind}{next(i for i, g in enumerate(GROUPS[kind]) if device in g)}"


def _run_group(directory: Path, key: str) -> tuple[Outcomes, str]:
    kind = key.rstrip("0123456789")
    group = GROUPS[kind][int(key.removeprefix(kind))]
    factories = {k: FACTORIES[k] for k in group if k in FACTORIES}
    if kind == "differential":
        return run_suites(directory, {}, "--folio-mtd-oracle=reference",
                          "-k", "test_mtd_fsx and not hypothesis", factories=factories)
    # The Hypothesis form shrinks what the random run finds (its own tests show that);
    # the catalogue counts what the rest of the default suites catch.
    return run_suites(directory, {k: DEVICES[k] for k in group if k in DEVICES},
                      "-k", "not hypothesis", factories=factories)


@pytest.fixture(scope="session")
def suite_runs(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> SessionResults:
    """The groups' inner runs, each once per session: the groups this session's tests
    read, found from the device each names."""
    needed = []
    for item in request.session.items:
        params = getattr(item, "callspec", None)
        for kind in GROUPS:
            if kind in getattr(item, "fixturenames", ()):
                device = (params.params.get("bug", params.params.get("device"))
                          if params else None) or GROUP_READ_BY_DEFAULT[kind]
                needed.append(_group_key(kind, device))
    return SessionResults(tmp_path_factory, "mtd-suites",
                          lambda key: _run_group(tmp_path_factory.mktemp(key), key), needed)


@pytest.fixture
def catalogue(suite_runs: SessionResults) -> Catalogue:
    """``catalogue(device)``: the outcomes and output of the default suites' run over
    the group holding ``device``."""
    def outcomes(device: str) -> tuple[Outcomes, str]:
        found, output = suite_runs.get(_group_key("catalogue", device))
        return found, output

    return outcomes


@pytest.mark.parametrize("bug", _BUGS)
def test_each_broken_device_is_caught_by_the_default_suites(
        catalogue: Catalogue, bug: str) -> None:
    outcomes, output = catalogue(bug)
    failed = {name for name, outcome in outcomes[bug].items() if outcome == "failed"}
    assert failed == CAUGHT_BY[bug], output[-3000:]


@pytest.fixture
def differential(suite_runs: SessionResults) -> Catalogue:
    """``differential(device)``: test_mtd_fsx's outcomes against the reference for the
    group holding ``device``."""
    def outcomes(device: str) -> tuple[Outcomes, str]:
        found, output = suite_runs.get(_group_key("differential", device))
        return found, output

    return outcomes


@pytest.mark.parametrize("bug", DIFFERENTIAL)
def test_each_edge_bug_is_caught_by_the_differential_test_alone(
        differential: Catalogue, bug: str) -> None:
    outcomes, output = differential(bug)
    assert outcomes[bug] == {"test_mtd_fsx": "failed"}, output[-3000:]


def test_the_differential_test_passes_a_device_that_erases_pages(
        differential: Catalogue) -> None:
    outcomes, output = differential("pageerase")
    assert outcomes["pageerase"] == {"test_mtd_fsx": "passed"}, output[-3000:]


@pytest.mark.parametrize("device", ["ram", "cached", "foliocache", "powercut", "pageerase"])
def test_correct_devices_pass_every_suite(catalogue: Catalogue, device: str) -> None:
    outcomes, output = catalogue(device)
    # only FolioCacheMTD (and PowerCutMTD, PageEraseMTD) take readonly=True; the others
    # return writeable devices for it; only PowerCutMTD can lose power
    readonly = "passed" if device in ("foliocache", "powercut", "pageerase") else "skipped"
    power = "passed" if device == "powercut" else "skipped"
    assert outcomes[device] == {**dict.fromkeys(POWER_CUT_TESTS, power),
        "test_read": "passed", "test_out_of_range_is_einval": "passed",
        "test_readonly_refuses_writes": "skipped", "test_speed": "passed",
        "test_stress": "passed", "test_torture": "passed", "test_pagetest": "skipped",
        "test_subpagetest": "skipped", "test_oobtest": "skipped",
        "test_nandbiterrs": "skipped", "test_mtd_fsx": "passed",
        "test_readonly_device_refuses_every_write_and_erase": readonly}, output
    assert "mtd_pagetest: this test requires NAND flash" in output
    assert "mtd_oobtest: this test requires NAND flash" in output
    assert ("tests.helpers.mtd_devices:RamMTD returned a writeable device for readonly=True"
            in output)
    assert "ram cannot lose power here: it has no power_cut() (the PowerCut capability)" in output


def test_the_catalogue_has_thirty_bugs_and_the_default_suites_catch_them_all() -> None:
    assert len(BROKEN) >= 30
    assert set(CAUGHT_BY) == set(BROKEN) and all(CAUGHT_BY.values())


def test_nand_device_runs_the_page_test(catalogue: Catalogue) -> None:
    outcomes, output = catalogue("nand")
    assert outcomes["nand"]["test_pagetest"] == "passed"
    assert outcomes["nand"]["test_mtd_fsx"] == "passed"
    assert outcomes["nand"]["test_oobtest"] == "skipped"
    assert "mtd_oobtest: needs OOB access" in output


def test_readonly_device_skips_writers_and_passes_the_readonly_check(
        catalogue: Catalogue) -> None:
    outcomes, output = catalogue("rom")
    assert outcomes["rom"]["test_readonly_refuses_writes"] == "passed"
    assert outcomes["rom"]["test_speed"] == outcomes["rom"]["test_torture"] == "skipped"
    assert "ram is read-only (MTD_WRITEABLE is not set)" in output


def test_real_device_suites_that_write_skip_without_consent(
        catalogue: Catalogue, tmp_path: Path) -> None:
    outcomes, output = catalogue("real")
    for name in ("test_speed", "test_stress", "test_torture"):
        assert outcomes["real"][name] == "skipped"
    assert outcomes["real"]["test_read"] == "passed"
    assert ("ram is a real device and this suite erases and writes it; pass "
            "--folio-allow-destructive to allow it") in output
    allowed, _ = run_suites(tmp_path, {"real": DEVICES["real"]}, "--folio-allow-destructive")
    assert {allowed["real"][n] for n in ("test_speed", "test_stress", "test_torture")} == {
        "passed"}


class _Collector:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Measurement]] = []

    def pytest_folio_measurement(self, item: Any, measurement: Measurement) -> None:
        self.seen.append((item.nodeid, measurement))


def test_speed_announces_one_measurement_per_row_with_the_folio_size(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_speed="""
import pytest
from tests.helpers import mtd_devices
from pytest_folio.suites.mtd import MTDSpeedSuite

class TestSpeed(MTDSpeedSuite):
    speed_passes = 2

    @pytest.fixture
    def mtd_device(self, folio_order):
        return mtd_devices.CachedRamMTD(folio_order=folio_order)
""")
    collector = _Collector()
    result = pytester.runpytest("-p", "pytest_folio", "--folio-orders", "0,2",
                                "--folio-mtd", "reference:retry=off,api=page", "-rP",
                                plugins=[collector])
    result.assert_outcomes(passed=2)
    assert len(collector.seen) == 2 * 14
    nodeid, m = collector.seen[0]
    assert nodeid.endswith("test_speed[4K]")
    assert (m.suite, m.name, m.unit, m.params, m.target) == (
        "mtd_speedtest", "Eraseblock write (64 KiB)", "ms", {"folio": "4K"},
        "reference:api=page,retry=off")
    assert len(m.samples) == 2 and m.extra["bytes"] == 2 << 20
    assert collector.seen[14][1].params == {"folio": "16K"}
    assert collector.seen[13][1].name == "Erase, already erased"
    result.stdout.fnmatch_lines(["mtd_speedtest: cachedram [16K]",
                                 "Test * ms/pass * KiB/s",
                                 "Eraseblock write (64 KiB) *"])


def test_ready_to_run_suites_pass_on_the_example_user_device() -> None:
    example = CHECKOUT / "examples" / "own_mtd"
    env = subprocess_env()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *QUICK, "--pyargs", "pytest_folio.suites",
         "-k", "mtd and not kernel_mtd", "-q", "-rs"],
        cwd=example, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    # at 4K folios with 64K eraseblocks: fsx and its Hypothesis form at eb 4K and 64K;
    # the NOR factory takes no readonly=, so the read-only checks skip, it has no
    # power_cut(), so the three power-cut tests skip (at both eraseblock sizes), and no
    # drop_caches(), so the invalidate race skips
    run_result(proc).assert_outcomes(passed=12, skipped=18)
    assert "block2mtd checks need the reference block2mtd" in proc.stdout


def test_a_suite_parameter_that_does_not_fit_fails_in_one_line(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad_param="""
import pytest
from tests.helpers import mtd_devices
from pytest_folio.suites.mtd import MTDTortureSuite

class TestTorture(MTDTortureSuite):
    torture_eb = 1000

    @pytest.fixture
    def mtd_device(self):
        return mtd_devices.RamMTD()
""")
    result = pytester.runpytest("-p", "pytest_folio", "--folio-orders", "0")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*mtd_torturetest: eraseblocks 1000..1031 are outside the device (0..31)"])
    result.stdout.no_fnmatch_line("*Traceback*")
