import sys
import textwrap
from pathlib import Path

import pytest

from pytest_folio.targets.spec import TargetError, parse_knobs, parse_target_spec


def test_reference_with_knobs() -> None:
    spec = parse_target_spec("reference:api=page,retry=off", "--folio-mtd")
    assert spec.kind == "reference"
    assert spec.knobs == {"api": "page", "retry": "off"}
    assert parse_target_spec("reference", "--folio-fs").knobs == {}


def test_malformed_knob_names_the_option() -> None:
    with pytest.raises(TargetError, match=r"^--folio-mtd: knob 'api' is not of the form"):
        parse_knobs("api", "--folio-mtd")


def test_paths(tmp_path: Path) -> None:
    assert parse_target_spec(str(tmp_path), "--folio-fs").path == tmp_path
    assert parse_target_spec("/dev/mtd7", "--folio-mtd").kind == "path"


def test_factory_is_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "myfactory_mod.py").write_text(textwrap.dedent("""
        def make(**kwargs):
            return kwargs
        NOT_CALLABLE = 3
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = parse_target_spec("myfactory_mod:make", "--folio-mtd")
    assert spec.kind == "factory" and spec.factory is not None
    assert spec.factory(size=1) == {"size": 1}
    with pytest.raises(TargetError, match="is not callable"):
        parse_target_spec("myfactory_mod:NOT_CALLABLE", "--folio-mtd")
    sys.modules.pop("myfactory_mod", None)


def test_unimportable_factory_is_one_line() -> None:
    with pytest.raises(TargetError) as info:
        parse_target_spec("no_such_module_xyz:factory", "--folio-fs")
    assert "\n" not in str(info.value)
    assert "cannot import factory 'no_such_module_xyz:factory'" in str(info.value)


def test_unknown_name_lists_the_accepted_forms() -> None:
    with pytest.raises(TargetError, match=r"unknown target 'bogus'.*package.module:factory"):
        parse_target_spec("bogus", "--folio-mtd")


def test_a_factory_module_calling_sys_exit_on_import_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "exiting_factory_mod.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TargetError, match=r"^--folio-fs: cannot import factory "
                       r"'exiting_factory_mod:f': SystemExit: 3$"):
        parse_target_spec("exiting_factory_mod:f", "--folio-fs")
    sys.modules.pop("exiting_factory_mod", None)


def test_a_home_directory_of_an_unknown_user_is_one_line() -> None:
    with pytest.raises(TargetError, match=r"^--folio-fs: cannot expand '~nosuchuser_folio/x'"):
        parse_target_spec("~nosuchuser_folio/x", "--folio-fs")


@pytest.mark.parametrize("text", ["a\0b", "x" * 5000])
def test_text_no_path_can_be_is_not_taken_for_a_path(text: str) -> None:
    with pytest.raises(TargetError, match="unknown target"):
        parse_target_spec(text, "--folio-fs")
