"""``--folio-mtd`` end to end: bad input is a one-line usage error (exit code 4), and the
fixtures hand out the chosen target at the right folio orders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_mtd"

USES_DEVICE = """
def test_device(mtd_device):
    assert mtd_device.size > 0
"""


def _usage_error(pytester: pytest.Pytester, *args: str) -> str:
    pytester.makepyfile(USES_DEVICE)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1, errors  # one line, no traceback
    assert errors[0].startswith("ERROR: ")
    return errors[0][len("ERROR: "):]


def test_unknown_spec(pytester: pytest.Pytester) -> None:
    message = _usage_error(pytester, "--folio-mtd", "nonsense")
    assert message.startswith("--folio-mtd: unknown target 'nonsense': expected reference")


def test_unknown_knob_names_the_valid_ones(pytester: pytest.Pytester) -> None:
    message = _usage_error(pytester, "--folio-mtd", "reference:apl=page")
    assert message == ("--folio-mtd: unknown knob 'apl' for the reference device; "
                       "valid knobs: api=folio|page, retry=on|off")


def test_bad_knob_value(pytester: pytest.Pytester) -> None:
    message = _usage_error(pytester, "--folio-mtd", "reference:retry=maybe")
    assert message == "--folio-mtd: retry='maybe' is not one of on|off"


def test_path_that_is_not_an_mtd_device(pytester: pytest.Pytester) -> None:
    fake = pytester.path / "mtd0"
    fake.write_bytes(b"\xff" * 4096)
    message = _usage_error(pytester, "--folio-mtd", str(fake))
    assert message.startswith(
        f"--folio-mtd: {fake} is not an MTD character device (major 90): it is a regular file")


def test_missing_device_path(pytester: pytest.Pytester) -> None:
    message = _usage_error(pytester, "--folio-mtd", "/dev/mtd97")
    assert message.startswith("--folio-mtd: cannot use /dev/mtd97: No such file or directory")


def test_unimportable_factory(pytester: pytest.Pytester) -> None:
    message = _usage_error(pytester, "--folio-mtd", "no_such_module_here:factory")
    assert message == ("--folio-mtd: cannot import factory 'no_such_module_here:factory': "
                       "ModuleNotFoundError: No module named 'no_such_module_here'")


def test_erasesize_not_dividing_the_size(pytester: pytest.Pytester) -> None:
    message = _usage_error(pytester, "--folio-mtd-size", "1M", "--folio-erasesize", "192K")
    assert message == ("--folio-erasesize: erasesize 192K does not divide the device size 1M "
                       "(--folio-mtd-size)")


def test_the_users_factory_gets_the_geometry_and_runs_per_order(
        pytester: pytest.Pytester) -> None:
    shutil.copy(EXAMPLE / "nor_flash.py", pytester.path / "nor_flash.py")
    pytester.makepyfile(mydev="""
        from nor_flash import NorFlash
        CALLS = []
        def factory(size, erasesize, folio_order):
            CALLS.append((size, erasesize, folio_order))
            return NorFlash(size, erasesize)
    """)
    pytester.makepyfile(test_it="""
        import mydev
        def test_device(mtd_device, request):
            assert mtd_device.size == 1 << 20
            order = {"4K": 0, "16K": 2}[request.node.callspec.id]
            assert mydev.CALLS[-1] == (1 << 20, 64 << 10, order)
    """)
    pytester.syspathinsert()
    result = pytester.runpytest("--folio-mtd", "mydev:factory",
                                "--folio-orders", "0,2", "--folio-mtd-size", "1M",
                                "--folio-erasesize", "64K", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_device?4K? PASSED*", "*test_device?16K? PASSED*"])


def test_the_example_runs_through_its_ini(pytester: pytest.Pytester) -> None:
    for name in ("nor_flash.py", "pytest.ini", "test_nor_flash.py"):
        shutil.copy(EXAMPLE / name, pytester.path / name)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_reference_knobs_reach_both_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        from pytest_folio.model.constants import PAGE_SIZE

        def test_block2mtd(block2mtd, folio_order):
            assert (block2mtd.api, block2mtd.retry) == ("page", False)
            assert block2mtd.bdev.logical_block_size == PAGE_SIZE << folio_order
            assert (block2mtd.size, block2mtd.erasesize) == (2 << 20, 256 << 10)

        def test_device(mtd_device):
            assert (mtd_device.api, mtd_device.retry) == ("page", False)

        def test_device_follows_the_order(mtd_device, folio_order):
            assert mtd_device.bdev.logical_block_size == PAGE_SIZE << folio_order
    """)
    result = pytester.runpytest("--folio-mtd", "reference:api=page,retry=off",
                                "--folio-mtd-size", "2M", "--folio-erasesize", "256K",
                                "--folio-orders", "0,4", "-v")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*test_block2mtd?4K? PASSED*", "*test_block2mtd?64K? PASSED*",
                                 "*test_device?4K? PASSED*", "*test_device?64K? PASSED*",
                                 "*test_device_follows_the_order?4K? PASSED*"])


def test_block2mtd_defaults_when_the_target_is_not_the_reference(
        pytester: pytest.Pytester) -> None:
    shutil.copy(EXAMPLE / "nor_flash.py", pytester.path / "nor_flash.py")
    pytester.makepyfile("""
        def test_block2mtd(block2mtd):
            assert (block2mtd.api, block2mtd.retry) == ("folio", True)
            assert block2mtd.name.startswith("block2mtd: ")
    """)
    pytester.syspathinsert()
    result = pytester.runpytest("--folio-mtd", "nor_flash:factory", "--folio-orders", "2")
    result.assert_outcomes(passed=1)


def test_a_size_the_folio_size_does_not_divide_is_a_usage_error_before_any_test(
        pytester: pytest.Pytester) -> None:
    message = _usage_error(pytester, "--folio-mtd-size", "1M", "--folio-erasesize", "128K",
                           "--folio-orders", "0,9")
    assert message == ("--folio-mtd-size: the MTD size 1M is not a multiple of the 2M folios "
                       "of order 9 (--folio-orders)")


def test_a_marked_order_the_size_cannot_hold_fails_that_test_in_one_line(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.folio_orders(0, 9)
        def test_device(mtd_device, folio_order):
            pass
    """)
    result = pytester.runpytest("--folio-mtd-size", "1M", "--folio-erasesize", "128K")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        "*--folio-mtd reference:api=folio,retry=on at 2M folios: block device size 1048576 "
        "must be a positive multiple of its logical block size 2M"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_an_erasesize_that_does_not_divide_the_device_is_a_usage_error(
        pytester: pytest.Pytester) -> None:
    message = _usage_error(pytester, "--folio-erasesizes", "4K,48K")
    assert message == "--folio-erasesizes: erasesize 48K does not divide the device size 16M"


def test_the_mtd_oracle_must_be_the_reference(pytester: pytest.Pytester) -> None:
    message = _usage_error(pytester, f"--folio-mtd-oracle={EXAMPLE}")
    assert message.startswith("--folio-mtd-oracle: ")


def test_an_mtd_log_that_does_not_parse_is_a_usage_error(pytester: pytest.Pytester) -> None:
    log = pytester.path / "bad.mtdops"
    log.write_text("read 0 16\nerase 0\n")
    message = _usage_error(pytester, f"--folio-mtd-replay={log}")
    assert message.startswith("--folio-mtd-replay: line 2: not an operation: 'erase 0'")


MARKED = """
import pytest

@pytest.mark.folio_erasesizes
def test_device(mtd_device):
    assert mtd_device.size % mtd_device.erasesize == 0
"""


def test_marked_tests_run_smaller_equal_and_larger_eraseblocks_than_the_folio(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(MARKED)
    result = pytester.runpytest("-p", "pytest_folio", "--folio-orders", "0,4", "-v")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*test_device?4K-eb4K? PASSED*", "*test_device?4K-eb128K?*",
                                 "*test_device?64K-eb16K?*", "*test_device?64K-eb64K?*",
                                 "*test_device?64K-eb128K?*"])


def test_folio_erasesizes_sets_the_list_for_every_order(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(MARKED)
    result = pytester.runpytest("-p", "pytest_folio", "--folio-orders", "0,2",
                                "--folio-erasesizes", "8K", "-v")
    result.stdout.fnmatch_lines(["*test_device?4K-eb8K? PASSED*", "*test_device?16K-eb8K?*"])
    result.assert_outcomes(passed=2)
