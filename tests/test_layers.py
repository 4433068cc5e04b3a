"""The architecture as an executable contract: each module imports only its own layer and
the layers below it (docs/architecture.md draws the same table), so data flows one way:
suites use targets, targets wrap the model or the kernel, the timing collector only
listens. Every import statement counts, those under ``if TYPE_CHECKING`` and inside
functions included."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# package name -> the directory it is installed from (package-dir in pyproject.toml)
SOURCES = {"pytest_folio": ROOT / "pytest_folio",
           "pytest_folio.fixtures": ROOT / "fixtures",
           "pytest_folio.suites": ROOT / "suites"}

# Top to bottom. A module belongs to the layer of its longest matching prefix.
LAYERS: list[tuple[str, ...]] = [
    ("pytest_folio.cli", "pytest_folio.__main__", "pytest_folio.vm", "pytest_folio.commands.check",
     "pytest_folio.commands.shrink"),
    ("pytest_folio.plugin",),
    ("pytest_folio.suites",),
    ("pytest_folio.fixtures",),
    ("pytest_folio.timing",),
    ("pytest_folio.session",),
    ("pytest_folio.options",),
    ("pytest_folio.fsx", "pytest_folio.mtdtests"),
    ("pytest_folio.targets",),
    ("pytest_folio.model",),
    ("pytest_folio",),   # the bottom: constants, sizes, uapi, params, mtdcore, shrink, ...
]
# Neighbours in one layer that stay independent of each other.
APART = [("pytest_folio.fsx", "pytest_folio.mtdtests")]
# Leaves: modules that import nothing of their own package but its __init__.
LEAVES = ["pytest_folio.vm.bootimage", "pytest_folio.vm.apt"]


def module_name(package: str, root: Path, path: Path) -> str:
    parts = [p for p in path.relative_to(root).with_suffix("").parts if p != "__init__"]
    return ".".join([package, *parts])


@functools.cache
def modules() -> tuple[tuple[str, Path], ...]:
    return tuple((module_name(package, root, path), path)
                 for package, root in SOURCES.items() for path in sorted(root.rglob("*.py")))


def imports(name: str, path: Path) -> set[str]:
    """The pytest_folio modules ``path`` imports (``from pytest_folio import x`` names
    the module ``pytest_folio.x`` when there is one)."""
    known = {m for m, _ in modules()}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return {m for m in found if m == "pytest_folio" or m.startswith("pytest_folio.")}


def layer_of(name: str) -> int:
    best, rank = -1, len(LAYERS)
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    return rank


def inside(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_every_module_has_a_layer() -> None:
    assert all(layer_of(name) < len(LAYERS) for name, _ in modules())


def test_every_import_goes_to_the_same_layer_or_below() -> None:
    upward = [f"{name} imports {dep}" for name, path in modules()
              for dep in sorted(imports(name, path)) if layer_of(dep) < layer_of(name)]
    assert upward == []


@pytest.mark.parametrize(("a", "b"), APART)
def test_neighbours_in_a_layer_do_not_import_each_other(a: str, b: str) -> None:
    crossing = [f"{name} imports {dep}" for name, path in modules()
                for dep in sorted(imports(name, path))
                if (inside(name, a) and inside(dep, b)) or (inside(name, b) and inside(dep, a))]
    assert crossing == []


@pytest.mark.parametrize("leaf", LEAVES)
def test_a_leaf_imports_only_its_package_init(leaf: str) -> None:
    path = dict(modules())[leaf]
    package = leaf.rpartition(".")[0]
    assert {d for d in imports(leaf, path) if inside(d, package) and d != package} == set()


def test_the_contract_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a model module importing the suites is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("from pytest_folio.suites.fs import FsSemantics\n"
                   "from . import folio\n")
    found = imports("pytest_folio.model.bad", bad)
    assert found == {"pytest_folio.suites.fs", "pytest_folio.model.folio"}
    assert min(layer_of(d) for d in found) < layer_of("pytest_folio.model.bad")


# The page cache's AddressSpace keeps its private members to itself: what the rest of the
# model shares of it is its named internal interface (its docstring lists it).
FILEMAP = ROOT / "pytest_folio" / "model" / "filemap.py"


def private_members(path: Path, cls: str) -> set[str]:
    """The ``_name`` methods and ``self._name`` attributes class ``cls`` defines."""
    tree = ast.parse(path.read_text(), str(path))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    found = {n.name for n in body.body if isinstance(n, ast.FunctionDef)}
    found.update(n.attr for n in ast.walk(body) if isinstance(n, ast.Attribute)
                 and isinstance(n.value, ast.Name) and n.value.id == "self")
    return {n for n in found if n.startswith("_") and not n.startswith("__")}


def reaches_into(path: Path, names: set[str]) -> list[str]:
    """``x._name`` for a name of ``names``, ``x`` not ``self`` (a class's own member)."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path}:{n.lineno} {n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in names
            and not (isinstance(n.value, ast.Name) and n.value.id == "self")]


def test_no_module_reaches_into_the_address_spaces_private_members() -> None:
    names = private_members(FILEMAP, "AddressSpace")
    assert {"_sorted", "_holds_smaller"} <= names
    found = [hit for _, path in modules() if path != FILEMAP
             for hit in reaches_into(path, names)]
    assert found == []


def test_the_private_member_check_sees_a_reach(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(self, mapping):\n    return mapping._sorted, self._sorted\n")
    assert reaches_into(bad, {"_sorted"}) == [f"{bad}:2 _sorted"]
