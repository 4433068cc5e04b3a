"""Run pytest inside a Linux kernel booted under qemu (``python -m pytest_folio vm``).

The guest sees the host's root file system read-only over 9p, so the host's Python and
this package run inside unchanged; it gets a RAM disk with the kernel's block2mtd on it as
``/dev/mtd0`` and a kernel ramfs, and pytest runs with the real-device and real-directory
targets pointed at them. Modules: :mod:`.kernel` (fetch, cache, modules, vmlinux),
:mod:`.initramfs` (the guest's first user space), :mod:`.qemu` (command line, boot, the
timeout), :mod:`.runner` (the subcommand).
"""

from __future__ import annotations


class VMError(Exception):
    """A one-line reason the VM run cannot happen; the subcommand prints it and exits 125.

    125 is what ``git bisect run`` reads as "cannot test this revision", which is what a
    missing qemu, kernel or module means to someone bisecting a kernel.
    """


EXIT_VM_ERROR = 125
