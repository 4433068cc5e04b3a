"""What the VM runner's host and guest both name: the console marker the guest's lines
start with, the guest's directories and ``vm --power-cut``'s phases. A module of its own
at the bottom, so guest-side code below the suites (the ``guest`` modules of
:mod:`pytest_folio.mtdtests` and :mod:`pytest_folio.fsx`) shares the names with the
runner without importing it."""

MARK = "@@folio-vm"
GUEST_RUN = "/run/folio"  # everything the guest writes lives under here
GUEST_OUT = f"{GUEST_RUN}/out"  # the writable share: results travel back through it

POWERCUT_ENV = "PYTEST_FOLIO_POWERCUT"  # vm --power-cut: "cut" in the first boot, "check" next
PHASES = ("cut", "check")
CUT_MARK = "powercut"                   # the console line the host kills qemu on

# vm --guests: set for the controller on the host, whose --folio-mtd/--folio-fs paths are
# its workers' (in the guests), so it classifies them without probing them here
GUEST_TARGETS_ENV = "PYTEST_FOLIO_GUEST_TARGETS"
