"""The kernel's own selftests for ``vm --ktap``: built on the host from the booted
kernel's source, run in the guest, reported as items.

The mm selftests are user-space programs that print KTAP; they exercise large folios
(``cow`` over every THP size the kernel offers, ``split_huge_page_test`` over anonymous,
shmem and page-cache folios, ``gup_longterm``, ``mkdirty``, ``madv_populate``). Each is
compiled with the host's C compiler against the kernel tree's own user-space headers
(``make headers``, into a build directory of ours: the tree stays as extracted), from
the same Debian source the module builds use, and cached per kernel. A test that does
not build for that kernel (it is newer than the tree, or needs a library the host lacks)
is not an error: the guest reports it skipped, with the compiler's first error.

``split_huge_page_test``'s page-cache cases split large folios of the file system whose
directory it is given (its one argument): it runs once per page-cache place
(:func:`pagecache_places`), its anonymous cases in each run: each ``--fs xfs|ext4``
scratch file system (one per block size, so 16K and 64K blocks give folios of order 2
and 4 at least) and a tmpfs mounted ``huge=always``; a place the run lacks is a skipped
test saying why.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pytest_folio.sizes import format_size
from pytest_folio.vm import Progress, Run, VMError, last_error, run_tool
from pytest_folio.vm.disks import FILE_SYSTEMS, block_size_refusal
from pytest_folio.vm.source import KernelSource

# the large-folio selftests of tools/testing/selftests/mm (vm before Linux 6.3)
MM = ("cow", "split_huge_page_test", "gup_longterm", "mkdirty", "madv_populate")
SETS = {"mm": MM}
# the tests whose page-cache cases take a directory (argv[1]), and the function their
# source has when they do (split_huge_page_test before Linux 6.10 has no such cases)
PAGECACHE = {"split_huge_page_test": "split_thp_in_pagecache"}
# the guest runner mounts this itself, privately (see pytest_folio.ktap.run)
HUGE_TMPFS = ("huge-tmpfs", "tmpfs:huge=always")
# what the mm tests compile against besides their own directory
HELPERS = ("vm_util.c", "thp_settings.c")
SOURCE_PATHS = ["Makefile", "scripts", "include", "arch/x86", "usr", "tools/include",
                "tools/arch/x86/include", "tools/testing/selftests", "mm/gup_test.h"]
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
KUNIT = "kunit:"


def parse_ktap_tests(text: str) -> tuple[str, ...]:
    """``--ktap mm`` (the large-folio set) or ``--ktap cow,split_huge_page_test``."""
    names: list[str] = []
    for word in (w.strip() for w in text.split(",")):
        if word.startswith(KUNIT):
            raise ValueError(f"{word!r}: no Debian kernel has KUnit (CONFIG_KUNIT is off "
                             "in bookworm, bookworm-backports, trixie and sid): run "
                             "KUnit in a kernel built with it and read its log with "
                             "--folio-ktap (docs/ktap.md)")
        if word in SETS:
            names += SETS[word]
        elif _NAME.match(word):
            names.append(word)
        else:
            raise ValueError(f"{word!r} is neither a set ({', '.join(SETS)}) nor a "
                             "selftest's name")
    return tuple(dict.fromkeys(names))


@dataclasses.dataclass(frozen=True)
class Selftest:
    """One selftest for the guest: its program, or why there is none."""

    name: str
    path: Path | None
    reason: str = ""
    pagecache: bool = False   # its source has page-cache cases taking a directory

    @property
    def label(self) -> str:
        return f"selftests: mm: {self.name}"


@dataclasses.dataclass(frozen=True)
class Place:
    """Where a test's page-cache cases run: ``where`` is a directory (a scratch file
    system's mount point) or ``tmpfs:OPTIONS``; ``reason`` says why the run lacks it."""

    label: str                # in the test's id: 16K-xfs, huge-tmpfs
    where: str = ""
    reason: str = ""


def pagecache_places(fs: str, block_sizes: list[int], mounted: dict[int, str],
                     release: str) -> list[Place]:
    """One place per ``--folio-block-sizes`` size (``mounted``: the ``--fs`` scratch file
    systems by block size; with ``--fs ramfs`` the sizes are XFS ones the run lacks),
    then a tmpfs with ``huge=always``."""
    kind = fs if fs in FILE_SYSTEMS else "xfs"
    places = []
    for bs in block_sizes:
        label = f"{format_size(bs)}-{kind}"
        if bs in mounted:
            places.append(Place(label, mounted[bs]))
            continue
        why = block_size_refusal(kind, bs, release)
        if why is None and fs == kind:
            why = f"the run has no {kind} at {format_size(bs)} blocks"
        places.append(Place(label, reason=why or (
            f"the run has no {kind} (--fs {fs}; vm --fs {kind} makes one per "
            "--folio-block-sizes size)")))
    return [*places, Place(*HUGE_TMPFS)]


def _directory(tree: Path) -> Path:
    for name in ("mm", "vm"):
        if (tree / "tools/testing/selftests" / name / "Makefile").is_file():
            return tree / "tools/testing/selftests" / name
    raise VMError(f"{tree} has no tools/testing/selftests/mm (or vm)")


def selftests_dir(cache_root: Path, source: KernelSource) -> Path:
    """Where one kernel's selftests (and the last run's KTAP log) are kept."""
    return cache_root / "selftests" / f"{source.release}_{source.version}"


def build_selftests(source: KernelSource, names: tuple[str, ...], cache_root: Path,
                    progress: Progress, run: Run = run_tool) -> list[Selftest]:
    """``names`` built for ``source``'s kernel (the programs cached under
    ``CACHE/selftests/RELEASE_VERSION``; one that did not build is tried again)."""
    out = selftests_dir(cache_root, source)
    built = out / "bin"
    tests = _directory(source.extract(SOURCE_PATHS, run))   # once: then it is a look
    if all((built / n).is_file() for n in names):
        progress(f"selftests for {source.release} (cached, {out})")
        return [Selftest(n, built / n, pagecache=_takes_directory(tests, n))
                for n in names]
    tree = source.tree
    headers = out / "headers"
    if not (headers / "usr/include/linux").is_dir():
        progress(f"the user-space headers of {source.release} (make headers)")
        proc = run(["make", "-s", "-C", str(tree), f"O={headers}", "headers"])
        if proc.returncode != 0:
            raise VMError(f"make headers in {tree} failed: {last_error(proc)}")
    built.mkdir(parents=True, exist_ok=True)
    (tests / "local_config.h").touch()        # the Makefile's probe of optional libraries
    helpers = [h for h in HELPERS if (tests / h).is_file()]
    results = []
    for name in names:
        results.append(_build(name, tests, headers, built / name, helpers, source, run))
    made = [t.name for t in results if t.path is not None]
    progress(f"built the selftests {', '.join(made) or '(none)'} for {source.release} "
             f"({out})" + "".join(f"; {t.name} {t.reason}" for t in results if t.path is None))
    return results


def _takes_directory(tests: Path, name: str) -> bool:
    """Whether ``name``'s source has page-cache cases run in a directory it is given."""
    marker = PAGECACHE.get(name)
    source = tests / f"{name}.c"
    return marker is not None and source.is_file() and marker in source.read_text(
        errors="replace")


def _build(name: str, tests: Path, headers: Path, program: Path, helpers: list[str],
           source: KernelSource, run: Run) -> Selftest:
    pagecache = _takes_directory(tests, name)
    if program.is_file():
        return Selftest(name, program, pagecache=pagecache)
    if not (tests / f"{name}.c").is_file():
        return Selftest(name, None, f"{source.release}'s selftests have no {name}.c")
    proc = run(["cc", "-O2", "-w", "-I..", "-isystem", str(headers / "usr/include"),
                "-I../../../../tools/include/uapi", "-o", str(program), f"{name}.c",
                *helpers, "-lrt", "-lpthread", "-lm"], cwd=tests)
    if proc.returncode == 0:
        return Selftest(name, program, pagecache=pagecache)
    first = next((ln for ln in (proc.stderr + proc.stdout).splitlines() if "error" in ln),
                 last_error(proc))
    return Selftest(name, None, f"does not build: {first.strip()}")


def guest_argv(python: str, tests: list[Selftest], log: str, pytest_argv: list[str],
               places: list[Place], release: str) -> list[str]:
    """The guest's command: the selftests into ``log`` (a test with page-cache cases
    once per place instead, ``NAME [LABEL]``), then pytest (``pytest_argv``, from
    ``python -m pytest`` on) with the log as items."""
    head = [python, "-m", "pytest"]
    if pytest_argv[:3] != head:
        raise ValueError(f"not a pytest command line: {pytest_argv[:3]}")
    runs: list[str] = []
    for test in tests:
        if test.path is None:
            runs.append(f"--missing={test.label}={test.reason}")
        elif not test.pagecache:
            runs.append(f"--program={test.label}={test.path}")
        if test.name not in PAGECACHE:
            continue
        for place in places:
            name = f"{test.label} [{place.label}]"
            why = (test.reason if test.path is None else place.reason or (
                "" if test.pagecache else f"{release}'s {test.name} has no page-cache "
                f"cases (no {PAGECACHE[test.name]} in its source)"))
            runs += ([f"--missing={name}={why}"] if why else
                     [f"--program={name}={test.path}", f"--directory={name}={place.where}"])
    return [python, "-m", "pytest_folio.ktap.run", "--out", log, *runs, "--", *pytest_argv[3:]]
