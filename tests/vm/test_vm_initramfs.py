"""The initramfs: cpio layout, the init script's order, quoting and error path."""

from __future__ import annotations

import shlex
import stat
import subprocess
from pathlib import Path

import pytest

from pytest_folio.vm import VMError, initramfs
from pytest_folio.vm.initramfs import (
    MARK,
    Entry,
    GuestDisk,
    GuestJob,
    build_initramfs,
    cpio_newc,
    find_busybox,
    init_script,
)
from tests.helpers.vm import elf64, read_cpio


def job(**changes: object) -> GuestJob:
    base: dict[str, object]
    base = dict(modules=["virtio", "9p", "virtio_blk", "mtd", "block2mtd", "xfs"],
                module_params={"virtio_blk": "poll_queues=0"},
                cwd="/work/my project",
                argv=["/usr/bin/python3", "-m", "pytest", "-k", "a and not b", "it's"],
                env={"PATH": "/usr/bin:/bin", "HOME": "/run/folio/home"},
                disks=[GuestDisk("folio-mtd-4K", 4096, mtd="/dev/mtd0", erasesize=131072),
                       GuestDisk("folio-mtd-16K", 16384, mtd="/dev/mtd1", erasesize=131072),
                       GuestDisk("folio-xfs-16K", 512, fstype="xfs",
                                 mountpoint="/run/folio/xfs-16K")])
    base.update(changes)
    return GuestJob(**base)  # type: ignore[arg-type]


def test_cpio_round_trip() -> None:
    data = cpio_newc([Entry("bin", stat.S_IFDIR | 0o755),
                      Entry("bin/x", stat.S_IFREG | 0o755, b"abcde"),
                      Entry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1))])
    assert len(data) % 4 == 0
    entries = read_cpio(data)
    assert entries["bin/x"] == (stat.S_IFREG | 0o755, b"abcde", (0, 0))
    assert entries["dev/console"][2] == (5, 1)
    assert stat.S_ISDIR(entries["bin"][0])


def test_initramfs_holds_busybox_modules_and_init(tmp_path: Path) -> None:
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"\x7fELF-static-busybox")
    modules = [("virtio", b"\x7fELF-virtio"), ("block2mtd", b"\x7fELF-b2m")]
    entries = read_cpio(build_initramfs(busybox, modules, job()))
    assert entries["bin/busybox"][1] == busybox.read_bytes()
    assert entries["bin/sh"][1] == b"busybox" and stat.S_ISLNK(entries["bin/sh"][0])
    assert entries["lib/modules/block2mtd.ko"][1] == b"\x7fELF-b2m"
    assert entries["dev/console"][2] == (5, 1)  # init's stdout before devtmpfs is up
    assert entries["init"][0] & 0o111
    assert entries["init"][1].decode() == init_script(job())
    assert {"newroot", "proc", "sys", "dev"} <= set(entries)


def test_init_loads_modules_in_order_with_parameters() -> None:
    script = init_script(job())
    insmods = [ln.split()[1] for ln in script.splitlines() if ln.startswith("insmod")]
    assert insmods == [f"/lib/modules/{m}.ko" for m in job().modules]
    assert "insmod /lib/modules/virtio_blk.ko poll_queues=0 ||" in script
    # the host root read-only, scratch space and the ramfs under /run, results share
    assert ",ro,cache=loose folioroot /newroot" in script
    assert "mount -t ramfs ramfs /newroot/run/folio/ramfs" in script
    assert "folioout /newroot/run/folio/out" in script
    assert script.index("/dev/mtd1 on /dev/$dev") < script.index(f"{MARK} start")


def test_init_attaches_block2mtd_per_disk_and_mounts_each_file_system() -> None:
    script = init_script(job())
    attach = "echo /dev/$dev,131072 > /sys/module/block2mtd/parameters/block2mtd"
    assert script.count(attach) == 2
    assert 'grep -q "^mtd1: .*block2mtd: /dev/$dev" /proc/mtd || fail' in script
    assert "mount -t xfs /dev/$dev /newroot/run/folio/xfs-16K || fail" in script
    assert script.index("mount -t tmpfs -o mode=0755") < script.index("mount -t xfs")


def fake_sysfs(tmp_path: Path, script: str) -> str:
    """The init script's device functions pointed at a fake /sys and tracefs."""
    block = tmp_path / "sys/block"
    for name, serial, dev, lbs in (("vda", "folio-mtd-4K", "254:0", 4096),
                                   ("vdb", "folio-mtd-16K", "254:16", 16384)):
        (block / name / "queue").mkdir(parents=True)
        (block / name / "serial").write_text(serial + "\n")
        (block / name / "dev").write_text(dev + "\n")
        (block / name / "queue/logical_block_size").write_text(f"{lbs}\n")
    event = tmp_path / "tracing/events/filemap/mm_filemap_add_to_page_cache"
    event.mkdir(parents=True)
    (event / "enable").write_text("0\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # dd "reads" vdb: what the kernel's tracepoint would log, and a 9p file's folio
    (bin_dir / "dd").write_text(
        "#!/bin/sh\nt=" + str(tmp_path / "tracing/trace") + "\n" + "".join(
            f"echo ' dd-9 [000] .. 1.0: mm_filemap_add_to_page_cache: dev 0:3 ino {ino} "
            f"pfn=0x1 ofs={ofs} order={order}' >> $t\n"
            for ino, ofs, order in (("fe00010", 0, 2), ("fe00010", 16384, 2),
                                    ("fe00010", 32768, 4), ("2a", 0, 0))))
    (bin_dir / "dd").chmod(0o755)
    return (script.replace("/sys/block", str(block))
            .replace(initramfs.TRACING, str(tmp_path / "tracing"))
            .replace("export PATH=/bin", f"export PATH={bin_dir}:/usr/bin:/bin"))


def test_disk_is_found_by_serial_and_folios_by_tracepoint(tmp_path: Path) -> None:
    functions = fake_sysfs(tmp_path, "export PATH=/bin\n" + initramfs._FUNCTIONS)
    out = subprocess.run(["sh", "-c", functions + "disk folio-mtd-16K; folios vdb"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split("\n", 1) == ["vdb", "2x2 1x4 "]  # the 9p file's folio left out


def test_folios_without_the_tracepoint_says_none(tmp_path: Path) -> None:
    functions = fake_sysfs(tmp_path, "export PATH=/bin\n" + initramfs._FUNCTIONS)
    (tmp_path / "tracing/events/filemap/mm_filemap_add_to_page_cache/enable").unlink()
    out = subprocess.run(["sh", "-c", functions + "folios vdb"], capture_output=True,
                         text=True, check=True)
    assert out.stdout == "none\n"


def test_init_script_is_valid_shell() -> None:
    subprocess.run(["sh", "-n"], input=init_script(job()), text=True, check=True)


def test_guest_command_survives_quoting(tmp_path: Path) -> None:
    """Run the script's chroot line with chroot replaced: argv and env arrive intact."""
    probe = tmp_path / "probe.py"
    probe.write_text("import json, os, sys\n"
                     "print(json.dumps([os.getcwd(), sys.argv[1:], os.environ.get('ODD')]))\n")
    cwd = tmp_path / "dir with 'quotes' and $x"
    cwd.mkdir()
    argv = ["python3", str(probe), "a b", "it's", "$HOME", '"q"', "--x=*"]
    script = init_script(job(cwd=str(cwd), argv=argv,
                             env={"PATH": "/usr/bin:/bin", "ODD": "x y'z"}))
    line = next(ln for ln in script.splitlines() if ln.startswith("chroot "))
    fake = "chroot() { shift; \"$@\"; }\n" + line + "\n"
    out = subprocess.run(["sh", "-c", fake], capture_output=True, text=True, check=True)
    import json
    assert json.loads(out.stdout) == [str(cwd), argv[2:], "x y'z"]


def test_init_failure_path_reports_one_marked_line(tmp_path: Path) -> None:
    """An insmod that fails prints the MARK error line and powers off (faked commands)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {"insmod": "exit 1", "dmesg": "echo 'virtio: unknown parameter'",
                       "poweroff": "echo POWEROFF; exit 0", "mount": "exit 0",
                       "sync": "exit 0"}.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = init_script(job()).replace("export PATH=/bin", f"export PATH={bin_dir}:/usr/bin:/bin")
    # the real poweroff never returns; the fake one does, so stop at the first one
    script = script.replace("poweroff -f; }", "poweroff -f; exit 0; }")
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True)
    lines = out.stdout.splitlines()
    assert lines[0] == f"{MARK} init"
    assert lines[1] == f"{MARK} error insmod virtio failed: virtio: unknown parameter"
    assert lines[2:] == ["POWEROFF"]


def test_find_busybox_wants_a_static_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    dynamic = bytearray(elf64({".text": b"\x90"}, notes=[(b"x", 1, b"")]))
    dynamic[64:68] = (3).to_bytes(4, "little")  # the segment becomes PT_INTERP
    (tmp_path / "dynamic").write_bytes(bytes(dynamic))
    (tmp_path / "static").write_bytes(elf64({".text": b"\x90"}))
    monkeypatch.setattr(initramfs, "BUSYBOX_CANDIDATES", (str(tmp_path / "dynamic"),))
    with pytest.raises(VMError, match=r"^no static busybox found: install busybox-static"):
        find_busybox()
    monkeypatch.setattr(initramfs, "BUSYBOX_CANDIDATES",
                        (str(tmp_path / "dynamic"), str(tmp_path / "static")))
    assert find_busybox() == tmp_path / "static"


def test_quoted_env_values() -> None:
    script = init_script(job(env={"PYTHONPATH": "/a b", "HOME": "/h"}))
    assert shlex.quote("PYTHONPATH=/a b") in script


def test_a_missing_large_block_disk_names_the_config_it_needs() -> None:
    """virtio_blk refuses a logical block above PAGE_SIZE on a kernel without THP."""
    large = "\n".join(initramfs.disk_lines([GuestDisk("folio-mtd-16K", 16384,
                                                      mtd="/dev/mtd1", erasesize=131072)]))
    small = "\n".join(initramfs.disk_lines([GuestDisk("folio-mtd-4K", 4096,
                                                      mtd="/dev/mtd0", erasesize=131072)]))
    assert "needs CONFIG_TRANSPARENT_HUGEPAGE" in large
    assert "CONFIG_TRANSPARENT_HUGEPAGE" not in small


def _run_ramfs_lines(tmp_path: Path, has_option: bool) -> tuple[list[str], str]:
    """ramfs_lines for 4k, 16k, 2M against faked mount/stat/dd: a kernel with or without
    the blocksize option, which refuses 2M (mount fails) when it has it."""
    mounts, trace, bin_dir = tmp_path / "mounts", tmp_path / "tracing/trace", tmp_path / "bin"
    (tmp_path / "tracing/events/filemap/mm_filemap_add_to_page_cache").mkdir(parents=True)
    (tmp_path / "tracing/events/filemap/mm_filemap_add_to_page_cache/enable").write_text("0")
    bin_dir.mkdir()
    mounts.write_text("")
    opt = ",blocksize=$kb" if has_option else ""
    fakes = {
        "mount": f'kb=${{4#blocksize=}}; [ "$kb" = 2048k ] && [ {int(has_option)} = 1 ] && '
                 f'exit 1; echo "ramfs $6 ramfs rw{opt} 0 0" >> {mounts}',
        "umount": f"grep -v \" $1 \" {mounts} > {mounts}.new; mv {mounts}.new {mounts}",
        "stat": f'if [ "$1" = -f ]; then kb=$(grep " $4 " {mounts} | sed -n '
                f"'s/.*blocksize=\\([0-9]*\\)k.*/\\1/p'); echo $(( ${{kb:-4}} * 1024 )); "
                "else echo 42; fi",
        "dd": f"echo ' dd-9 [000] .. 1.0: mm_filemap_add_to_page_cache: dev 0:30 ino 2a "
              f"pfn=0x1 ofs=0 order=2' >> {trace}",
        "dmesg": "echo 'ramfs: blocksize=2048k: above the largest folio'",
        "rm": "exit 0", "mkdir": "exit 0",
    }
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    (tmp_path / "newroot/run/folio").mkdir(parents=True)
    script = "\n".join([f"export PATH={bin_dir}:/usr/bin:/bin",
                        "fail() { echo \"FAIL $*\"; exit 1; }", initramfs._FUNCTIONS,
                        *initramfs.ramfs_lines((4096, 16384, 2 << 20))])
    script = (script.replace("/proc/mounts &&", f"{mounts} &&")
              .replace(initramfs.TRACING, str(tmp_path / "tracing"))
              .replace("/newroot", str(tmp_path / "newroot")))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    args = (tmp_path / "newroot/run/folio/ramfs.args").read_text().strip()
    return [ln.replace(str(tmp_path), "") for ln in out.stdout.splitlines()], args


def test_a_ramfs_per_block_size_when_the_kernel_has_the_option(tmp_path: Path) -> None:
    lines, args = _run_ramfs_lines(tmp_path, has_option=True)
    assert lines == [f"{MARK} ramfs /run/folio/ramfs-4K 4096 1x2 ",
                     f"{MARK} ramfs /run/folio/ramfs-16K 16384 1x2 ",
                     f"{MARK} ramfs-skip 2097152 mount -o blocksize=2048k failed: ramfs: "
                     "blocksize=2048k: above the largest folio"]
    assert args == ("--folio-fs=4K=/run/folio/ramfs-4K,16K=/run/folio/ramfs-16K "
                    "--folio-block-sizes=4k,16k")


def test_without_the_option_only_the_page_size_ramfs_is_kept(tmp_path: Path) -> None:
    lines, args = _run_ramfs_lines(tmp_path, has_option=False)
    assert lines[0] == f"{MARK} ramfs /run/folio/ramfs-4K 4096 1x2 "
    assert lines[1:] == [f"{MARK} ramfs-skip {bs} the kernel has no ramfs blocksize mount "
                         "option (/proc/mounts shows none)" for bs in (16384, 2 << 20)]
    assert args == "--folio-fs=4K=/run/folio/ramfs-4K --folio-block-sizes=4k"


def test_the_guest_command_takes_the_ramfs_options_the_guest_wrote() -> None:
    line = initramfs.command_line(["python3", "-m", "pytest", initramfs.RAMFS_ARGS, "a b"])
    assert line == f"python3 -m pytest $(cat {initramfs.GUEST_RAMFS_ARGS}) 'a b'"
    script = init_script(job(ramfs_sizes=(4096, 16384)))
    assert "mount -t ramfs -o blocksize=16k ramfs /newroot/run/folio/ramfs-16K" in script
    subprocess.run(["sh", "-n"], input=script, text=True, check=True)
