"""The plugin as users meet it: loading, parametrization and ids, markers, xdist, bad options."""

from __future__ import annotations

import pytest

ORDER_TEST = """
def test_order(folio_order):
    assert 0 <= folio_order <= 9
"""


def _ids(result: pytest.RunResult, name: str) -> list[str]:
    """The parametrization ids of ``name`` in a -v run's output, in order."""
    return [line.split("[", 1)[1].split("]", 1)[0] for line in result.outlines
            if f"::{name}[" in line and "PASSED" in line]


def test_autoloaded_through_the_entry_point(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(ORDER_TEST)
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    assert _ids(result, "test_order") == ["4K", "16K", "64K"]
    result.stdout.fnmatch_lines(["folio: orders 0,2,4 (4K,16K,64K), block sizes 4K,64K,2M*"])


def test_loaded_explicitly_with_p_when_autoload_is_off(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(ORDER_TEST)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    without = pytester.runpytest_subprocess()
    without.stdout.fnmatch_lines(["*fixture 'folio_order' not found*"])
    result = pytester.runpytest_subprocess("-p", "pytest_folio", "-v")
    result.assert_outcomes(passed=3)
    assert _ids(result, "test_order") == ["4K", "16K", "64K"]


def test_orders_and_block_sizes_from_the_command_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        def test_order(folio_order):
            pass

        def test_block(block_size):
            assert block_size & (block_size - 1) == 0
    """)
    result = pytester.runpytest("-v", "--folio-orders", "0,9", "--folio-block-sizes",
                                "4k 64KiB,2M")
    result.assert_outcomes(passed=5)
    assert _ids(result, "test_order") == ["4K", "2M"]
    assert _ids(result, "test_block") == ["4K", "64K", "2M"]


def test_ini_keys_set_the_lists(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfolio_orders = 1\nfolio_block_sizes = 16k\n")
    pytester.makepyfile("""
        def test_both(folio_order, block_size):
            assert (folio_order, block_size) == (1, 16384)
    """)
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_both[[]8K-16K[]] PASSED*"])


def test_markers_override_the_lists_and_pass_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.folio_orders(1, "3")
        def test_order(folio_order):
            assert folio_order in (1, 3)

        @pytest.mark.folio_block_sizes("2M", 4096)
        def test_block(block_size):
            assert block_size in (4096, 2 << 20)
    """)
    result = pytester.runpytest("-v", "--strict-markers")
    result.assert_outcomes(passed=4)
    assert _ids(result, "test_order") == ["8K", "32K"]
    assert _ids(result, "test_block") == ["2M", "4K"]


def test_every_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.folio_orders(*orders)*",
                                 "@pytest.mark.folio_block_sizes(*sizes)*"])


def test_model_fixtures_follow_the_order(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        from pytest_folio.model import PAGE_SIZE

        def test_page_cache(page_cache, folio_order):
            assert page_cache.mapping_min_folio_order() == folio_order

        def test_block_device(block_device, folio_order):
            assert block_device.logical_block_size == PAGE_SIZE << folio_order
            assert block_device.bd_mapping.mapping_min_folio_order() == folio_order
    """)
    result = pytester.runpytest("-v", "--folio-orders", "0,3,9")
    result.assert_outcomes(passed=6)
    assert _ids(result, "test_block_device") == ["4K", "32K", "2M"]


def test_same_collection_under_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        def test_order(folio_order, page_cache):
            page_cache.generic_perform_write(0, b"x")
            assert page_cache.filemap_read(0, 1) == b"x"

        @pytest.mark.folio_block_sizes("16k", "64k")
        def test_block(block_size):
            pass
    """)
    result = pytester.runpytest_subprocess("-n", "2", "-v", "--folio-orders", "0,4,9",
                                           "--strict-markers")
    result.assert_outcomes(passed=5)
    gathered = sorted(line.split("::", 1)[1].split(" ", 1)[0] for line in result.outlines
                      if "PASSED" in line and "::" in line)
    assert gathered == sorted(["test_order[4K]", "test_order[64K]", "test_order[2M]",
                               "test_block[16K]", "test_block[64K]"])


@pytest.mark.parametrize(("args", "env", "mode"), [
    (["-n", "2"], "", "worksteal"),
    (["-n", "2", "--dist", "load"], "", "load"),
    (["-n", "2"], "--dist=loadfile", "loadfile"),
    ([], "", "no"),
], ids=["implied", "given", "addopts", "serial"])
def test_n_without_dist_steals_work_and_a_given_dist_is_kept(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str],
        env: str, mode: str) -> None:
    pytester.makeconftest("""
        import pytest

        @pytest.hookimpl(trylast=True)
        def pytest_configure(config):
            if not hasattr(config, "workerinput"):
                print("dist mode:", config.option.dist)
    """)
    pytester.makepyfile("def test_a(): pass\ndef test_b(): pass\n")
    monkeypatch.setenv("PYTEST_ADDOPTS", env)
    result = pytester.runpytest_subprocess("-p", "pytest_folio", "-s", *args)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"dist mode: {mode}"])


@pytest.mark.parametrize(("args", "message"), [
    (["--folio-orders", "10"], "--folio-orders: folio order 10 is out of range 0..9*"),
    (["--folio-orders", "two"], "--folio-orders: not a folio order: 'two'*"),
    (["--folio-block-sizes", "3000"],
     "--folio-block-sizes: block size 3000 must be a power of two from 4K to 2M"),
    (["--folio-block-sizes", "4M"],
     "--folio-block-sizes: block size 4194304 must be a power of two from 4K to 2M"),
    (["--folio-block-sizes", "1k"],
     "--folio-block-sizes: block size 1024 must be a power of two from 4K to 2M"),
    (["--folio-erasesize", "48K"],
     "--folio-erasesize: erasesize 48K does not divide the device size 16M*"),
    (["--folio-fs="], "--folio-fs: needs a value, not an empty string"),
    (["--folio-mtd= "], "--folio-mtd: needs a value, not an empty string"),
    (["--folio-fs=~nosuchuser_folio/x"], "--folio-fs: cannot expand '~nosuchuser_folio/x'*"),
    (["--folio-orders=0,0"], "--folio-orders: folio order 0 is given twice ('0' and '0')"),
    (["--folio-block-sizes=4k,4096"],
     "--folio-block-sizes: block size 4K is given twice ('4k' and '4096')"),
    (["--folio-compare-fail=nan"], "--folio-compare-fail: takes a percentage of 0 or more*"),
    (["--folio-compare-fail=inf"], "--folio-compare-fail: takes a percentage of 0 or more*"),
    (["--folio-orders=9", "--folio-mtd-size=1M"],
     "--folio-mtd-size: the MTD size 1M is smaller than one 2M folio of order 9 "
     "(--folio-orders)"),
    (["--folio-fs=reference:memory=5000"],
     "--folio-fs: memory='5000': must be a positive multiple of the page size (4096)"),
    (["--folio-fs=reference:memory=100000T"],
     "--folio-fs: memory='100000T': cannot reserve 100000T of memory*"),
])
def test_bad_options_are_one_line_usage_errors(pytester: pytest.Pytester, args: list[str],
                                               message: str) -> None:
    pytester.makepyfile(ORDER_TEST)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1, errors
    assert errors[0].startswith("ERROR: ")
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_bad_marker_value_fails_collection_in_one_line(pytester: pytest.Pytester,
                                                       xdist: list[str]) -> None:
    """A marker is test code, not an option: its module fails to collect, with one line
    naming the test and the limit, and no traceback, serially and on xdist workers."""
    pytester.makepyfile("""
        import pytest

        @pytest.mark.folio_orders(12)
        def test_order(folio_order):
            pass

        @pytest.mark.folio_block_sizes("6k")
        def test_size(block_size):
            pass
    """)
    result = pytester.runpytest(*xdist)
    # serially pytest stops on the collection error (2); xdist reports it as failed (1)
    assert result.ret in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.TESTS_FAILED)
    result.assert_outcomes(errors=1 if not xdist else 2)
    result.stdout.fnmatch_lines(["*test_bad_marker_value*.py::test_order: marker "
                                 "folio_orders: folio order 12 is out of range 0..9*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "During handling" not in result.stdout.str()


def test_a_users_own_target_fixture_is_not_parametrized_behind_its_back(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        class TestOwn:
            @pytest.fixture
            def mtd_device(self):
                return "mine"

            @pytest.fixture
            def filesystem(self):
                return "mine"

            def test_own(self, mtd_device, filesystem):
                assert mtd_device == filesystem == "mine"

        def test_ours(mtd_device, filesystem):
            pass
    """)
    result = pytester.runpytest("-v", "--folio-orders=0,2", "--folio-block-sizes=4k")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*TestOwn::test_own PASSED*", "*test_ours?4K-4K? PASSED*",
                                 "*test_ours?16K-4K? PASSED*"])


@pytest.mark.parametrize(("ini", "message"), [
    ("folio_allow_destructive = maybe",
     "ini key folio_allow_destructive: 'maybe' is not a truth value (use true or false)"),
    ("folio_mtd = bogus", "ini key folio_mtd: unknown target 'bogus'*"),
    ("folio_fs =", "ini key folio_fs: needs a value, not an empty string"),
    ("folio_fs = reference:features=most",
     "ini key folio_fs: features='most' is not one of default|full"),
    ("folio_orders = 0,0", "ini key folio_orders: folio order 0 is given twice*"),
    ("folio_erasesize = 48K", "ini key folio_erasesize: erasesize 48K does not divide the "
     "device size 16M (--folio-mtd-size)"),
])
def test_bad_ini_values_name_the_ini_key(pytester: pytest.Pytester, ini: str,
                                         message: str) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(ORDER_TEST)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line.strip()] == [
        line for line in result.errlines if line.startswith("ERROR: ")]
    result.stderr.fnmatch_lines([f"ERROR: {message}"])


def test_the_command_line_wins_over_the_ini_key_and_is_named(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfolio_orders = 1\n")
    pytester.makepyfile(ORDER_TEST)
    result = pytester.runpytest("--folio-orders=11")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --folio-orders: folio order 11 is out of range*"])


def test_an_ini_flag_takes_the_usual_truth_values(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nfolio_allow_destructive = yes\n")
    pytester.makeconftest("""
        from pytest_folio.plugin import settings

        def pytest_report_header(config):
            return f"destructive={settings(config).allow_destructive}"
    """)
    pytester.makepyfile(ORDER_TEST)
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["destructive=True"])


@pytest.mark.parametrize(("marker", "message"), [
    ("folio_orders([0, 2])", "marker folio_orders: not a folio order: ?0, 2?*"),
    ("folio_orders(True)", "marker folio_orders: not a folio order: True*"),
    ("folio_orders(1, 1)", "marker folio_orders: folio order 1 is given twice*"),
    ("folio_orders()", "marker folio_orders: needs at least one value"),
    ("folio_orders(order=1)", "marker folio_orders: takes values only, not order=*"),
    ("folio_block_sizes(['4k'])", "marker folio_block_sizes: not a block size: ?'4k'?*"),
    ("folio_block_sizes(False)", "marker folio_block_sizes: not a block size: False*"),
    ("folio_block_sizes('4k', 4096)",
     "marker folio_block_sizes: block size 4K is given twice*"),
])
def test_a_marker_of_the_wrong_shape_is_one_line_naming_the_marker(
        pytester: pytest.Pytester, marker: str, message: str) -> None:
    argname = "folio_order" if "orders" in marker else "block_size"
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.{marker}
        def test_marked({argname}):
            pass
    """)
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*test_a_marker_of_the_wrong_shape*.py::test_marked: "
                                 f"{message}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_the_header_fits_80_columns(pytester: pytest.Pytester) -> None:
    """The header's lines (settings, seed, a factory target's missing calls one a line,
    the oracles) are each at most 80 columns; the capability line was 487."""
    pytester.makepyfile(test_x="def test_x(mtd_device):\n    pass\n")
    result = pytester.runpytest("-p", "pytest_folio", "-p", "no:cacheprovider",
                                "--folio-mtd=tests.helpers.mtd_devices:RamMTD",
                                "--folio-orders=0,2,4")
    result.assert_outcomes(passed=3)
    header = [line for line in result.outlines[:result.outlines.index("collected 3 items")]
              if line.startswith(("folio:", "    "))]
    assert len(header) > 6, header
    assert max(map(len, header)) <= 80, header
    result.stdout.fnmatch_lines(["folio: seed * (rerun: --folio-seed=*)",
                                 "folio: mtd tests.helpers.mtd_devices:RamMTD lacks:",
                                 "    reopen() (fsx for flash never reopens the device)"])
