"""``vm --guest SPEC``: a matrix of guests in one session.

The SPEC's syntax and its one-line errors; the matrix's item ids, deselection and
scheduling with a stand-in qemu whose guests each keep ramfs "mounts" in directories of
their own (so a worker that ran an item against another guest's target would be seen);
and ``compare`` of two saved matrix runs as one grid.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_folio.cli import main
from pytest_folio.measurement import Measurement
from pytest_folio.vm import lab
from pytest_folio.vm.build import Built
from pytest_folio.vm.guestplugin import MatrixController, pytest_folio_measurement
from pytest_folio.vm.kernel import REQUIRED_MODULES, WORKER_MODULES
from pytest_folio.vm.lab import controller_targets
from pytest_folio.vm.matrix import (
    Group,
    GuestParam,
    GuestSpec,
    Matrix,
    default_label,
    parse_guest_spec,
)
from pytest_folio.vm.scheduler import MatrixScheduling, collection_diff
from tests.helpers.vm import (
    FAKE_GUEST_START,
    alive,
    bzimage,
    fake_machine,
    kernel_tree,
    module,
)


def test_a_spec_names_kernel_fs_sizes_orders_and_a_label() -> None:
    spec = parse_guest_spec("kernel=debian:bookworm-backports, fs=xfs,"
                            "block-sizes=4k+64K,orders=0+2,name=bpo")
    assert spec == GuestSpec(suite="bookworm-backports", fs="xfs",
                             block_sizes=(4096, 65536), orders=(0, 2), name="bpo")
    assert parse_guest_spec("patch=a.patch+dir/b.diff").patches == (Path("a.patch"),
                                                                     Path("dir/b.diff"))
    assert parse_guest_spec("kernel=vmlinuz,modules=lib/modules/7.2") == GuestSpec(
        kernel=Path("vmlinuz"), modules=Path("lib/modules/7.2"))
    assert parse_guest_spec("fs=ext4") == GuestSpec(fs="ext4")


@pytest.mark.parametrize(("spec", "message"), [
    ("", "--guest : empty"),
    ("kernel", "--guest kernel: 'kernel' is not key=value"),
    ("fs=", "--guest fs=: 'fs=' is not key=value"),
    ("colour=red", "--guest colour=red: unknown key 'colour' (keys: kernel, modules"),
    ("fs=xfs,fs=ext4", "--guest fs=xfs,fs=ext4: fs given twice"),
    ("fs=btrfs", "--guest fs=btrfs: fs=btrfs: not one of ramfs, xfs, ext4"),
    ("block-sizes=4k+3k", "--guest block-sizes=4k+3k: block-sizes=4k+3k: block size 3072 "
                          "must be a power of two"),
    ("block-sizes=4k+4K", "block-sizes=4k+4K: 4K twice"),
    ("orders=0+99", "--guest orders=0+99: orders=0+99: "),
    ("kernel=debian:", "--guest kernel=debian:: not a Debian suite name"),
    ("modules=/lib/modules", "modules= goes with kernel=IMAGE"),
    ("name=a/b", "name=a/b: letters, digits and _.+@- only"),
    ("host=lab1", "--guest host=lab1: host=lab1 is not a --host"),
    ("patch=a.patch+a.patch", "--guest patch=a.patch+a.patch: patch=a.patch+a.patch: a "
                              "patch given twice"),
    ("patch=nope.patch", "--guest patch=nope.patch: patch=nope.patch: "),
])
def test_a_bad_spec_is_one_usage_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      spec: str, message: str) -> None:
    status = main(["vm", "--cache-dir", str(tmp_path / "cache"), "--guest", spec])
    err = capsys.readouterr().err
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(("args", "message"), [
    (["--guests", "2"], "--guests N and --guest SPEC do not go together"),
    (["--power-cut"], "--guest and --power-cut do not go together yet"),
    (["--patch", str(Path(__file__).parents[2] / "examples/seeds/block2mtd-folio.patch")],
     "--guest and --patch do not go together yet: a matrix boots "
     "each kernel as it is, or with the modules its SPEC's patch="),
])
def test_options_a_matrix_does_not_take_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
        message: str) -> None:
    status = main(["vm", "--cache-dir", str(tmp_path / "cache"), "--guest", "fs=xfs", *args])
    err = capsys.readouterr().err
    assert status == 2 and message in err, err


def group(label: str, sizes: tuple[int, ...], mtd: str = "4K=/dev/mtd0") -> Group:
    fs_map = ",".join(f"{s >> 10}K=/run/folio/{label}-{s >> 10}K" for s in sizes)
    return Group(label, label.partition("@")[2], label.partition("@")[0], (0,), sizes, mtd,
                 fs_map)


def test_a_matrix_names_each_items_group_by_the_end_of_its_id() -> None:
    matrix = Matrix.of({"guest1": group("xfs@6.1.0-57-amd64", (4096,)),
                        "guest2": group("xfs@6.1.0-57-amd64-rt", (4096,)),
                        "guest3": group("xfs@6.1.0-57-amd64", (4096,))})
    assert [g.label for g in matrix.groups] == ["xfs@6.1.0-57-amd64", "xfs@6.1.0-57-amd64-rt"]
    assert matrix.guests["guest3"] == "xfs@6.1.0-57-amd64"
    assert matrix.label_of("t.py::test_fsx[4K-xfs@6.1.0-57-amd64-rt]") \
        == "xfs@6.1.0-57-amd64-rt"
    assert matrix.label_of("t.py::test_fsx[xfs@6.1.0-57-amd64]") == "xfs@6.1.0-57-amd64"
    assert matrix.label_of("t.py::test_model[4K]") is None
    assert matrix.label_of("t.py::test_model") is None
    assert Matrix.from_json(matrix.to_json()) == matrix


def test_two_guests_of_one_label_must_be_alike() -> None:
    with pytest.raises(ValueError, match=r"guests guest1 and guest2 are both xfs@6\.1 but "
                                         r"differ in orders, block sizes or patches"):
        Matrix.of({"guest1": group("xfs@6.1", (4096,)), "guest2": group("xfs@6.1",
                                                                        (4096, 65536))})


def test_the_controller_gets_one_path_per_size_and_the_matrixs_sizes() -> None:
    matrix = Matrix.of({"guest1": group("xfs@6.1", (4096,)),
                        "guest2": group("ext4@7.2", (4096, 16384),
                                        "4K=/dev/mtd0,16K=/dev/mtd1")})
    assert controller_targets(matrix) == [
        "--folio-mtd=4K=/dev/mtd0,16K=/dev/mtd1",
        "--folio-fs=4K=/run/folio/xfs@6.1-4K,16K=/run/folio/ext4@7.2-16K",
        "--folio-orders=0", "--folio-block-sizes=4K,16K"]


def test_collections_that_differ_are_shown_where_they_differ() -> None:
    assert collection_diff(["a", "b"], ["a", "b"], "guest1", "guest2") == ""
    diff = collection_diff(["a", "b"], ["a", "c"], "guest1", "guest2")
    assert "guests guest1 and guest2 collected different items" in diff
    assert "-b" in diff and "+c" in diff


FAKE_QEMU = FAKE_GUEST_START + r'''
kernel = args[args.index("-kernel") + 1]
say(f"@@folio-vm kernel [    0.000000] Linux version {os.path.basename(kernel)} (gcc) #1")
say("@@folio-vm mtd /dev/mtd0 /dev/vda 4096 64x0 ")
# every ramfs size the init mounts, "kept" in a directory of this guest's own
for size in dict.fromkeys(re.findall(r"-o blocksize=(\d+)k", init)):
    # a directory of this guest's own; FAKE_SHARED_RAMFS: at one path in every guest,
    # as real guests have it (/run/folio/ramfs-4K)
    where = os.path.join(fake, ("" if os.environ.get("FAKE_SHARED_RAMFS") else f"{name}-")
                         + f"ramfs-{size}K")
    os.makedirs(where, exist_ok=True)
    say(f"@@folio-vm ramfs {where} {int(size) << 10} 64x0")
# which block2mtd the initramfs carries: a patched build's vermagic ends with a marker
os.environ["FAKE_BLOCK2MTD"] = "patched" if "folio-test-patched" in init else "stock"
# and where init tells pytest the kernel's mtd tests are (vm --mtd-tests)
mtd_tests = re.search(r"PYTEST_FOLIO_KERNEL_MTD_TESTS=([^' ]+)", init)
os.environ["FAKE_MTD_TESTS"] = mtd_tests.group(1) if mtd_tests else ""
server = start_worker()
while server.poll() is None:
    if os.path.exists(os.path.join(fake, f"panic-{name}")):
        say("[   12.000000] Kernel panic - not syncing: fake panic in " + name)
        os.killpg(0, 9)     # qemu exits, and the guest with it
    say("@@folio-vm alive")
    time.sleep(0.2)
say(f"@@folio-vm exit {server.returncode}")
'''

MATRIX_TESTS = """
import os, time
import pytest

def test_fs(filesystem, folio_timer):
    where = os.path.basename(os.path.dirname(filesystem.root))
    assert where.startswith(os.environ["PYTEST_FOLIO_GUEST"] + "-ramfs-"), where
    with folio_timer("list"):
        os.listdir(filesystem.root)

def test_model():
    pass

@pytest.fixture
def kernel_ramfs():
    return "a kernel ramfs of this guest's own"

def test_kernel(kernel_ramfs, block_size):
    pass

def test_down(filesystem):
    if os.environ.get("FAKE_PANIC") == os.environ["PYTEST_FOLIO_GUEST"]:
        open(os.path.join(os.environ["FAKE_DIR"], "panic-" + os.environ["FAKE_PANIC"]),
             "w").close()
        time.sleep(60)
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    (tmp_path / "test_matrix.py").write_text(MATRIX_TESTS)
    where = fake_machine(tmp_path, monkeypatch, FAKE_QEMU)
    (where / "bzImage2").write_bytes(bzimage(b"", "7.2.0-other"))
    return where


def vm_matrix(fake: Path, *args: str) -> int:
    return main(["vm", "--kernel", str(fake / "bzImage"), "--cache-dir", str(fake / "cache"),
                 "--timeout", "120", "--guest", "block-sizes=4k",
                 "--guest", f"kernel={fake / 'bzImage2'},block-sizes=4k+16k",
                 "--", "test_matrix.py", "-p", "no:randomly", "-v", "--folio-failures",
                 "fails", *args])


def test_a_two_kernel_matrix_runs_each_item_on_its_own_guest(
        fake: Path, capfd: pytest.CaptureFixture[str]) -> None:
    status = vm_matrix(fake, "--folio-save", "a.json", "-k", "not down")
    out, err = capfd.readouterr()
    assert status == 0, out + err
    assert "folio-vm: guest1: kernel 6.1.0-test, ramfs" in err
    assert "folio-vm: ramfs@7.2.0-other: guest2" in err
    assert ("folio: guests guest1: ramfs@6.1.0-test, orders 0, block sizes 4K\n"
            "folio: guests guest2: ramfs@7.2.0-other, orders 0,2,4, block sizes 4K,16K\n"
            ) in out, out
    # ids name each guest's kernel and file system; 16K only where guest2 has it
    ran = {item: guest for guest, item in re.findall(
        r"^\[(guest\d)\] .*PASSED test_matrix.py::(test_fs\[[^\]]+\])", out, re.M)}
    assert ran == {"test_fs[4K-ramfs@6.1.0-test]": "guest1",
                   "test_fs[4K-ramfs@7.2.0-other]": "guest2",
                   "test_fs[16K-ramfs@7.2.0-other]": "guest2"}, out
    assert re.search(r"^\[guest\d\] .*PASSED test_matrix.py::test_model ", out, re.M)
    # a test that mounts its own kernel ramfs runs on every kernel at every size (the
    # guest's kernel answers it, not the devices made for the group)
    kernel = {item: guest for guest, item in re.findall(
        r"^\[(guest\d)\] .*PASSED test_matrix.py::(test_kernel\[[^\]]+\])", out, re.M)}
    assert kernel == {"test_kernel[4K-ramfs@6.1.0-test]": "guest1",
                      "test_kernel[16K-ramfs@6.1.0-test]": "guest1",
                      "test_kernel[4K-ramfs@7.2.0-other]": "guest2",
                      "test_kernel[16K-ramfs@7.2.0-other]": "guest2"}, out
    assert " 8 passed" in out.splitlines()[-1], out
    saved = json.loads((fake / "a.json").read_text())
    params = sorted((m["params"]["kernel"], m["params"]["fs"], m["params"]["bs"])
                    for m in saved["measurements"])
    assert params == [("6.1.0-test", "ramfs", "4K"), ("7.2.0-other", "ramfs", "16K"),
                      ("7.2.0-other", "ramfs", "4K")]
    assert {m["target"] for m in saved["measurements"]} == {"vm --guest"}
    assert not any(alive(pid) for pid in (int(p) for p in
                                           (fake / "qemu.pid").read_text().split()))
    # compare of two saved matrix runs: one grid, a row per kernel and block size
    assert vm_matrix(fake, "--folio-save", "b.json", "-k", "not down") == 0
    capfd.readouterr()
    assert main(["compare", str(fake / "a.json"), str(fake / "b.json")]) == 0
    grid = capfd.readouterr().out
    rows = [ln for ln in grid.splitlines() if "kernel=" in ln]
    assert any("kernel=6.1.0-test" in ln for ln in rows), grid
    assert sum("kernel=7.2.0-other" in ln for ln in rows) == 2, grid


def test_the_items_of_a_group_whose_guests_all_went_down_are_named_as_not_run(
        fake: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
        ) -> None:
    """guest2, the only guest of its kernel, panics in its first test_down item: that
    item crashed; its other one cannot run anywhere, and the run says so and fails."""
    monkeypatch.setenv("FAKE_PANIC", "guest2")
    status = vm_matrix(fake, "-k", "down")
    out, err = capfd.readouterr()
    assert status == 1, out + err
    assert re.search(r"guest2 panicked: \[   12.000000\] Kernel panic - not syncing: fake "
                     r"panic in guest2 \(its console's last \d+ lines: ", err), err
    assert re.search(r"^\[guest1\] .*PASSED test_matrix.py::test_down\[4K-ramfs@6.1.0-test\]",
                     out, re.M), out
    assert ("worker 'guest2' crashed while running "
            "'test_matrix.py::test_down[4K-ramfs@7.2.0-other]'") in out, out
    assert ("folio: 1 test(s) not run, no guest of ramfs@7.2.0-other was left:\n"
            "    test_matrix.py::test_down[16K-ramfs@7.2.0-other]\n") in out, out


def test_items_left_without_a_guest_fail_a_run_that_would_pass() -> None:
    """A guest that went down between two items crashed none: the run's exit status
    would be 0 with items never run."""
    controller = MatrixController(Matrix.of({"guest1": group("xfs@6.1", (4096,))}))
    controller.scheduler = SimpleNamespace(not_run=lambda: {"xfs@6.1": ["t.py::a[xfs@6.1]"]})
    session = SimpleNamespace(exitstatus=pytest.ExitCode.OK)
    controller.pytest_sessionfinish(session)  # type: ignore[arg-type]
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    controller.scheduler = SimpleNamespace(not_run=lambda: {})
    session = SimpleNamespace(exitstatus=pytest.ExitCode.OK)
    controller.pytest_sessionfinish(session)  # type: ignore[arg-type]
    assert session.exitstatus == pytest.ExitCode.OK


@pytest.mark.parametrize(("label", "target"), [
    ("xfs@7.2.13", "vm --guest"),
    ("patched", "patched"),
])
def test_a_matrix_items_measurements_name_its_guest(label: str, target: str) -> None:
    item = SimpleNamespace(callspec=SimpleNamespace(
        params={"filesystem": 16384, "folio_guest": GuestParam(label, "7.2.13", "xfs")}))
    measurement = Measurement("fsx", "fsx operations", "ops/s", [1.0], {"bs": "16K"},
                              target="16K=/run/folio/xfs-16K")
    pytest_folio_measurement(item, measurement)  # type: ignore[arg-type]
    assert measurement.params == {"bs": "16K", "kernel": "7.2.13", "fs": "xfs"}
    assert measurement.target == target
    model = Measurement("m", "n", "ms", [1.0], {"bs": "4K"}, target="reference")
    pytest_folio_measurement(SimpleNamespace(), model)  # type: ignore[arg-type]
    assert model.params == {"bs": "4K"} and model.target == "reference"


class FakeNode:
    """xdist's WorkerController as the scheduler uses it."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices

    def shutdown(self) -> None:
        self.shutting_down = True


def test_the_scheduler_keeps_each_item_on_its_group_and_ends_each_guest() -> None:
    matrix = Matrix.of({"guest1": group("xfs@6.1", (4096,)),
                        "guest2": group("xfs@7.2", (4096,)),
                        "guest3": group("xfs@7.2", (4096,))})
    config = SimpleNamespace(getoption=lambda name: ["a", "b", "c"], hook=None)
    sched = MatrixScheduling(config, matrix, lambda *a: None)  # type: ignore[arg-type]
    ids = ["t.py::a[4K-xfs@6.1]", "t.py::m", "t.py::a[4K-xfs@7.2]", "t.py::b[4K-xfs@7.2]",
           "t.py::c[4K-xfs@7.2]", "t.py::d[4K-xfs@7.2]"]
    one, two, three = FakeNode("guest1"), FakeNode("guest2"), FakeNode("guest3")
    for node in (one, two, three):
        sched.add_node(node)
        sched.add_node_collection(node, ids)
    assert sched.collection_is_completed
    sched.schedule()
    # guest1: its group's item and the model item, then told there is nothing more (so
    # it runs its last one at once); guest2 and guest3 share their group's four, and
    # guest3, which took the last of them, is told too
    assert one.sent == [0, 1] and one.shutting_down
    assert two.sent == [2, 3] and three.sent == [4, 5]
    assert not two.shutting_down and three.shutting_down
    assert not sched.tests_finished
    # guest2 goes down running item 2: item 3 goes back to its group, where no guest
    # is left to take it
    assert sched.remove_node(two) == ids[2]
    assert sched.not_run() == {"xfs@7.2": [ids[3]]}
    for index in (0, 1):
        sched.mark_test_complete(one, index)
    for index in (4, 5):
        sched.mark_test_complete(three, index)
    assert sched.tests_finished and sched.not_run() == {"xfs@7.2": [ids[3]]}


def test_items_a_guest_gives_back_go_to_another_guest_of_their_group() -> None:
    matrix = Matrix.of({"guest1": group("xfs@7.2", (4096,)),
                        "guest2": group("xfs@7.2", (4096,))})
    config = SimpleNamespace(getoption=lambda name: ["a", "b"], hook=None)
    sched = MatrixScheduling(config, matrix, lambda *a: None)  # type: ignore[arg-type]
    ids = [f"t.py::{n}[4K-xfs@7.2]" for n in "abcdef"]
    one, two = FakeNode("guest1"), FakeNode("guest2")
    for node in (one, two):
        sched.add_node(node)
        sched.add_node_collection(node, ids)
    sched.schedule()
    assert one.sent == [0, 1] and two.sent == [2, 3]
    sched.mark_test_complete(two, 2)
    sched.mark_test_complete(two, 3)      # guest2 takes what is left: 4 and 5
    assert two.sent == [2, 3, 4, 5]
    sched.remove_pending_tests_from_node(one, [1])    # guest1 gives item 1 back
    assert one.sent == [0, 1, 1]          # and, its group's only guest with room, takes it again
    assert sorted(sched.node2pending[one]) == [0, 1]


def test_two_named_guests_of_one_kernel_are_base_and_patched_of_one_run(
        fake: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The interleaved base/patched boot as two guests: one kernel (here, one image;
    in use, a stock and a patched build of one release), two names; one saved run
    compares its two sides."""
    status = main(["vm", "--kernel", str(fake / "bzImage"), "--cache-dir",
                   str(fake / "cache"), "--timeout", "120", "--guest", "name=base",
                   "--guest", "name=patched", "--", "test_matrix.py", "-p", "no:randomly",
                   "-v", "-k", "test_fs", "--folio-block-sizes=4k", "--folio-save", "one.json"])
    out, err = capfd.readouterr()
    assert status == 0, out + err
    ran = {item: guest for guest, item in re.findall(
        r"^\[(guest\d)\] .*PASSED test_matrix.py::(test_fs\[[^\]]+\])", out, re.M)}
    assert ran == {"test_fs[4K-base]": "guest1", "test_fs[4K-patched]": "guest2"}, out
    # saved in collection order, where the groups are in the order of the --guest
    # options: the first guest's is the base column, whichever guest finished first
    saved = json.loads((fake / "one.json").read_text())
    assert [m["target"] for m in saved["measurements"]] == ["base", "patched"]
    assert main(["compare", str(fake / "one.json")]) == 0
    table = capfd.readouterr().out
    header = next(ln for ln in table.splitlines() if "Base" in ln)
    assert "Patched" in header, table
    [row] = [ln for ln in table.splitlines() if "kernel=6.1.0-test" in ln]
    assert re.search(r"\| +4K,fs=ramfs,kernel=6.1.0-test +\| +[\d.]+ .*\| +[\d.]+ ", row), table


def test_a_guest_whose_kernel_takes_none_of_its_sizes_is_one_line_before_booting(
        fake: Path, capfd: pytest.CaptureFixture[str]) -> None:
    status = main(["vm", "--kernel", str(fake / "bzImage"), "--cache-dir",
                   str(fake / "cache"), "--guest", "fs=xfs,block-sizes=64k", "--",
                   "test_matrix.py"])
    err = capfd.readouterr().err
    assert status == 125, err
    assert err.splitlines()[-2:] == [
        "folio-vm: guest1: xfs at 64K blocks: skipped (xfs blocks above PAGE_SIZE need "
        "Linux 6.12 or later, not 6.1.0-test)",
        "python -m pytest_folio vm: error: no --folio-block-sizes size xfs can have on "
        "kernel 6.1.0-test"], err
    assert not (fake / "qemu.pid").exists()


def test_a_patch_label_names_the_patches_after_the_kernel() -> None:
    assert default_label("6.1.0-57-amd64", "xfs") == "xfs@6.1.0-57-amd64"
    assert default_label("6.1.0-57-amd64", "xfs", [Path("seeds/block2mtd-folio.patch"),
                                                   Path("a b.diff")]) \
        == "xfs@6.1.0-57-amd64+block2mtd-folio+a_b"


SIDE_TESTS = """
import os

def test_side(filesystem, request, folio_timer):
    label = request.node.callspec.params["folio_guest"].label
    side = "patched" if label.endswith("+fix") else "stock"
    assert os.environ["FAKE_BLOCK2MTD"] == side, (label, os.environ["FAKE_BLOCK2MTD"])
    assert os.environ["FAKE_MTD_TESTS"].endswith("mtd-tests-" + side)
    with folio_timer("list"):
        os.listdir(filesystem.root)
"""


def test_a_stock_and_a_patched_guest_of_one_kernel_are_base_and_patched(
        fake: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
        ) -> None:
    """patch= in a SPEC: that guest boots its kernel with the modules the patch changes
    built (here stood in) and loaded instead of the stock ones, and with --mtd-tests
    each guest gets the kernel's mtd tests built from its own tree; its items are a
    group and a target of their own, so one saved run compares the two sides."""
    (fake / "test_side.py").write_text(SIDE_TESTS)
    (fake / "fix.patch").write_text("--- a/drivers/mtd/devices/block2mtd.c\n+++ "
                                    "b/drivers/mtd/devices/block2mtd.c\n@@ -1 +1 @@\n-a\n+b\n")
    kernel_tree(fake / "k", "6.1.0-test", {f"kernel/{n}.ko": module()
                                           for n in {**REQUIRED_MODULES, **WORKER_MODULES}})
    ko = fake / "block2mtd.ko"
    ko.write_bytes(module(vermagic="6.1.0-test SMP mod_unload folio-test-patched"))
    builds: list[list[Path]] = []

    def build(kernel: object, patches: list[Path], *args: object, **kwargs: object) -> Built:
        builds.append(patches)
        side = "patched" if patches else "stock"
        return Built({"block2mtd": ko} if patches else {}, fake / f"mtd-tests-{side}",
                     fake / "build.log", "fix.patch" if patches else "")
    monkeypatch.setattr(lab, "build_for_kernel", build)
    status = main(["vm", "--kernel", str(fake / "bzImage"), "--modules", str(fake / "k"),
                   "--cache-dir", str(fake / "cache"), "--timeout", "120", "--mtd-tests",
                   "--guest", "block-sizes=4k", "--guest", "block-sizes=4k,patch=fix.patch",
                   "--", "test_side.py", "-p", "no:randomly", "-v", "--folio-save",
                   "one.json"])
    out, err = capfd.readouterr()
    assert status == 0, out + err
    assert builds == [[], [Path("fix.patch")]]
    assert "folio-vm: guest2: loaded block2mtd built with fix.patch" in err, err
    assert "folio-vm: guest1: loaded" not in err, err
    assert ("folio: guests guest2: ramfs@6.1.0-test+fix, orders 0, block sizes 4K, modules "
            "built with fix.patch\n") in out, out
    ran = {item: guest for guest, item in re.findall(
        r"^\[(guest\d)\] .*PASSED test_side.py::(test_side\[[^\]]+\])", out, re.M)}
    assert ran == {"test_side[4K-ramfs@6.1.0-test]": "guest1",
                   "test_side[4K-ramfs@6.1.0-test+fix]": "guest2"}, out
    saved = json.loads((fake / "one.json").read_text())
    assert [m["target"] for m in saved["measurements"]] == ["vm --guest",
                                                            "ramfs@6.1.0-test+fix"]
    assert main(["compare", str(fake / "one.json")]) == 0
    table = capfd.readouterr().out
    header = next(ln for ln in table.splitlines() if "Base" in ln)
    assert "Patched" in header, table
    assert re.search(r"\| +4K,fs=ramfs,kernel=6.1.0-test +\| +[\d.]+ .*\| +[\d.]+ ", table), \
        table
