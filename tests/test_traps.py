"""The small traps: -p no:folio under an ini that loads the plugin, and a factory in the
current directory that console pytest cannot import."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_folio.targets.spec import TargetError, load_factory


def test_blocking_the_plugin_that_an_ini_loads_is_one_usage_line(
        pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\naddopts = -p pytest_folio\nfolio_orders = 0\n")
    pytester.makepyfile(test_x="def test_x(mtd_device):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:folio", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.errlines[0].startswith("ERROR: -p no:folio blocks pytest-folio, but -p "
                                         "pytest_folio (the ini file's addopts?) loaded it")
    assert "KeyError" not in result.stdout.str() + result.stderr.str()
    # dropping the ini's addopts honours the block: the plugin's fixtures are gone
    honoured = pytester.runpytest_subprocess("-p", "no:folio", "-o", "addopts=",
                                             "-p", "no:cacheprovider")
    honoured.assert_outcomes(errors=1)
    honoured.stdout.fnmatch_lines(["*fixture 'mtd_device' not found*"])


def test_a_factory_beside_the_current_directory_gets_the_sys_path_hint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "myflash_not_on_path.py").write_text("def factory(**kw):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    with pytest.raises(TargetError) as info:
        load_factory("myflash_not_on_path:factory", "--folio-mtd")
    assert str(info.value) == (
        "--folio-mtd: cannot import factory 'myflash_not_on_path:factory': "
        "ModuleNotFoundError: No module named 'myflash_not_on_path' (myflash_not_on_path "
        "is in the current directory, which console pytest does not put on sys.path: run "
        "python -m pytest, or set pythonpath = . in the ini file)")
    with pytest.raises(TargetError) as other:
        load_factory("nowhere_at_all:factory", "--folio-mtd")
    assert str(other.value).endswith("No module named 'nowhere_at_all'")
