"""Out-of-tree module builds against the booted kernel: ``--patch``, ``--driver``,
``--mtd-tests``.

The directories a patch touches come out of the kernel's own source
(:mod:`.source`), the patches are applied in order, and only the modules whose ``.c``
files changed are built (``make -C HEADERS M=DIR``) with the compiler the kernel was built
with. ``--driver`` builds a user's ``.c`` file or Kbuild directory the same way, and
``--mtd-tests`` the kernel's drivers/mtd/tests from the same (patched) tree. Results are
cached under ``CACHE/builds/KEY``, KEY a hash of everything that goes into the build; a
patch that does not apply or a build that fails raises :class:`BuildError` naming the
build log, which the subcommand turns into exit 125 ("cannot test this revision").
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from pytest_folio.vm import Progress, VMError, publish
from pytest_folio.vm.kernel import Kernel
from pytest_folio.vm.modules import ModuleTree, modinfo, module_name
from pytest_folio.vm.source import KernelSource, SourceCache, check_compiler

BUILD_FORMAT = "1"  # bump when the layout of a build directory changes
MTD_TESTS_DIR = "drivers/mtd/tests"
MAKE_JOBS = "2"
# No BTF for the modules built here: it needs pahole (Debian's 6.12+ headers ship the
# vmlinux it reads), and a module under test needs no type information for BPF.
NO_BTF = "CONFIG_DEBUG_INFO_BTF_MODULES="
LEFT_OUT = "left-out"  # in a build's entry: the changed built-in files no module carries


@dataclasses.dataclass(frozen=True)
class ModuleForm:
    """Built-in code that builds, patched, as a module of a name of its own.

    The built-in file system stays registered under its name, so a module of the same
    name could never load; this one registers the patched code as file system ``name``
    beside it. ``main`` (the file that registers ``fs_type`` with an ``fs_initcall``)
    is compiled through :data:`FORM_WRAPPER`, which renames the file system first."""

    name: str      # the module's name, and its file system's
    main: str      # the .c file with the file_system_type and its fs_initcall
    fs_type: str   # that struct file_system_type variable


RAMFS_MODULE = "ramfs_patched"
# directory -> its module form; a patch to any other built-in code needs --build-kernel
MODULE_FORMS = {"fs/ramfs": ModuleForm(RAMFS_MODULE, "inode.c", "ramfs_fs_type")}

FORM_WRAPPER = """\
// SPDX-License-Identifier: GPL-2.0
/*
 * Written by pytest-folio's VM runner: {directory}/{main} as patched, in module
 * {name}, registering file system "{name}" beside the kernel's built-in one.
 * The file's own fs_initcall becomes this module's init, which renames it first.
 */
#include <linux/module.h>
#undef fs_initcall
#define fs_initcall(fn) \\
	static int __init folio_module_init(void) \\
	{{ \\
		{fs_type}.name = "{name}"; \\
		return fn(); \\
	}} \\
	static void __exit folio_module_exit(void) \\
	{{ \\
		unregister_filesystem(&{fs_type}); \\
	}} \\
	module_init(folio_module_init); \\
	module_exit(folio_module_exit)
#include "{main}"
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("{directory}, patched, as file system {name}");
MODULE_ALIAS_FS("{name}");
"""


class BuildError(VMError):
    """A patch that does not apply, or a module that does not build: one line with the
    log's path."""


@dataclasses.dataclass(frozen=True)
class Built:
    """What a build produced: module name -> .ko, and where its log is."""

    modules: dict[str, Path]
    mtd_tests: Path | None      # directory of the kernel's mtd test modules, if built
    log: Path
    origin: str                 # what the modules were built with, for the loaded line
    cached: bool = False
    # files the patches change that the kernel has built in and no module carries:
    # "fs/libfs.c (obj-y in fs/Makefile)"; they are not in the booted kernel
    left_out: tuple[str, ...] = ()


def touched_files(patch: str) -> list[str]:
    """The files a unified diff changes, relative to the tree's top (``-p1``)."""
    files: list[str] = []
    old: tuple[str | None] | None = None   # the last "--- " line's path, boxed
    for line in patch.splitlines():
        if line.startswith("--- "):
            old = (_diff_path(line[4:]),)
        elif line.startswith("+++ ") and old is not None:
            new = _diff_path(line[4:])
            path = new if new is not None else old[0]
            if path is not None and path not in files:
                files.append(path)
            old = None
    return files


def _diff_path(text: str) -> str | None:
    name = text.split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    return name.split("/", 1)[1] if "/" in name else name


def module_of(makefile: Path, source: str) -> tuple[str, list[str]] | None:
    """Which module of a kernel Makefile (or Kbuild) ``source`` (``block2mtd.c``) is
    built into: ``(name, its objects)``; None when the file is no module's part.

    A file named directly (``obj-$(CONFIG_X) += block2mtd.o``) is a module of its own;
    otherwise the composite module listing it (``foo-objs := a.o b.o``, ``foo-y``).
    """
    obj = Path(source).with_suffix(".o").name
    text = re.sub(r"\\\n", " ", makefile.read_text(errors="replace"))
    composites: dict[str, list[str]] = {}
    direct: set[str] = set()
    for line in text.splitlines():
        match = re.match(r"\s*([\w$()-]+)\s*[:+]?=\s*(.*)", line.split("#", 1)[0])
        if match is None:
            continue
        target, objects = match.group(1), match.group(2).split()
        if target.startswith("obj-"):
            direct.update(objects)
        else:
            comp = re.fullmatch(r"([\w-]+)-(?:objs|y|\$\(CONFIG_\w+\))", target)
            if comp:
                composites.setdefault(comp.group(1), []).extend(objects)
    for name, objects in composites.items():
        if obj in objects and f"{name}.o" in direct:
            return name, objects
    if obj in direct:
        return obj[:-2], [obj]
    return None


def _obj_lines(makefile: Path) -> list[tuple[str, list[str]]]:
    """A kernel Makefile's ``obj-X += a.o b.o`` lines as (X, objects): X is ``y``,
    ``m`` or ``$(CONFIG_...)``."""
    text = re.sub(r"\\\n", " ", makefile.read_text(errors="replace"))
    lines = []
    for line in text.splitlines():
        match = re.match(r"\s*obj-(y|m|\$\(CONFIG_\w+\))\s*[:+]?=\s*(.*)",
                         line.split("#", 1)[0])
        if match:
            lines.append((match.group(1), match.group(2).split()))
    return lines


def obj_config(makefile: Path, name: str) -> str | None:
    """The option that builds module ``name`` of a kernel Makefile: ``CONFIG_X`` for
    ``obj-$(CONFIG_X) += name.o``; None when it is built in (``obj-y``) or not named."""
    for kind, objects in _obj_lines(makefile):
        if kind.startswith("$(") and f"{name}.o" in objects:
            return kind[2:-1]
    return None


def built_in(makefile: Path, name: str, config: str) -> str | None:
    """Why module ``name`` of a kernel Makefile is part of the kernel whose .config is
    ``config`` rather than a module of it (``obj-y``, or ``CONFIG_X=y``); None when
    it is a module (Debian's modules.builtin lists only tristate options, not obj-y)."""
    for kind, objects in _obj_lines(makefile):
        if f"{name}.o" not in objects:
            continue
        if kind == "y":
            return "obj-y"
        if kind.startswith("$(") and re.search(rf"^{re.escape(kind[2:-1])}=y$", config,
                                               re.M):
            return f"{kind[2:-1]}=y"
    return None


def _hash_tree(h: hashlib._Hash, path: Path) -> None:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        h.update(str(file.relative_to(path.parent)).encode() + b"\0")
        h.update(file.read_bytes())


def build_key(source: KernelSource, compiler_version: str, patches: list[Path],
              driver: Path | None, mtd_tests: bool) -> str:
    """A hash of every input of the build: same inputs, same modules."""
    h = hashlib.sha256(f"{BUILD_FORMAT}\0{source.release}\0{source.version}\0"
                       f"{compiler_version}\0{mtd_tests}\0".encode())
    for patch in patches:
        h.update(b"patch\0" + patch.name.encode() + b"\0" + patch.read_bytes())
    if driver is not None:
        h.update(b"driver\0")
        _hash_tree(h, driver)
    return h.hexdigest()[:20]


def _compiler_version(compiler: str) -> str:
    proc = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                          check=False)
    return proc.stdout.split("\n", 1)[0]


def origin_text(patches: list[Path], driver: Path | None) -> str:
    """``block2mtd-folio.patch`` / ``a.patch + b.patch`` / ``driver mydrv.c``."""
    parts = [p.name for p in patches]
    if driver is not None:
        parts.append(f"driver {driver.name}")
    return " + ".join(parts) or "the kernel's own source"


class ModuleBuilder:
    """Builds into ``ROOT/builds/KEY``; the log of a failed build stays as KEY.log."""

    def __init__(self, source: KernelSource, cache_root: Path, progress: Progress) -> None:
        self.source = source
        self.store = cache_root / "builds"
        self.progress = progress

    def build(self, patches: list[Path], driver: Path | None = None,
              mtd_tests: bool = False) -> Built:
        compiler = check_compiler(self.source)
        key = build_key(self.source, _compiler_version(compiler), patches, driver,
                        mtd_tests)
        entry = self.store / key
        origin = origin_text(patches, driver)
        if (entry / "done").is_file():
            return self._result(entry, origin, cached=True)
        log = self.store / f"{key}.log"
        with publish(entry, ready="done") as staging:
            with log.open("w") as out:
                self._build_in(staging, patches, driver, mtd_tests, out, log)
            shutil.copyfile(log, staging / "build.log")
            (staging / "done").write_text(origin + "\n")
        log.unlink(missing_ok=True)
        return self._result(entry, origin, cached=False)

    def _result(self, entry: Path, origin: str, cached: bool) -> Built:
        modules = {module_name(p.name): p for p in sorted((entry / "modules").glob("*.ko"))}
        tests = entry / "mtd-tests"
        left = entry / LEFT_OUT
        return Built(modules, tests if tests.is_dir() else None, entry / "build.log",
                     origin, cached,
                     tuple(left.read_text().splitlines()) if left.is_file() else ())

    def _build_in(self, work: Path, patches: list[Path], driver: Path | None,
                  mtd_tests: bool, out: TextIO, log: Path) -> None:
        """The steps of building out of tree: copy the touched directories out of the
        kernel's source, apply the patches, write a Kbuild for each changed module's
        directory, ``make M=DIR modules`` each, and install the .ko files."""
        tree = _Workspace(work, out, log)
        touched = _touched_by(patches)
        self._extract_sources(tree, touched, mtd_tests)
        self._apply_patches(tree, patches)
        config = self.source.headers / ".config"
        dirs, left_out = _write_kbuild(tree, touched, config.read_text(errors="replace")
                                       if config.is_file() else "")
        if left_out and not dirs:
            raise BuildError(f"{left_out[0]}: built into kernel {self.source.release}, so "
                             "no module can replace it: build the kernel with the patch "
                             f"(--build-kernel SRC_DIR|debian:SUITE) (log: {log})")
        (work / LEFT_OUT).write_text("".join(f"{f}\n" for f in left_out))
        jobs: list[tuple[Path, list[str]]] = [(d, []) for d in dirs]
        if patches and not jobs and not mtd_tests:
            raise BuildError(f"{' '.join(p.name for p in patches)} changes no module's "
                             f".c file (log: {log})")
        if driver is not None:
            jobs.append((self._driver_dir(driver, tree.src / "driver"), []))
        if mtd_tests:
            jobs.append((tree.src / MTD_TESTS_DIR, ["CONFIG_MTD_TESTS=m"]))
        self._make_modules(tree, jobs)
        _install_modules(tree, [d for d, _ in jobs])

    def _extract_sources(self, tree: _Workspace, touched: list[str], mtd_tests: bool) -> None:
        """The directories of the touched files (and drivers/mtd/tests), from the
        kernel's source into the work tree."""
        wanted = {str(Path(f).parent) for f in touched} | ({MTD_TESTS_DIR} if mtd_tests
                                                            else set())
        # a directory inside another one comes with it (fs/ramfs with fs, for fs/libfs.c)
        dirs = sorted(d for d in wanted if not any(p in wanted for p in
                                                   map(str, Path(d).parents)))
        if dirs:
            source = self.source.extract(dirs)
            for d in dirs:
                shutil.copytree(source / d, tree.src / d, symlinks=True)

    def _apply_patches(self, tree: _Workspace, patches: list[Path]) -> None:
        for patch in patches:
            if tree.sh(["patch", "-p1", "--batch", "--forward", "-d", str(tree.src), "-i",
                        str(patch.resolve())]) != 0:
                form = series_form(patch, self.source.version)
                hint = f"; {form.name} beside it is its form for {form.stem.rsplit('-', 1)[1]}" \
                    if form is not None else ""
                raise BuildError(f"{patch.name} does not apply to the source of kernel "
                                 f"{self.source.release} {self.source.version} "
                                 f"(log: {tree.log}){hint}")

    def _make_modules(self, tree: _Workspace, jobs: list[tuple[Path, list[str]]]) -> None:
        """``make -C HEADERS M=DIR modules`` for each (directory, extra arguments)."""
        for directory, extra in jobs:
            what = _describe(directory, tree.src)
            self.progress(f"building {what} against {self.source.release} with "
                          f"{self.source.compiler}")
            if tree.sh(["make", "-C", str(self.source.headers), f"M={directory}", NO_BTF,
                        f"-j{MAKE_JOBS}", *extra, "modules"]) != 0:
                raise BuildError(f"building {what} for kernel {self.source.release} "
                                 f"failed: {first_error_line(tree.log)} (log: {tree.log})")

    @staticmethod
    def _driver_dir(driver: Path, dest: Path) -> Path:
        if driver.is_file() and driver.suffix == ".c":
            dest.mkdir(parents=True)
            shutil.copyfile(driver, dest / driver.name)
            (dest / "Kbuild").write_text(f"obj-m += {driver.stem}.o\n")
            return dest
        if driver.is_dir() and any((driver / n).is_file() for n in ("Kbuild", "Makefile")):
            shutil.copytree(driver, dest, symlinks=True)
            return dest
        raise BuildError(f"--driver {driver}: neither a .c file nor a directory with a "
                         "Kbuild or Makefile")


def series_form(patch: Path, version: str) -> Path | None:
    """The form of ``patch`` written for the kernel series of Debian version ``version``
    (``ramfs-blocksize-6.12.patch`` beside ``ramfs-blocksize.patch`` for 6.12.95-1),
    when there is one."""
    match = re.match(r"(\d+\.\d+)", version)
    if match is None:
        return None
    form = patch.with_name(f"{patch.stem}-{match.group(1)}{patch.suffix}")
    return form if form.is_file() and form != patch else None


def _describe(directory: Path, src: Path) -> str:
    try:
        return str(directory.relative_to(src))
    except ValueError:
        return str(directory)


def first_error_line(log: Path, offset: int = 0) -> str:
    """What a failed build says went wrong: the first line of ``log`` from ``offset``
    (where this build's output starts) naming an error, else its last line. The first,
    since make's own lines after a compiler error only say that it stopped."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() and not ln.startswith("$")]
    return (errors or lines or ["no output"])[0 if errors else -1]


@dataclasses.dataclass(frozen=True)
class _Workspace:
    """One build: its directory (``src/`` the sources), the log and where it is."""

    work: Path
    out: TextIO
    log: Path

    @property
    def src(self) -> Path:
        return self.work / "src"

    def sh(self, cmd: list[str]) -> int:
        """Run ``cmd`` with its output in the log (without the caller's make flags)."""
        self.out.write(f"$ {' '.join(cmd)}\n")
        self.out.flush()
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
        return subprocess.run(cmd, stdout=self.out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, env=env, check=False).returncode


def _touched_by(patches: list[Path]) -> list[str]:
    """Every file the patches change, in order, once; a patch list that changes nothing
    is not a diff."""
    touched: list[str] = []
    for patch in patches:
        touched += [f for f in touched_files(patch.read_text(errors="replace"))
                    if f not in touched]
    if patches and not touched:
        raise BuildError(f"{patches[0].name} is not a unified diff (no +++ lines)")
    return touched


def _write_kbuild(tree: _Workspace, touched: list[str], config: str
                  ) -> tuple[list[Path], list[str]]:
    """A Kbuild naming the modules of the changed .c files in each directory (as the
    directory's Makefile builds them; built-in code that has a :class:`ModuleForm` as
    that module, under its own name); the directories to build, and the changed files
    the kernel has built in that no module can carry (``fs/libfs.c (obj-y in
    fs/Makefile)``)."""
    by_dir: dict[str, list[tuple[str, list[str]]]] = {}
    left_out: list[str] = []
    forms: dict[str, list[str]] = {}  # directory -> the lines its Makefile keeps
    for file in touched:
        d = str(Path(file).parent)
        if not file.endswith(".c") or d == MTD_TESTS_DIR:
            continue
        makefile = next((tree.src / d / n for n in ("Kbuild", "Makefile")
                         if (tree.src / d / n).is_file()), None)
        found = module_of(makefile, Path(file).name) if makefile else None
        if found is None or makefile is None:
            raise BuildError(f"{file} is built into no module its directory's "
                             f"Makefile names, so it cannot be built out of tree "
                             f"(log: {tree.log})")
        reason = built_in(makefile, found[0], config)
        if reason is not None and d not in MODULE_FORMS:
            left_out.append(f"{file} ({reason} in {d}/{makefile.name})")
            continue
        if reason is not None:
            forms.setdefault(d, _non_obj_lines(makefile))
            found = _module_form(tree.src / d, d, found[1])
        by_dir.setdefault(d, []).append(found)
    for d, mods in by_dir.items():
        lines = [*forms.get(d, [])]
        lines += [f"obj-m += {name}.o" for name in dict.fromkeys(n for n, _ in mods)]
        lines += [f"{name}-objs := {' '.join(objs)}" for name, objs in dict(mods).items()
                  if objs != [f"{name}.o"]]
        (tree.src / d / "Kbuild").write_text("\n".join(lines) + "\n")
    return [tree.src / d for d in by_dir], left_out


def _non_obj_lines(makefile: Path) -> list[str]:
    """A kernel Makefile without its ``obj-`` lines: the variables its objects name
    (``file-mmu-$(CONFIG_MMU) := file-mmu.o``), for a Kbuild that builds them anew."""
    text = re.sub(r"\\\n", " ", makefile.read_text(errors="replace"))
    return [ln for ln in text.splitlines() if not re.match(r"\s*obj-", ln)]


def _module_form(directory: Path, rel: str, objects: list[str]) -> tuple[str, list[str]]:
    """Built-in ``rel`` (``fs/ramfs``) as its :class:`ModuleForm`: the wrapper written
    beside its main file, and the module's objects with the wrapper in the main file's
    place."""
    form = MODULE_FORMS[rel]
    wrapper = f"{form.name}_main"
    (directory / f"{wrapper}.c").write_text(FORM_WRAPPER.format(
        directory=rel, main=form.main, name=form.name, fs_type=form.fs_type))
    main = str(Path(form.main).with_suffix(".o"))
    return form.name, [f"{wrapper}.o" if o == main else o for o in objects]


def _install_modules(tree: _Workspace, directories: list[Path]) -> None:
    """Each directory's .ko files into ``modules/`` (``mtd-tests/`` for the kernel's
    mtd test modules); a directory that made none is a failed build."""
    (tree.work / "modules").mkdir()
    for directory in directories:
        kos = sorted(directory.rglob("*.ko"))
        if not kos:
            raise BuildError(f"building {_describe(directory, tree.src)} made no module "
                             f"(log: {tree.log})")
        dest = tree.work / ("mtd-tests" if directory == tree.src / MTD_TESTS_DIR
                            else "modules")
        dest.mkdir(exist_ok=True)
        for ko in kos:
            shutil.copyfile(ko, dest / ko.name)


def substitute(order: list[tuple[str, bytes]], built: dict[str, Path], tree: ModuleTree,
               release: str) -> list[tuple[str, bytes]]:
    """The guest's load order with the built modules in place of the stock ones; a
    built module the order lacks comes last, after the stock modules it depends on."""
    data = {name: path.read_bytes() for name, path in built.items()}
    for name, ko in data.items():
        magic = modinfo(ko).get("vermagic", "").split()
        if magic and magic[0] != release:
            raise BuildError(f"{built[name]} is for kernel {magic[0]}, not {release}")
    out = [(name, data.get(name, ko)) for name, ko in order]
    have = {name for name, _ in out}
    for name, ko in data.items():
        if name in have:
            continue
        deps = [d.replace("-", "_") for d in modinfo(ko).get("depends", "").split(",") if d]
        out += [(n, k) for n, k in tree.load_order(d for d in deps if d not in have)
                if n not in have]
        have |= {n for n, _ in out}
        out.append((name, ko))
        have.add(name)
    return out


def stage_interleave(into: Path, order: list[tuple[str, bytes]], built: Built) -> Path:
    """``--interleave``: the stock and the built file of each built module, in
    ``into/base`` and ``into/patched``, with what the built ones were built with in
    ``into/origin``, for the guest to swap between."""
    stock = dict(order)
    if set(built.modules) != {"block2mtd"}:
        raise BuildError(f"--interleave swaps block2mtd alone; this build made "
                         f"{', '.join(sorted(built.modules)) or 'no module'}")
    missing = [name for name in built.modules if name not in stock]
    if missing:
        raise BuildError(f"--interleave: the kernel has no stock {', '.join(missing)} to "
                         "compare the built one with")
    for side in ("base", "patched"):
        (into / side).mkdir(parents=True)
    for name, path in built.modules.items():
        (into / "base" / f"{name}.ko").write_bytes(stock[name])
        shutil.copyfile(path, into / "patched" / f"{name}.ko")
    (into / "origin").write_text(built.origin)
    return into


def loaded_lines(built: Built, names: Iterable[str]) -> list[str]:
    """``loaded block2mtd built with block2mtd-folio.patch``: one per built module the
    guest loads at boot."""
    return [f"loaded {name} built with {built.origin}" for name in names
            if name in built.modules]


def module_tree(kernel: Kernel) -> ModuleTree:
    """The tree whose stock modules built ones replace; VMError for a kernel without
    one (everything built in leaves nothing a module could replace)."""
    if kernel.modules is None:
        raise VMError(f"kernel {kernel.release} has no module tree, so a built module "
                      "cannot replace its own (give --modules)")
    return ModuleTree(kernel.modules, kernel.release)


def build_for_kernel(kernel: Kernel, patches: list[Path], driver: Path | None,
                     mtd_tests: bool, cache_root: Path, progress: Progress,
                     source: KernelSource | None = None, suite: str | None = None) -> Built:
    """Everything ``--patch``/``--driver``/``--mtd-tests`` need, built for ``kernel``:
    from its Debian source (fetched from ``suite``, default the host's, and cached)
    unless ``source`` is given."""
    if source is None:
        source = SourceCache(cache_root).fetch(kernel, progress, suite)
    start = time.monotonic()
    built = ModuleBuilder(source, cache_root, progress).build(patches, driver, mtd_tests)
    what = ", ".join([*built.modules, *(["the mtd tests"] if built.mtd_tests else [])])
    if built.cached:
        progress(f"{what} built with {built.origin} (cached, {built.log.parent})")
    else:
        progress(f"built {what} with {built.origin} in {time.monotonic() - start:.1f} s "
                 f"(log: {built.log})")
    for directory, form in module_forms(built).items():
        progress(f"{directory} is built into kernel {kernel.release}, so the patched one "
                 f"is module {form.name}, file system {form.name} beside the stock "
                 f"built-in one (--build-kernel builds the patch into the kernel instead)")
    for file in built.left_out:
        progress(f"{file}: built into kernel {kernel.release}, so this boot runs it "
                 "unpatched (only --build-kernel builds that change in)")
    return built


def module_forms(built: Built) -> dict[str, ModuleForm]:
    """The built-in code ``built`` holds in its module form: directory -> form."""
    return {d: form for d, form in MODULE_FORMS.items() if form.name in built.modules}
