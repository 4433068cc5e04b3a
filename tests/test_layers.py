"""The architecture as an executable contract: each module imports only its own layer and
the layers below it (docs/architecture.md draws the same table), so data flows one way:
suites use targets, targets wrap the model or the kernel, the timing collector only
listens, and the VM runner is fenced off behind the command line. Every import statement
counts, those under ``if TYPE_CHECKING`` and inside functions included, and so does a
``"package.module:function"`` string (how the command line loads its subcommands)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# package name -> the directory it is installed from (package-dir in pyproject.toml)
SOURCES = {"pytest_folio": ROOT / "pytest_folio",
           "pytest_folio.fixtures": ROOT / "fixtures",
           "pytest_folio.suites": ROOT / "suites"}

# Top to bottom. A module belongs to the layer of its longest matching prefix.
LAYERS: list[tuple[str, ...]] = [
    ("pytest_folio.cli", "pytest_folio.__main__"),   # the command line's entry
    ("pytest_folio.vm",),           # fenced: only the entry above imports it
    ("pytest_folio.commands",),
    ("pytest_folio.plugin",),
    ("pytest_folio.suites",),
    ("pytest_folio.fixtures",),
    ("pytest_folio.timing",),       # listens: imports only TIMING_HEARS_WITH
    ("pytest_folio.session",),
    ("pytest_folio.options",),
    ("pytest_folio.fsx", "pytest_folio.mtdtests"),
    ("pytest_folio.targets",),
    ("pytest_folio.model",),
    ("pytest_folio",),   # shared helpers: sizes, files, inputs, params, ktap/, terminal/, ...
    ("pytest_folio.linux",),        # what Linux defines: imports nothing else of ours
]
# Neighbours in one layer that stay independent of each other.
APART = [("pytest_folio.fsx", "pytest_folio.mtdtests")]
# Leaves: modules that import nothing of their own package but its __init__.
LEAVES = ["pytest_folio.vm.bootimage", "pytest_folio.vm.apt"]
# The only modules outside a fenced package that may import it: the VM runner is reached
# by the command line alone; the timing collector is heard, never called (suites announce
# measurements through the hook), so only its registration and its commands import it.
FENCED = {"pytest_folio.vm": ("pytest_folio.cli",),
          "pytest_folio.timing": ("pytest_folio.cli", "pytest_folio.plugin",
                                  "pytest_folio.fixtures.timing")}
# What the timing collector may import besides itself: what it hears (the measurement
# and its hook), where it reads the run's settings and a test's parameters, and the
# plain helpers every layer shares. Never a target, the model or a suite.
TIMING = "pytest_folio.timing"
TIMING_HEARS_WITH = ("pytest_folio.measurement", "pytest_folio.hookspecs",
                     "pytest_folio.params", "pytest_folio.session", "pytest_folio.options",
                     "pytest_folio.sizes", "pytest_folio.files", "pytest_folio.errors",
                     "pytest_folio.inputs", "pytest_folio.terminal")
# "module:function" strings name modules imported by importlib
LOADED = re.compile(r"(pytest_folio(?:\.\w+)+):\w+")


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
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = import_base(name, path, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.update(m.group(1) for m in LOADED.finditer(node.value))
    return {m for m in found if m == "pytest_folio" or m.startswith("pytest_folio.")}


def import_base(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` in module ``name`` imports from."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    base = node.module or ""
    if node.level:
        up = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join([*up, base] if base else up)
    return base


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


DOC = ROOT / "docs" / "architecture.md"


def doc_layers(text: str) -> list[list[str]]:
    """The layer table of docs/architecture.md, top to bottom: each row's names (a row's
    names may run over several lines; three spaces or more part them from its words)."""
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    rows: list[list[str]] = []
    names: list[str] = []
    for line in block.splitlines():
        if line and not line[0].isspace():
            part, _, words = line.partition("   ")
            names += part.split()
            if not words.strip():
                continue
        if names:
            rows.append(names)
            names = []
    return [*rows, names] if names else rows


def test_the_doc_draws_the_layers_the_test_checks() -> None:
    """Every module of the package's root is in the doc's table, in the row of its layer,
    and the table has the layers the test checks, in the same order."""
    rows = doc_layers(DOC.read_text())
    placed = {f"pytest_folio.{n.strip('/')}": i for i, row in enumerate(rows) for n in row}
    assert len(rows) == len(LAYERS)
    assert {n: layer_of(n) for n in placed} == placed
    tops = {".".join(name.split(".")[:2]) for name, _ in modules() if name != "pytest_folio"}
    assert sorted(tops - placed.keys()) == []


def test_the_doc_reader_sees_rows_over_several_lines() -> None:
    text = ("## Layers\n\n```\na  b                 top\nc d\ne  f/\n"
            "                             bottom, over two lines\n```\n")
    assert doc_layers(text) == [["a", "b"], ["c", "d", "e", "f/"]]


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


@pytest.mark.parametrize("fenced", sorted(FENCED))
def test_a_fenced_package_is_imported_only_through_its_gate(fenced: str) -> None:
    gates = FENCED[fenced]
    crossing = [f"{name} imports {dep}" for name, path in modules()
                if not inside(name, fenced) and not any(inside(name, g) for g in gates)
                for dep in sorted(imports(name, path)) if inside(dep, fenced)]
    assert crossing == []


def test_the_timing_collector_imports_only_what_it_listens_with() -> None:
    beyond = [f"{name} imports {dep}" for name, path in modules() if inside(name, TIMING)
              for dep in sorted(imports(name, path))
              if not any(inside(dep, m) for m in (TIMING, *TIMING_HEARS_WITH))]
    assert beyond == []


def imported_names(name: str, path: Path) -> dict[str, str]:
    """The names module ``name`` binds at its top level by importing them from a module
    of the package, and where from."""
    tree = ast.parse(path.read_text(), str(path))
    return {alias.asname or alias.name: import_base(name, path, node)
            for node in tree.body if isinstance(node, ast.ImportFrom)
            for alias in node.names}


def reexports_reached(name: str, path: Path) -> list[str]:
    """``from M import N`` in ``name`` where M is of another layer and has N only because
    it imported N from a third layer: the import would hide what ``name`` depends on."""
    known = dict(modules())
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = import_base(name, path, node)
        if base not in known or layer_of(base) == layer_of(name):
            continue
        passed_on = imported_names(base, known[base])
        for alias in node.names:
            origin = passed_on.get(alias.name)
            if (f"{base}.{alias.name}" not in known and origin is not None
                    and origin in known and layer_of(origin) != layer_of(base)):
                found.append(f"{name} imports {alias.name} from {base}, not {origin}")
    return found


def test_no_name_is_reached_through_another_layers_re_export() -> None:
    """A module that needs a lower layer's name imports it from there, so the layer
    checks above see the dependency (the MTD checks of the reference's page cache import
    the model's Block2MTD from the model, not through the targets)."""
    assert [hit for name, path in modules() for hit in reexports_reached(name, path)] == []


def test_the_re_export_check_sees_a_reach(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from pytest_folio.targets.mtd import Block2MTD, MTDTarget\n")
    assert reexports_reached("pytest_folio.mtdtests.bad", bad) == [
        "pytest_folio.mtdtests.bad imports Block2MTD from pytest_folio.targets.mtd, "
        "not pytest_folio.model.block2mtd"]


def test_the_contract_sees_a_subcommand_loaded_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('COMMANDS = ["pytest_folio.vm.runner:register"]\n')
    assert imports("pytest_folio.suites.bad", bad) == {"pytest_folio.vm.runner"}


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
